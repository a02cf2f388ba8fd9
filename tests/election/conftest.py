"""Fixtures of the election tests: the local API server over HTTP, replica processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client

from tests.conftest import REPO_ROOT

NAMESPACE = "haptic"


@pytest.fixture(scope="module")
def api_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from localcluster.testing import start_cluster

    server = start_cluster(tmp_path_factory.mktemp("apiserver"))
    try:
        core = client.CoreV1Api(server.api_client())
        core.create_namespace({"metadata": {"name": NAMESPACE}})
        yield server
    finally:
        server.stop()


@pytest.fixture
def registries() -> Iterator[None]:
    """Empty component registries for a ReplicaRuntime under test, restored afterwards."""
    from controller.replica_runtime import LeaderComponents, ReplicaComponents

    saved = (LeaderComponents.registered(), ReplicaComponents.registered())
    LeaderComponents.clear()
    ReplicaComponents.clear()
    yield
    LeaderComponents.clear()
    ReplicaComponents.clear()
    LeaderComponents._components.extend(saved[0])
    ReplicaComponents._components.extend(saved[1])


@pytest.fixture
def lease_name() -> str:
    return f"haptic-leader-{uuid.uuid4().hex[:8]}"


class Replica:
    """A tests.election.replica process and the JSON lines it printed."""

    def __init__(self, identity: str, argv: list[str], env: dict[str, str]):
        self.identity = identity
        self.lines: list[dict[str, Any]] = []
        self.proc = subprocess.Popen(
            argv, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, text=True
        )
        self.killed_at: float | None = None
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                self.lines.append(json.loads(line))

    def events(self, kind: str) -> list[dict[str, Any]]:
        return [line for line in self.lines if line["event"] == kind]

    @property
    def leading(self) -> bool:
        return len(self.events("started")) > len(self.events("stopped")) and self.alive

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None and self.killed_at is None

    def terminate(self) -> float:
        sent = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        return sent

    def kill(self) -> float:
        self.killed_at = time.monotonic()
        self.proc.send_signal(signal.SIGKILL)
        return self.killed_at

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        self._reader.join(5)


@pytest.fixture
def replicas(api_server: Any, lease_name: str) -> Iterator[Callable[..., Replica]]:
    started: list[Replica] = []
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))

    def start(identity: str, lease: float = 2.0, renew: float = 1.5, retry: float = 0.3) -> Replica:
        argv = [
            sys.executable,
            "-m",
            "tests.election.replica",
            "--kubeconfig",
            str(api_server.kubeconfig),
            "--namespace",
            NAMESPACE,
            "--lease",
            lease_name,
            "--identity",
            identity,
            "--lease-duration",
            str(lease),
            "--renew-deadline",
            str(renew),
            "--retry-period",
            str(retry),
        ]
        replica = Replica(identity, argv, env)
        started.append(replica)
        return replica

    yield start
    for replica in started:
        replica.close()


def terms_of(replicas: list[Replica]) -> list[dict[str, Any]]:
    """Every term any replica started: holder, epoch, start and the end of its authority
    (its own end, its renew deadline, or the moment its process was killed)."""
    terms = []
    for replica in replicas:
        ends = {line["epoch"]: line for line in replica.events("stopped")}
        for start in replica.events("started"):
            stop = ends.get(start["epoch"])
            end = float("inf")
            if stop is not None:
                end = min(stop["t"], stop["valid_until"])
            elif replica.killed_at is not None:
                end = replica.killed_at
            terms.append(
                {
                    "holder": replica.identity,
                    "epoch": start["epoch"],
                    "start": start["t"],
                    "end": end,
                }
            )
    return sorted(terms, key=lambda term: term["start"])

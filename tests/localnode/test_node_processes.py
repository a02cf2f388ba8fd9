"""The node as a process: `python -m localcluster up` and `python -m localcluster.node`, both
stopped with SIGTERM, leave no process behind; a node restart keeps pod addresses."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kubernetes import client, config

from devstack.stack import wait_for
from localcluster.node.processes import MARKER_ENV
from localcluster.testing import ApiServer

from .support import pids_with_env

REPO = Path(__file__).resolve().parents[2]


class Proc:
    """A child in its own session whose output is collected by a thread."""

    def __init__(self, argv: list[str]) -> None:
        env = dict(os.environ, PYTHONPATH=str(REPO))
        self.popen = subprocess.Popen(
            argv,
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            self.lines.append(line)

    def saw(self, text: str) -> bool:
        return any(text in line for line in self.lines)

    def terminate(self, timeout: float = 60) -> int:
        self.popen.send_signal(signal.SIGTERM)
        return self.popen.wait(timeout=timeout)

    def cleanup(self) -> None:
        if self.popen.poll() is None:
            os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait()
        self._reader.join(5)


@contextmanager
def running(argv: list[str]) -> Iterator[Proc]:
    proc = Proc(argv)
    try:
        yield proc
    finally:
        proc.cleanup()


def sleeper(name: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": "x", "command": ["sleep", "600"]}]},
    }


def test_up_sigterm_stops_every_pod_process(tmp_path: Path) -> None:
    state = (tmp_path / "cluster").resolve()
    with running([sys.executable, "-m", "localcluster", "up", "--state-dir", str(state)]) as up:
        wait_for(lambda: up.saw("ready") or up.popen.poll() is not None, what="up ready")
        assert up.saw("node started"), "".join(up.lines)
        core = client.CoreV1Api(config.new_client_from_config(str(state / "kubeconfig")))
        apps = client.AppsV1Api(core.api_client)
        apps.create_namespaced_deployment(
            "default",
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "web"},
                "spec": {
                    "replicas": 2,
                    "selector": {"matchLabels": {"app": "web"}},
                    "template": {
                        "metadata": {"labels": {"app": "web"}},
                        "spec": {
                            "containers": [
                                {
                                    "name": "web",
                                    "image": "x",
                                    "command": ["python", "-m", "localcluster.sample_backend"],
                                }
                            ]
                        },
                    },
                },
            },
        )
        core.create_namespaced_pod("default", sleeper("lonely"))
        wait_for(
            lambda: len(pids_with_env(**{MARKER_ENV: str(state)})) >= 3,
            timeout=60,
            what="pod processes under up",
        )
        assert up.terminate() == 0
    assert pids_with_env(**{MARKER_ENV: str(state)}) == []


def test_node_alone_restart_keeps_address_and_counts_restart(tmp_path: Path) -> None:
    state = (tmp_path / "node").resolve()
    marker = {MARKER_ENV: str(state)}
    with ApiServer.start(tmp_path / "api") as api:
        core = client.CoreV1Api(api.api_client())
        node_cmd = [
            sys.executable,
            "-m",
            "localcluster.node",
            "--kubeconfig",
            str(api.kubeconfig),
            "--state-dir",
            str(state),
        ]
        with running(node_cmd) as node:
            core.create_namespaced_pod("default", sleeper("keep"))
            pod = wait_for(
                lambda: (
                    (p := core.read_namespaced_pod("keep", "default")).status.phase == "Running"
                    and p
                ),
                what="pod running",
            )
            first_pids = wait_for(lambda: pids_with_env(**marker), what="process")
            assert node.terminate() == 0
            # The pod worker stopped its group itself; the safety sweep found nothing.
            wait_for(lambda: node.saw("node stopped; 0 stray processes swept"), what="stop line")
        assert pids_with_env(**marker) == []
        # The pod object stays; a new node run restarts its container on the same address.
        with running(node_cmd) as node:
            again = wait_for(
                lambda: (
                    (p := core.read_namespaced_pod("keep", "default"))
                    .status.container_statuses[0]
                    .restart_count
                    == 1
                    and p.status.container_statuses[0].started
                    and p
                ),
                what="container restarted",
            )
            assert again.status.pod_ip == pod.status.pod_ip
            second = wait_for(lambda: pids_with_env(**marker), what="process again")
            assert set(second).isdisjoint(first_pids)
            assert node.terminate() == 0
        assert pids_with_env(**marker) == []

"""Run the API server as a subprocess for tests: `with ApiServer.start() as api: ...`."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Self

import kubernetes

from config.env import child_environ, request_shapes_dir, test_cluster_kind
from controller.kubeclient import from_kubeconfig
from localcluster.node.processes import end

REPO_ROOT = Path(__file__).resolve().parent.parent


def _launch(
    state_dir: Path, port: int, extra_args: list[str], timeout: float
) -> tuple[subprocess.Popen[str], str, str]:
    """Start `python -m localcluster serve` and wait for its `ready` line."""
    cmd = [
        sys.executable, "-m", "localcluster", "serve", "--port", str(port),
        "--state-dir", str(state_dir), *extra_args,
    ]  # fmt: skip
    shapes = request_shapes_dir()
    if shapes is not None and "--request-shapes" not in extra_args:
        cmd += ["--request-shapes", str(shapes / f"{uuid.uuid4().hex}.jsonl")]
    return launch_server(cmd, "apiserver", timeout)


def launch_server(
    cmd: list[str], name: str, timeout: float
) -> tuple[subprocess.Popen[str], str, str]:
    """Start a server that prints `NAME listening on URL`, `admin listening on URL` and
    `ready` (the local API server, the real tier's fault proxy); returns it and both URLs."""
    env = child_environ()
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
        cwd=str(REPO_ROOT),
    )  # fmt: skip
    url = admin_url = ""
    lines: list[str] = []
    assert proc.stdout is not None
    # A reader thread, so a server that hangs before "ready" cannot block us past timeout.
    ready = threading.Event()

    def read_until_ready() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if line.strip() == "ready":
                break
        ready.set()

    reader = threading.Thread(target=read_until_ready, daemon=True)
    reader.start()
    ready.wait(timeout)
    for line in lines:
        if line.startswith(f"{name} listening on "):
            url = line.split()[-1]
        elif line.startswith("admin listening on "):
            admin_url = line.split()[-1]
    if not ready.is_set() or not url or not admin_url or proc.poll() is not None:
        proc.kill()
        proc.wait()
        raise RuntimeError(f"{name} did not start:\n" + "".join(lines))
    reader.join()
    return proc, url, admin_url


def kubeconfig_client(kubeconfig: Path) -> kubernetes.client.ApiClient:
    """A fresh client built from a kubeconfig file, as the controller builds its own; the
    local and the real cluster's test handles share it."""
    return from_kubeconfig(str(kubeconfig))


class ClusterHandle:
    """What a test's cluster offers, local or real: a client from its kubeconfig, the local
    node that serves as its kubelet, and stop() (also on leaving a `with` block), which
    removes a state dir the handle made itself."""

    state_dir: Path
    kubeconfig: Path
    _own_dir: bool

    def api_client(self) -> kubernetes.client.ApiClient:
        """A fresh client for this server, as `load_kube_config` on its kubeconfig builds it."""
        return kubeconfig_client(self.kubeconfig)

    def _node_access(self) -> dict[str, Any]:
        """How the node reaches this cluster (NodeAgent's keyword arguments)."""
        raise NotImplementedError

    def node(self, state_dir: Path | None = None) -> Any:
        """The local node for this cluster (not started)."""
        from localcluster.node import NodeAgent

        return NodeAgent(state_dir=state_dir or self.state_dir, **self._node_access())

    def _stop_servers(self, timeout: float) -> None:
        raise NotImplementedError

    def stop(self, timeout: float = 15.0) -> None:
        self._stop_servers(timeout)
        if self._own_dir:
            shutil.rmtree(self.state_dir, ignore_errors=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class FaultAdmin:
    """add_fault/remove_fault/clear_faults through an admin listener's /admin/faults (the
    local API server's, or the real tier's fault proxy's; localcluster/README.md)."""

    admin_url: str

    def _admin(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(
            self.admin_url + path,
            data=data,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read() or b"null")

    def add_fault(self, **kw: Any) -> int:
        """Inject a fault (see localcluster/README.md); returns its id."""
        return int(self._admin("POST", "/admin/faults", kw)["id"])

    def remove_fault(self, fault_id: int) -> None:
        self._admin("DELETE", f"/admin/faults/{fault_id}")

    def clear_faults(self) -> None:
        self._admin("DELETE", "/admin/faults")


class ApiServer(ClusterHandle, FaultAdmin):
    """A `python -m localcluster serve` process on a free port, with its kubeconfig."""

    def __init__(
        self,
        proc: subprocess.Popen[str],
        url: str,
        admin_url: str,
        state_dir: Path,
        own_dir: bool,
        extra_args: list[str],
    ) -> None:
        self.url = url
        self.admin_url = admin_url
        self.state_dir = state_dir
        self.kubeconfig = state_dir / "kubeconfig"
        self._own_dir = own_dir
        self._extra_args = extra_args
        self._output: list[str] = []
        self._attach(proc)

    def _attach(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self._drain = threading.Thread(target=self._read_rest, args=(proc,), daemon=True)
        self._drain.start()

    @classmethod
    def start(
        cls,
        state_dir: Path | None = None,
        port: int = 0,
        extra_args: list[str] | None = None,
        timeout: float = 30.0,
    ) -> ApiServer:
        """Start a server; without state_dir it uses a temporary one removed by stop()."""
        own_dir = state_dir is None
        if state_dir is None:
            state_dir = Path(tempfile.mkdtemp(prefix="localcluster-test-"))
        args = list(extra_args or [])
        try:
            proc, url, admin_url = _launch(state_dir, port, args, timeout)
        except BaseException:
            if own_dir:
                shutil.rmtree(state_dir, ignore_errors=True)
            raise
        return cls(proc, url, admin_url, state_dir, own_dir, args)

    def _read_rest(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self._output.append(line)

    @property
    def output(self) -> str:
        return "".join(self._output)

    @property
    def port(self) -> int:
        return urllib.parse.urlsplit(self.url).port or 0

    def configuration(self) -> kubernetes.client.Configuration:
        config = kubernetes.client.Configuration()
        config.host = self.url
        return config

    def _node_access(self) -> dict[str, Any]:
        return {"api_url": self.url, "kubeconfig": self.kubeconfig}

    def state(self) -> dict[str, Any]:
        return self._admin("GET", "/admin/state")

    def _end(self, sig: int, timeout: float) -> None:
        end(self.proc, timeout, sig)
        self._drain.join(timeout=5)

    def kill(self) -> None:
        """SIGKILL the server (a crash); restart() brings it back with its state."""
        self._end(signal.SIGKILL, 10)

    def restart(self, timeout: float = 30.0) -> None:
        """Stop (if running) and start again on the same port with the same state dir."""
        self._end(signal.SIGTERM, 15)
        proc, url, admin_url = _launch(self.state_dir, self.port, self._extra_args, timeout)
        self.url, self.admin_url = url, admin_url
        self._attach(proc)

    def _stop_servers(self, timeout: float) -> None:
        self._end(signal.SIGTERM, timeout)


def start_clusters(count: int, timeout: float | None = None) -> list[Any]:
    """`count` clusters as start_cluster() makes them; the real control planes are started
    in parallel (each takes tens of seconds, most of it waiting). If one fails, the others
    are stopped. `timeout`: a local API server's start bound (a loaded soak needs longer);
    the real control planes keep their own."""
    if test_cluster_kind() == "real":
        from localcluster.real.testing import RealApiServer

        return RealApiServer.start_many(count)
    started: list[ApiServer] = []
    try:
        for _ in range(count):
            started.append(ApiServer.start(**({"timeout": timeout} if timeout else {})))
    except BaseException:
        for server in started:
            server.stop()
        raise
    return started


@contextlib.contextmanager
def api_servers(count: int) -> Iterator[list[Any]]:
    """`start_clusters(count)`, all stopped on exit."""
    started = start_clusters(count)
    try:
        yield started
    finally:
        for server in started:
            server.stop()


@contextlib.contextmanager
def cluster_with_node(state_dir: Path) -> Iterator[tuple[ApiServer, Any]]:
    """A local API server and its started node, sharing the state dir as under `up` (so
    pods/log finds the logs); the node is stopped on exit, then the server."""
    with ApiServer.start(state_dir) as api:
        node = api.node(api.state_dir.resolve())
        node.start()
        try:
            yield api, node
        finally:
            node.stop(timeout=20)


def start_cluster(state_dir: Path | None = None, **kwargs: Any) -> Any:
    """The cluster a fixture with pods starts: the local API server, or the real control
    plane when HAPTIC_TEST_CLUSTER=real. Either has url, kubeconfig, api_client(), node(),
    stop()."""
    if test_cluster_kind() == "real":
        from localcluster.real.testing import RealApiServer

        return RealApiServer.start(state_dir, **kwargs)
    return ApiServer.start(state_dir, **kwargs)

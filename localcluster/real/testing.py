"""The real control plane for tests, shaped like `localcluster.testing.ApiServer`, so a
fixture can start either (HAPTIC_TEST_CLUSTER=real picks this one)."""

from __future__ import annotations

import shutil
import signal
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from localcluster.node.processes import end
from localcluster.testing import ClusterHandle, FaultAdmin, launch_server

from . import pki
from .cluster import ControlPlane, client_certificate, start_many, write_kubeconfig


class FaultProxyProcess:
    """`python -m localcluster.real.faultproxy` in front of one control plane's API server
    (localcluster/real/faultproxy.py), with its kubeconfig: the admin one with the proxy as
    its server."""

    def __init__(self, plane: ControlPlane, timeout: float = 30.0) -> None:
        cmd = [
            sys.executable, "-m", "localcluster.real.faultproxy", "--upstream", plane.url,
            "--pki", str(plane.pki),
        ]  # fmt: skip
        self.proc, self.url, self.admin_url = launch_server(cmd, "proxy", timeout)
        self.output: list[str] = []
        self._drain = threading.Thread(target=self._read_rest, daemon=True)
        self._drain.start()
        self.kubeconfig = plane.state_dir / "proxy.kubeconfig"
        user = client_certificate(plane.pki, pki.ADMIN.file_stem)
        write_kubeconfig(self.kubeconfig, self.url, plane.pki / "ca.crt", user)

    def _read_rest(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.output.append(line)

    def stop(self, timeout: float = 10.0) -> None:
        end(self.proc, timeout)
        self._drain.join(timeout=5)


class RealApiServer(ClusterHandle, FaultAdmin):
    """etcd + kube-apiserver + controller manager + scheduler behind a fault proxy: `url` and
    `kubeconfig` are the proxy's, so add_fault() acts on this handle's clients as on the local
    server's (`plane.url` and `plane.kubeconfig` reach the API server directly); `node()`
    makes the local node that serves as its kubelet (it talks to the API server directly)."""

    def __init__(self, plane: ControlPlane, own_dir: bool) -> None:
        self.plane = plane
        self._own_dir = own_dir
        try:
            self.proxy = FaultProxyProcess(plane)
        except BaseException:
            self._stop_servers(15.0)
            raise
        self.admin_url = self.proxy.admin_url

    @classmethod
    def start(
        cls,
        state_dir: Path | None = None,
        port: int = 0,
        extra_args: list[str] | None = None,
        timeout: float = 180.0,
        install_crds: bool = True,
    ) -> RealApiServer:
        """extra_args are the local server's flags (watch history, bookmarks): the real
        server has its own, so they are ignored here. install_crds=False leaves deploy/crds/
        to the caller (a test that applies the manifests itself)."""
        own_dir = state_dir is None
        if state_dir is None:
            state_dir = Path(tempfile.mkdtemp(prefix="localcluster-real-test-"))
        plane = ControlPlane(Path(state_dir), port=port)
        if not install_crds:
            plane.crd_dir = None
        try:
            plane.start(timeout=timeout)
            return cls(plane, own_dir)
        except BaseException:
            if own_dir:
                shutil.rmtree(state_dir, ignore_errors=True)
            raise

    @classmethod
    def start_many(cls, count: int, timeout: float = 180.0) -> list[RealApiServer]:
        """`count` clusters in temporary state dirs, started in parallel (start_many)."""
        dirs = [Path(tempfile.mkdtemp(prefix="localcluster-real-test-")) for _ in range(count)]
        planes = [ControlPlane(d) for d in dirs]
        try:
            start_many(planes, timeout)
        except BaseException:
            for d in dirs:
                shutil.rmtree(d, ignore_errors=True)
            raise
        started: list[RealApiServer] = []
        try:
            for plane in planes:
                started.append(cls(plane, own_dir=True))
        except BaseException:
            for server in started:
                server.stop()
            for plane in planes[len(started) :]:
                plane.stop()
            for d in dirs:
                shutil.rmtree(d, ignore_errors=True)
            raise
        return started

    @property
    def url(self) -> str:
        return self.proxy.url

    @property
    def port(self) -> int:
        return self.plane.port

    @property
    def state_dir(self) -> Path:
        return self.plane.state_dir

    @property
    def kubeconfig(self) -> Path:
        return self.proxy.kubeconfig

    @property
    def audit_log(self) -> Path:
        return self.plane.audit_log

    def _node_access(self) -> dict[str, Any]:
        # The node as this cluster's kubelet, with the node's own credentials.
        return {
            "kubeconfig": self.plane.kubeconfig_for("node"),
            "real_cluster": True,
            "pki_dir": self.plane.pki,
        }

    def kill(self) -> None:
        """SIGKILL the API server (a crash); etcd keeps the state for restart()."""
        proc = self.plane.processes.get("kube-apiserver")
        if proc is not None:
            proc.signal(signal.SIGKILL)
            proc.stop(grace=5)

    def restart(self, timeout: float = 120.0) -> None:
        """The API server again, on the same port, from the same etcd."""
        self.plane.restart_apiserver(timeout)

    def _stop_servers(self, timeout: float) -> None:
        proxy = getattr(self, "proxy", None)
        if proxy is not None:
            proxy.stop()
        self.plane.stop()

"""The real control plane for tests, shaped like `localcluster.testing.ApiServer`, so a
fixture can start either (HAPTIC_TEST_CLUSTER=real picks this one)."""

from __future__ import annotations

import shutil
import signal
import tempfile
import unittest
from pathlib import Path
from typing import Any

from localcluster.testing import ClusterHandle

from .cluster import ControlPlane, start_many


class FaultsUnsupported(unittest.SkipTest):
    """Fault injection is a feature of the local API server's admin port only; a test that
    asks the real cluster for it is skipped (pytest honours unittest.SkipTest)."""


class RealApiServer(ClusterHandle):
    """etcd + kube-apiserver + controller manager + scheduler, admin kubeconfig in
    `state_dir/kubeconfig`; `node()` makes the local node that serves as its kubelet."""

    admin_url = ""

    def __init__(self, plane: ControlPlane, own_dir: bool) -> None:
        self.plane = plane
        self._own_dir = own_dir

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
        except BaseException:
            if own_dir:
                shutil.rmtree(state_dir, ignore_errors=True)
            raise
        return cls(plane, own_dir)

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
        return [cls(plane, own_dir=True) for plane in planes]

    @property
    def url(self) -> str:
        return self.plane.url

    @property
    def port(self) -> int:
        return self.plane.port

    @property
    def state_dir(self) -> Path:
        return self.plane.state_dir

    @property
    def kubeconfig(self) -> Path:
        return self.plane.kubeconfig

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

    def add_fault(self, **kw: Any) -> int:
        raise FaultsUnsupported("fault injection needs the local API server")

    def remove_fault(self, fault_id: int) -> None:
        raise FaultsUnsupported("fault injection needs the local API server")

    def clear_faults(self) -> None:
        """Nothing to clear: no fault can have been added (a fixture's cleanup calls this)."""

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
        self.plane.stop()

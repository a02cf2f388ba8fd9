"""NodeAgent: wires the informers, the kubelet and the two controllers together."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from kubernetes import client

from .deployments import DeploymentController
from .endpoints import MANAGED_BY, MANAGED_BY_LABEL
from .endpointslices import EndpointSliceController
from .ipam import LoopbackBlock
from .kube import Handler, Informer, Obj, make_api_client
from .kubelet import Kubelet, now_rfc3339
from .kubeletapi import KubeletServer
from .processes import sweep
from .registration import KUBELET_PORT, LOCAL_NODE_ADDRESS, NodeRegistration, report

log = logging.getLogger(__name__)

DEFAULT_NODE_NAME = "localnode"


class NodeAgent:
    """A local node: runs pods scheduled to it as process groups and keeps EndpointSlices and
    Deployments reconciled. Talks to the API server only through the kubernetes client."""

    def __init__(
        self,
        api_url: str | None = None,
        state_dir: Path | str = Path("var/localcluster"),
        kubeconfig: Path | str | None = None,
        node_name: str = DEFAULT_NODE_NAME,
        real_cluster: bool = False,
        pki_dir: Path | None = None,
    ) -> None:
        """real_cluster: the API server is kube-apiserver with a controller manager and a
        scheduler, so the node is only a kubelet (registers its Node, renews its Lease,
        runs the pods bound to it), with pod addresses a real server accepts. pki_dir: the
        cluster's PKI (localcluster/real/pki.py); with it the node serves container logs to
        the API server (kubeletapi.py), as a kubelet does."""
        self.real_cluster = real_cluster
        self.pki_dir = Path(pki_dir) if pki_dir is not None else None
        self.kubelet_api: KubeletServer | None = None
        self.registration: NodeRegistration | None = None
        self.block: LoopbackBlock | None = None
        self.api_url = api_url
        self.state_dir = Path(state_dir).resolve()
        self.kubeconfig = Path(kubeconfig) if kubeconfig is not None else None
        self.node_name = node_name
        self._stop = threading.Event()
        self._stop_deadline = [float("inf")]
        self._started = False
        self._api: client.ApiClient | None = None
        self._informers: list[Informer] = []
        self.swept: list[int] = []

    def start(self) -> None:
        """Start every loop in background threads and return once the caches are filled."""
        if self._started:
            return
        self._started = True
        self.state_dir.mkdir(parents=True, exist_ok=True)
        leftovers = sweep(str(self.state_dir))
        if leftovers:
            log.warning("killed %d processes left by an earlier node run", len(leftovers))
        self._api = api = make_api_client(self.api_url, self.kubeconfig)
        if self.real_cluster:
            self._start_kubelet_only(api)
            return
        self.kubelet = Kubelet(api, self.node_name, self.state_dir, self._stop_deadline)
        report(api, self.node_name, LOCAL_NODE_ADDRESS, ready=True, now=now_rfc3339())

        handlers: dict[str, list[Handler]] = {
            "pods": [], "services": [], "slices": [], "deps": [], "replicasets": [],
        }  # fmt: skip

        def fan_out(name: str) -> Handler:
            def handle(kind: str, obj: Obj) -> None:
                for fn in handlers[name]:
                    fn(kind, obj)

            return handle

        self.pods = Informer("pods", api, "/api/v1/pods", fan_out("pods"), self._stop)
        self.services = Informer(
            "services", api, "/api/v1/services", fan_out("services"), self._stop
        )
        self.slices = Informer(
            "endpointslices",
            api,
            "/apis/discovery.k8s.io/v1/endpointslices",
            fan_out("slices"),
            self._stop,
            query=[("labelSelector", f"{MANAGED_BY_LABEL}={MANAGED_BY}")],
        )
        self.deployments = Informer(
            "deployments", api, "/apis/apps/v1/deployments", fan_out("deps"), self._stop
        )
        self.replica_sets = Informer(
            "replicasets",
            api,
            "/apis/apps/v1/replicasets",
            fan_out("replicasets"),
            self._stop,
        )
        self._informers = [
            self.pods, self.services, self.slices, self.deployments, self.replica_sets,
        ]  # fmt: skip
        self.endpointslices = EndpointSliceController(
            api, self.pods, self.services, self.slices, self._stop
        )
        self.deployment_controller = DeploymentController(
            api, self.pods, self.deployments, self.node_name, self._stop, self.replica_sets
        )
        handlers["pods"] += [
            self.kubelet.handle,
            self.endpointslices.on_pod,
            self.deployment_controller.on_pod,
        ]
        handlers["services"].append(self.endpointslices.on_service)
        handlers["slices"].append(self.endpointslices.on_slice)
        handlers["deps"].append(self.deployment_controller.on_deployment)
        handlers["replicasets"].append(self.deployment_controller.on_replica_set)
        for informer in self._informers:
            informer.start()
        deadline = time.monotonic() + 30
        for informer in self._informers:
            informer.synced.wait(max(0.0, deadline - time.monotonic()))
        self.kubelet.release_addresses_except(
            {p["metadata"].get("uid", "") for p in self.pods.items()}
        )
        self.kubelet.events.start()
        self.endpointslices.loop.start()
        self.deployment_controller.loop.start()

    def _start_kubelet_only(self, api: client.ApiClient) -> None:
        self.block = LoopbackBlock(self.state_dir / "node" / "address-block")
        address = self.block.claim()
        self.kubelet = Kubelet(api, self.node_name, self.state_dir, self._stop_deadline, self.block)
        self.registration = NodeRegistration(api, self.node_name, address, self._stop)
        try:
            if self.pki_dir is not None:
                self.kubelet_api = self._kubelet_api(address)  # bound now, served below
            self.registration.register()
        except BaseException:
            if self.kubelet_api is not None:
                self.kubelet_api.stop()
                self.kubelet_api = None
            self.block.release()
            self._started = False
            raise
        # What a kubelet watches: the pods bound to it (the Node authorizer's view).
        own = [("fieldSelector", f"spec.nodeName={self.node_name}")]
        self.pods = Informer(
            "pods", api, "/api/v1/pods", self.kubelet.handle, self._stop, query=own
        )
        self._informers = [self.pods]
        self.pods.start()
        self.pods.synced.wait(30)
        self.kubelet.release_addresses_except(
            {p["metadata"].get("uid", "") for p in self.pods.items()}
        )
        self.kubelet.events.start()
        self.registration.start()
        if self.kubelet_api is not None:
            self.kubelet_api.start()

    def _kubelet_api(self, address: str) -> KubeletServer:
        from localcluster.real import pki

        assert self.pki_dir is not None
        cert, key = pki.kubelet_serving(self.pki_dir, self.node_name, address)
        tls = (cert, key, self.pki_dir / "ca.crt")
        return KubeletServer(address, KUBELET_PORT, self.state_dir, tls, pki.KUBELET_CLIENT.user)

    def stop(self, timeout: float = 30) -> None:
        """Stop the controllers, terminate every pod's processes (grace bounded by timeout),
        then kill anything that still carries this node's marker."""
        if not self._started:
            return
        self._stop_deadline[0] = time.monotonic() + timeout
        self._stop.set()
        if self.kubelet_api is not None:
            self.kubelet_api.stop()
            self.kubelet_api = None
        self.kubelet.stop()
        for worker in self.kubelet.workers():
            worker.join(max(0.1, self._stop_deadline[0] - time.monotonic()))
        for informer in self._informers:
            informer.join(2.0)
        self.kubelet.events.join(2.0)
        if self.registration is not None:
            self.registration.join(2.0)
        else:
            self.endpointslices.loop.join(2.0)
            self.deployment_controller.loop.join(2.0)
        # Pod workers stop their own process groups; the sweep catches daemonized strays
        # (processes that left their group) and is recorded so tests can tell the two apart.
        self.swept = sweep(str(self.state_dir))
        if self.swept:
            log.warning("killed %d stray processes at node stop", len(self.swept))
        if self.block is not None:
            self.block.release()
        if self._api is not None:
            # On a real cluster the node lifecycle controller judges the node by its Lease.
            if not self.real_cluster:
                report(
                    self._api, self.node_name, LOCAL_NODE_ADDRESS, ready=False, now=now_rfc3339()
                )
            self._api.close()
        self._started = False

    def __enter__(self) -> NodeAgent:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

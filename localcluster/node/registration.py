"""What a kubelet does for its Node on a real cluster: register the `Node` object, keep its
status Ready, and renew its Lease in `kube-node-lease` (the heartbeat the node lifecycle
controller reads). The object builders are pure; NodeRegistration does the I/O."""

from __future__ import annotations

import logging
import os
import platform
import threading
from datetime import UTC, datetime
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from .kube import Obj, raw

log = logging.getLogger(__name__)

LEASE_NAMESPACE = "kube-node-lease"
LEASE_DURATION = 40  # seconds, the kubelet's default
RENEW_INTERVAL = 10.0  # a quarter of the duration, as the kubelet
STATUS_INTERVAL = 60.0  # Ready's heartbeat; the Lease is the frequent signal
VERSION = "v0.0.0-localcluster"
# The kubelet's port, in the Node's status (the API server dials it for pod logs); the node
# binds it on its own address only (kubeletapi.py).
KUBELET_PORT = 10250
# On the local API server pods get 127.x addresses and the node answers on the loopback.
LOCAL_NODE_ADDRESS = "127.0.0.1"


def _micro_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def node_status(address: str, now: str, pods: int = 250, ready: bool = True) -> dict[str, Any]:
    """A Ready (or, once stopped, NotReady) node with room for `pods` pods; capacity is what
    the scheduler fits pods to."""
    capacity = {"cpu": str(os.cpu_count() or 1), "memory": "16Gi", "pods": str(pods)}
    condition = {
        "type": "Ready",
        "status": "True" if ready else "False",
        "reason": "KubeletReady" if ready else "KubeletStopped",
        "message": "localcluster node is posting ready status" if ready else "node stopped",
        "lastHeartbeatTime": now,
        "lastTransitionTime": now,
    }
    return {
        "capacity": capacity,
        "allocatable": dict(capacity),
        "conditions": [condition],
        "addresses": [
            {"type": "InternalIP", "address": address},
            {"type": "Hostname", "address": platform.node() or "localhost"},
        ],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": KUBELET_PORT}},
        "nodeInfo": {
            "machineID": "",
            "systemUUID": "",
            "bootID": "",
            "kernelVersion": platform.release(),
            "osImage": "localcluster",
            "containerRuntimeVersion": "localcluster://processes",
            "kubeletVersion": VERSION,
            "kubeProxyVersion": "",
            "operatingSystem": "linux",
            "architecture": "amd64",
        },
    }


def node_object(name: str, address: str, now: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
            },
        },
        "spec": {},
        "status": node_status(address, now),
    }


def heartbeat(status: dict[str, Any], address: str, now: str) -> dict[str, Any]:
    """The status to write: Ready's heartbeat moves, its transition time stays."""
    fresh = node_status(address, now)
    for cond in status.get("conditions") or []:
        if cond.get("type") == "Ready" and cond.get("status") == "True":
            fresh["conditions"][0]["lastTransitionTime"] = cond.get("lastTransitionTime", now)
    return fresh


def lease_object(name: str, node_uid: str, now: str) -> Obj:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": name,
            "namespace": LEASE_NAMESPACE,
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Node", "name": name, "uid": node_uid}
            ],
        },
        "spec": {
            "holderIdentity": name,
            "leaseDurationSeconds": LEASE_DURATION,
            "renewTime": now,
        },
    }


class NodeRegistration:
    """register() once at start; then a thread renews the Lease and the Ready heartbeat."""

    def __init__(
        self, api: client.ApiClient, name: str, address: str, stop: threading.Event
    ) -> None:
        self.core = client.CoreV1Api(api)
        self.coordination = client.CoordinationV1Api(api)
        self.name = name
        self.address = address
        self._stop = stop
        self._uid = ""
        self._thread = threading.Thread(target=self._run, name="node-lease", daemon=True)

    def register(self) -> None:
        try:
            node = raw(self.core.create_node, node_object(self.name, self.address, _now()))
        except ApiException as exc:
            if exc.status != 409:
                raise
            node = raw(self.core.read_node, self.name)
        self._uid = node["metadata"]["uid"]
        self._update_status()
        self._renew()

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def _update_status(self) -> None:
        # A patch of status alone, as the kubelet: a PUT of the object read a moment ago
        # carries its spec.taints, which the node lifecycle controller may have changed
        # since, and NodeRestriction forbids a node to change its own taints.
        node = raw(self.core.read_node, self.name)
        status = heartbeat(node.get("status") or {}, self.address, _now())
        raw(
            self.core.patch_node_status,
            self.name,
            {"status": status},
            _content_type="application/merge-patch+json",
        )

    def _renew(self) -> None:
        try:
            lease = raw(self.coordination.read_namespaced_lease, self.name, LEASE_NAMESPACE)
        except ApiException as exc:
            if exc.status != 404:
                raise
            body = lease_object(self.name, self._uid, _micro_now())
            raw(self.coordination.create_namespaced_lease, LEASE_NAMESPACE, body)
            return
        lease["spec"]["holderIdentity"] = self.name
        lease["spec"]["leaseDurationSeconds"] = LEASE_DURATION
        lease["spec"]["renewTime"] = _micro_now()
        raw(self.coordination.replace_namespaced_lease, self.name, LEASE_NAMESPACE, lease)

    def _run(self) -> None:
        since_status = 0.0
        while not self._stop.wait(RENEW_INTERVAL):
            since_status += RENEW_INTERVAL
            try:
                self._renew()
                if since_status >= STATUS_INTERVAL:
                    since_status = 0.0
                    self._update_status()
            except Exception as exc:  # the API server is away: try again next round
                log.warning("node heartbeat: %s", exc)


def report(api: client.ApiClient, name: str, address: str, ready: bool, now: str) -> None:
    """On the local API server (no node lifecycle controller): at start, create the Node if
    missing and write a Ready status; at stop, only a NotReady status with a short timeout, so
    a stop never waits on an unreachable server. Errors are logged, never raised (a node
    without its Node object still runs pods)."""
    core = client.CoreV1Api(api)
    timeout = 10 if ready else 2
    try:
        if ready:
            try:
                raw(core.create_node, node_object(name, address, now), _request_timeout=timeout)
            except ApiException as exc:
                if exc.status != 409:
                    raise
        raw(
            core.patch_node_status,
            name,
            {"status": node_status(address, now, ready=ready)},
            _content_type="application/merge-patch+json",
            _request_timeout=timeout,
        )
    except Exception as exc:
        log.warning("could not report Node %s: %s", name, exc)

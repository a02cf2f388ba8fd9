"""The local node's Node object, as a kubelet registers its own: created (or taken over) at
start with a Ready condition, marked NotReady when the node stops, so `kubectl get nodes`
and anything that reads Nodes sees the node that runs the pods."""

from __future__ import annotations

import logging
import os
import platform
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from localcluster.discovery import VERSION

from .kube import MERGE_PATCH, raw

log = logging.getLogger(__name__)


def node_body(name: str) -> dict[str, Any]:
    """The Node as created: metadata only (status goes through /status)."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "node-role.kubernetes.io/control-plane": "",
            },
        },
        "spec": {},
    }


def node_status(ready: bool, now: str) -> dict[str, Any]:
    """The status a kubelet reports: the Ready condition, addresses, capacity, versions."""
    cpus = str(os.cpu_count() or 1)
    return {
        "conditions": [
            {
                "type": "Ready",
                "status": "True" if ready else "False",
                "reason": "KubeletReady" if ready else "KubeletStopped",
                "message": "local node is posting ready status" if ready else "local node stopped",
                "lastHeartbeatTime": now,
                "lastTransitionTime": now,
            }
        ],
        "addresses": [
            {"type": "InternalIP", "address": "127.0.0.1"},
            {"type": "Hostname", "address": platform.node() or "localhost"},
        ],
        "capacity": {"cpu": cpus, "pods": "110"},
        "allocatable": {"cpu": cpus, "pods": "110"},
        "nodeInfo": {
            "kubeletVersion": VERSION["gitVersion"],
            "operatingSystem": "linux",
            "architecture": "amd64",
            "osImage": platform.platform(),
            "kernelVersion": platform.release(),
            "containerRuntimeVersion": "localcluster://processes",
            "machineID": "",
            "systemUUID": "",
            "bootID": "",
            "kubeProxyVersion": "",
        },
    }


def report(api: client.ApiClient, name: str, ready: bool, now: str) -> None:
    """At start (ready): create the Node if missing, then write its status. At stop: only the
    status, with a short timeout, so a stop never waits on an unreachable server. Errors are
    logged, not raised (a node without its Node object still runs pods)."""
    core = client.CoreV1Api(api)
    timeout = 10 if ready else 2
    try:
        if ready:
            try:
                raw(core.create_node, node_body(name), _request_timeout=timeout)
            except ApiException as exc:
                if exc.status != 409:
                    raise
        raw(
            core.patch_node_status,
            name,
            {"status": node_status(ready, now)},
            _content_type=MERGE_PATCH,
            _request_timeout=timeout,
        )
    except Exception as exc:
        log.warning("could not report Node %s: %s", name, exc)

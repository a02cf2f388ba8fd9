"""The local node as the kubelet of the real control plane: it registers a Ready Node and
renews its Lease; the scheduler binds pods to it and the real controllers make ReplicaSets and
EndpointSlices of its pods' addresses; readiness gates hold Ready back; a deleted pod is
terminated gracefully; the node's addresses leave `lo` when it stops.

Skipped when the real control plane is not built (`make kube`, which needs Go).
"""

from __future__ import annotations

import ipaddress
import subprocess
from collections.abc import Iterator
from pathlib import Path

import kubernetes
import pytest

from devstack import stack
from devstack.stack import wait_for
from tests.real import NEEDS_REAL_CONTROL_PLANE

pytestmark = [
    NEEDS_REAL_CONTROL_PLANE,
    pytest.mark.timeout(600),
]
GATE = "example.com/gate"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[object, object]]:
    from localcluster.real.testing import RealApiServer

    api = RealApiServer.start(tmp_path / "cluster")
    node = api.node()
    try:
        node.start()
        yield api, node
    finally:
        node.stop()
        api.stop()


def _lo_addresses() -> set[str]:
    out = subprocess.run(["ip", "-o", "-4", "addr", "show", "dev", "lo"], capture_output=True)
    return {line.split()[3].split("/")[0] for line in out.stdout.decode().splitlines()}


def _conditions(pod: kubernetes.client.V1Pod) -> dict[str, str]:
    return {c.type: c.status for c in pod.status.conditions or []}


def test_node_runs_the_real_clusters_pods(cluster: tuple) -> None:
    api, node = cluster
    client = api.api_client()
    core = kubernetes.client.CoreV1Api(client)
    coordination = kubernetes.client.CoordinationV1Api(client)
    ready = [c for c in core.read_node("localnode").status.conditions if c.type == "Ready"]
    assert ready[0].status == "True"
    renewed = coordination.read_namespaced_lease("localnode", "kube-node-lease").spec.renew_time
    wait_for(
        lambda: (
            coordination.read_namespaced_lease("localnode", "kube-node-lease").spec.renew_time
            > renewed
        ),
        40,
        what="the node's Lease renewed",
    )

    objs = stack.backend("web", replicas=2, gated=False)
    pod_spec = objs[0]["spec"]["template"]["spec"]
    pod_spec["readinessGates"] = [{"conditionType": GATE}]
    for obj in objs:
        obj["metadata"]["namespace"] = "default"
    stack.apply_objects(client, objs)

    def running() -> list:
        found = [
            p
            for p in core.list_namespaced_pod("default", label_selector="app=web").items
            if _conditions(p).get("ContainersReady") == "True"
        ]
        return found if len(found) == 2 else []

    pods = wait_for(running, 120, what="two pods with ready containers")
    for pod in pods:
        assert pod.spec.node_name == "localnode"  # bound by kube-scheduler
        assert ipaddress.ip_address(pod.status.pod_ip) in ipaddress.ip_network("198.18.0.0/16")
        assert pod.status.pod_ip in _lo_addresses()
        assert _conditions(pod).get("Ready") == "False"  # the gate is not True yet
        assert pod.metadata.owner_references[0].kind == "ReplicaSet"
    # The gate's owner sets it; the node then reports Ready, the slice marks it ready.
    first = pods[0]
    core.patch_namespaced_pod_status(
        first.metadata.name,
        "default",
        {"status": {"conditions": [{"type": GATE, "status": "True"}]}},
        _content_type="application/strategic-merge-patch+json",
    )
    wait_for(
        lambda: (
            _conditions(core.read_namespaced_pod(first.metadata.name, "default")).get("Ready")
            == "True"
        ),
        30,
        what="Ready after the gate",
    )
    discovery = kubernetes.client.DiscoveryV1Api(client)

    def ready_addresses() -> set[str]:
        slices = discovery.list_namespaced_endpoint_slice(
            "default", label_selector="kubernetes.io/service-name=web"
        ).items
        return {
            a for s in slices for e in s.endpoints or [] if e.conditions.ready for a in e.addresses
        }

    wait_for(lambda: ready_addresses() == {first.status.pod_ip}, 30, what="endpoint ready")

    # Graceful deletion: the node stops the process and removes the object; its address goes.
    core.delete_namespaced_pod(first.metadata.name, "default")
    wait_for(
        lambda: (
            first.metadata.name
            not in {p.metadata.name for p in core.list_namespaced_pod("default").items}
        ),
        60,
        what="pod finalized by the node",
    )
    assert first.status.pod_ip not in _lo_addresses()
    node_ip = node.block.node_ip
    node.stop()
    assert not any(
        ipaddress.ip_address(a) in ipaddress.ip_network(node_ip + "/24", strict=False)
        for a in _lo_addresses()
    )

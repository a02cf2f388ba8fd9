"""The Node and Lease objects the node writes on a real cluster (pure builders)."""

from __future__ import annotations

from localcluster.node.registration import (
    LEASE_DURATION,
    LEASE_NAMESPACE,
    heartbeat,
    lease_object,
    node_object,
)


def test_node_is_ready_schedulable_and_addressed() -> None:
    node = node_object("localnode", "198.18.4.1", "2026-12-01T10:00:00Z")
    status = node["status"]
    assert node["metadata"]["labels"]["kubernetes.io/hostname"] == "localnode"
    assert int(status["allocatable"]["pods"]) > 0 and status["allocatable"]["cpu"]
    ready = [c for c in status["conditions"] if c["type"] == "Ready"]
    assert ready and ready[0]["status"] == "True"
    assert {"type": "InternalIP", "address": "198.18.4.1"} in status["addresses"]
    assert "taints" not in node["spec"]


def test_heartbeat_moves_the_heartbeat_but_keeps_the_transition() -> None:
    first = node_object("n", "198.18.4.1", "2026-12-01T10:00:00Z")["status"]
    later = heartbeat(first, "198.18.4.1", "2026-12-01T10:05:00Z")
    (ready,) = [c for c in later["conditions"] if c["type"] == "Ready"]
    assert ready["lastHeartbeatTime"] == "2026-12-01T10:05:00Z"
    assert ready["lastTransitionTime"] == "2026-12-01T10:00:00Z"


def test_lease_is_held_by_the_node_and_owned_by_it() -> None:
    lease = lease_object("n", "uid-1", "2026-12-01T10:00:00.000000Z")
    assert lease["metadata"]["namespace"] == LEASE_NAMESPACE
    assert lease["spec"]["holderIdentity"] == "n"
    assert lease["spec"]["leaseDurationSeconds"] == LEASE_DURATION
    (owner,) = lease["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("Node", "n", "uid-1")

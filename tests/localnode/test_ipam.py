"""Loopback address allocation and its persistence."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from localcluster.node.ipam import (
    BLOCK_COUNT,
    IpamStore,
    allocate_in_block,
    allocate_ip,
    block_ip,
    in_block,
    index_to_ip,
)
from localcluster.real.cluster import SERVICE_CIDR


def test_pool_edges_avoid_reserved_addresses() -> None:
    assert index_to_ip(0) == "127.1.0.1"
    for i in range(0, 300):
        ip = index_to_ip(i * 7919)
        last = int(ip.rsplit(".", 1)[1])
        assert ip.startswith("127.") and not ip.startswith("127.0.")
        assert last not in (0, 255)


@settings(deadline=None)  # a loaded 2-core machine must not fail on speed
@given(st.lists(st.uuids().map(str), min_size=1, max_size=200, unique=True))
def test_allocation_is_unique_loopback_and_deterministic(uids: list[str]) -> None:
    taken: set[str] = set()
    for uid in uids:
        ip = allocate_ip(uid, taken)
        assert ip not in taken
        assert ip != "127.0.0.1"
        assert ipaddress.ip_address(ip) in ipaddress.ip_network("127.0.0.0/8")
        assert allocate_ip(uid, taken) == ip
        taken.add(ip)


def test_collision_probes_to_the_next_free_address() -> None:
    first = allocate_ip("x", set())
    assert allocate_ip("x", {first}) != first


def test_store_persists_across_restart(tmp_path: Path) -> None:
    path = tmp_path / "node" / "ipam.json"
    store = IpamStore(path)
    a = store.assign("uid-a", "ns/a")
    b = store.assign("uid-b", "ns/b")
    assert a != b
    assert store.assign("uid-a", "ns/a") == a
    again = IpamStore(path)
    assert again.get("uid-a") == a and again.get("uid-b") == b
    # A wanted address (from status.podIP) is honoured when free, refused when taken.
    assert again.assign("uid-c", "ns/c", wanted="127.9.9.9") == "127.9.9.9"
    assert again.assign("uid-d", "ns/d", wanted=a) != a
    again.release("uid-a")
    assert IpamStore(path).get("uid-a") is None


@settings(deadline=None)
@given(
    st.integers(min_value=0, max_value=BLOCK_COUNT - 1),
    st.lists(st.uuids().map(str), min_size=1, max_size=253, unique=True),
)
def test_block_allocation_stays_in_the_nodes_block_off_loopback(
    block: int, uids: list[str]
) -> None:
    """Real-cluster addresses: inside the node's /24 of 198.18.0.0/16, never its .0/.1/.255,
    never loopback (which a real API server refuses in EndpointSlices), never in the real
    cluster's Service CIDR, never twice."""
    net = ipaddress.ip_network(block_ip(block, 0) + "/24")
    taken: set[str] = set()
    for uid in uids:
        ip = allocate_in_block(uid, taken, block)
        assert ip not in taken and in_block(ip, block)
        addr = ipaddress.ip_address(ip)
        assert addr in net and not addr.is_loopback
        assert addr not in ipaddress.ip_network(SERVICE_CIDR)
        assert int(ip.rsplit(".", 1)[1]) not in (0, 1, 255)
        taken.add(ip)


def test_block_exhaustion_is_an_error() -> None:
    taken = {block_ip(3, h) for h in range(2, 255)}
    with pytest.raises(RuntimeError, match="exhausted"):
        allocate_in_block("x", taken, 3)

"""Loopback address allocation and its persistence."""

from __future__ import annotations

import ipaddress
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from localcluster.node.ipam import IpamStore, allocate_ip, index_to_ip


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

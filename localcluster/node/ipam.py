"""Pod address allocation, stable across node restarts.

On the local API server every pod gets a loopback 127.x.y.z: Linux routes all of
127.0.0.0/8 to the loopback interface, so any such address can be bound without
configuration. 127.0.0.0/16 is left alone (127.0.0.1, 127.0.0.53 resolvers, 127.0.1.1
hostnames), as are .0 and .255 host bytes.

A real API server refuses loopback addresses in EndpointSlices, so on the real cluster a node
claims one /24 block of 198.18.0.0/16 (half of RFC 2544's benchmarking range, never routed off a
machine): .1 is the node's address, .2 to .254 go to pods, each added as a /32 to `lo`, so
it is local to this machine like 127/8 and pods still reach 127.0.0.1 services.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import os
import subprocess
import threading
from pathlib import Path

_X_RANGE = range(1, 255)
_Y_RANGE = range(0, 256)
_Z_RANGE = range(1, 255)
POOL_SIZE = len(_X_RANGE) * len(_Y_RANGE) * len(_Z_RANGE)


def index_to_ip(index: int) -> str:
    index %= POOL_SIZE
    x, rest = divmod(index, len(_Y_RANGE) * len(_Z_RANGE))
    y, z = divmod(rest, len(_Z_RANGE))
    return f"127.{_X_RANGE[x]}.{_Y_RANGE[y]}.{_Z_RANGE[z]}"


def preferred_index(key: str) -> int:
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") % POOL_SIZE


def allocate_ip(key: str, taken: set[str]) -> str:
    """Deterministic: the same key and the same taken set give the same address; probes
    linearly from the key's hash so addresses never collide."""
    if len(taken) >= POOL_SIZE:
        raise RuntimeError("loopback address pool exhausted")
    start = preferred_index(key)
    for offset in range(POOL_SIZE):
        ip = index_to_ip(start + offset)
        if ip not in taken:
            return ip
    raise RuntimeError("loopback address pool exhausted")  # pragma: no cover


# 198.18.0.0/15 is the benchmarking range; its upper half, 198.19.0.0/16, is the real
# cluster's Service CIDR (localcluster/real/cluster.py), so pods take the lower half.
BLOCK_NETWORK = ipaddress.ip_network("198.18.0.0/16")
BLOCK_COUNT = BLOCK_NETWORK.num_addresses // 256
_BLOCK_HOSTS = range(2, 255)  # .1 is the node's own address


def block_ip(block: int, host: int) -> str:
    return str(BLOCK_NETWORK[block * 256 + host])


def in_block(ip: str, block: int) -> bool:
    try:
        return ipaddress.ip_address(ip) in ipaddress.ip_network(block_ip(block, 0) + "/24")
    except ValueError:
        return False


def allocate_in_block(key: str, taken: set[str], block: int) -> str:
    """Like allocate_ip, inside one node's block."""
    start = preferred_index(key)
    for offset in range(len(_BLOCK_HOSTS)):
        ip = block_ip(block, _BLOCK_HOSTS[(start + offset) % len(_BLOCK_HOSTS)])
        if ip not in taken:
            return ip
    raise RuntimeError(f"address block {block_ip(block, 0)}/24 exhausted")


def _ip_addr(action: str, ip: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["ip", "addr", action, f"{ip}/32", "dev", "lo"], capture_output=True, text=True
    )


def _already_there(result: subprocess.CompletedProcess[str]) -> bool:
    # iproute2 says "File exists" or "Address already assigned", by version.
    return "exists" in result.stderr or "already assigned" in result.stderr


class LoopbackBlock:
    """One node's /24 of 198.18.0.0/16 on `lo` (needs root, as a kubelet does). The block
    is claimed by adding its .1: the kernel refuses a second add, so two nodes on one
    machine never share a block; the number is kept in `path` for a restarted node."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self.block = -1

    @property
    def node_ip(self) -> str:
        return block_ip(self.block, 1)

    def claim(self) -> str:
        if self._path.exists():
            self.block = int(self._path.read_text())
            self.add(self.node_ip)  # our own, maybe left by a crash: adding is idempotent
            return self.node_ip
        start = preferred_index(str(self._path)) % BLOCK_COUNT
        for offset in range(BLOCK_COUNT):
            block = (start + offset) % BLOCK_COUNT
            result = _ip_addr("add", block_ip(block, 1))
            if result.returncode == 0:
                self.block = block
                self._path.parent.mkdir(parents=True, exist_ok=True)
                self._path.write_text(str(block))
                return self.node_ip
            if not _already_there(result):
                raise RuntimeError(f"cannot add an address to lo: {result.stderr.strip()}")
        raise RuntimeError("every address block of 198.18.0.0/16 is taken")

    def add(self, ip: str) -> None:
        result = _ip_addr("add", ip)
        if result.returncode != 0 and not _already_there(result):
            raise RuntimeError(f"cannot add {ip} to lo: {result.stderr.strip()}")

    def remove(self, ip: str) -> None:
        _ip_addr("del", ip)

    def release(self) -> None:
        """Remove every address of the block from lo (the node stops)."""
        out = subprocess.run(
            ["ip", "-o", "-4", "addr", "show", "dev", "lo"], capture_output=True, text=True
        ).stdout
        for line in out.splitlines():
            ip = line.split()[3].split("/")[0]
            if in_block(ip, self.block):
                self.remove(ip)


class IpamStore:
    """The pod uid -> address map, persisted as JSON in the state dir (atomic rename).
    With `block`, addresses come from that LoopbackBlock and are added to lo while used."""

    def __init__(self, path: Path, block: LoopbackBlock | None = None) -> None:
        self._path = path
        self._lock = threading.Lock()
        self._block = block
        self._by_uid: dict[str, dict[str, str]] = {}
        if path.exists():
            self._by_uid = json.loads(path.read_text() or "{}")
        if block is not None:
            # Entries of another block (a node that claimed anew) are of no use.
            self._by_uid = {u: e for u, e in self._by_uid.items() if in_block(e["ip"], block.block)}

    def _allocate(self, uid: str, taken: set[str]) -> str:
        if self._block is None:
            return allocate_ip(uid, taken)
        return allocate_in_block(uid, taken, self._block.block)

    def _usable(self, ip: str | None) -> bool:
        return bool(ip) and (self._block is None or in_block(ip or "", self._block.block))

    def get(self, uid: str) -> str | None:
        with self._lock:
            entry = self._by_uid.get(uid)
            return entry["ip"] if entry else None

    def assign(self, uid: str, pod_key: str, wanted: str | None = None) -> str:
        """The pod's address: its existing one, else `wanted` if free, else a fresh one."""
        with self._lock:
            entry = self._by_uid.get(uid)
            if entry:
                if self._block is not None:
                    self._block.add(entry["ip"])  # the node restarted: lo lost it at stop
                return entry["ip"]
            taken = {e["ip"] for e in self._by_uid.values()}
            usable = self._usable(wanted) and wanted not in taken
            ip = wanted if usable and wanted else self._allocate(uid, taken)
            if self._block is not None:
                self._block.add(ip)
            self._by_uid[uid] = {"ip": ip, "pod": pod_key}
            self._save()
            return ip

    def release(self, uid: str) -> None:
        with self._lock:
            entry = self._by_uid.pop(uid, None)
            if entry is not None:
                if self._block is not None:
                    self._block.remove(entry["ip"])
                self._save()

    def uids(self) -> set[str]:
        with self._lock:
            return set(self._by_uid)

    def _save(self) -> None:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self._path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self._by_uid, indent=1, sort_keys=True))
        os.replace(tmp, self._path)

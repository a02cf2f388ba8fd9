"""Loopback address allocation: one 127.x.y.z per pod, stable across node restarts.

Linux routes all of 127.0.0.0/8 to the loopback interface, so any such address can be bound
without configuration. 127.0.0.0/16 is left alone (127.0.0.1, 127.0.0.53 resolvers,
127.0.1.1 hostnames), as are .0 and .255 host bytes.
"""

from __future__ import annotations

import hashlib
import json
import os
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


class IpamStore:
    """The pod uid -> address map, persisted as JSON in the state dir (atomic rename)."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._lock = threading.Lock()
        self._by_uid: dict[str, dict[str, str]] = {}
        if path.exists():
            self._by_uid = json.loads(path.read_text() or "{}")

    def get(self, uid: str) -> str | None:
        with self._lock:
            entry = self._by_uid.get(uid)
            return entry["ip"] if entry else None

    def assign(self, uid: str, pod_key: str, wanted: str | None = None) -> str:
        """The pod's address: its existing one, else `wanted` if free, else a fresh one."""
        with self._lock:
            entry = self._by_uid.get(uid)
            if entry:
                return entry["ip"]
            taken = {e["ip"] for e in self._by_uid.values()}
            ip = wanted if wanted and wanted not in taken else allocate_ip(uid, taken)
            self._by_uid[uid] = {"ip": ip, "pod": pod_key}
            self._save()
            return ip

    def release(self, uid: str) -> None:
        with self._lock:
            if self._by_uid.pop(uid, None) is not None:
                self._save()

    def uids(self) -> set[str]:
        with self._lock:
            return set(self._by_uid)

    def _save(self) -> None:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self._path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self._by_uid, indent=1, sort_keys=True))
        os.replace(tmp, self._path)

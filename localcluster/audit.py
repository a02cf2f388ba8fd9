"""A request log of the changes made through the API server (the local stand-in for
kube-apiserver's audit log): one JSON line per mutating request.

Each line: `t` (wall-clock seconds when the request arrived, before any injected fault
delays or holds it: when the client sent it), `verb`, `path`, `userAgent`, `fieldManager`,
the answer's `code`, and for a Lease written successfully its `lease` name and `holder`
afterwards (so the
history of who held which Lease can be read from the log alone). Tests and the soak use it
to attribute writes to a replica by the identity in its User-Agent.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def lease_written(path: str, verb: str, code: int, body: bytes | None) -> tuple[str, str] | None:
    """(name, holder afterwards) of a Lease a successful write changed ("" when released or
    deleted), else None (not a Lease, or the write did not happen)."""
    if "/leases" not in path or not 200 <= code < 300:
        return None
    if verb == "DELETE":
        name = path.rsplit("/leases/", 1)[-1] if "/leases/" in path else ""
        return (name, "") if name and "/" not in name else None
    try:
        obj = json.loads(body or b"")
    except ValueError:
        return None
    if not isinstance(obj, dict) or obj.get("kind") != "Lease":
        return None
    name = (obj.get("metadata") or {}).get("name") or ""
    return name, (obj.get("spec") or {}).get("holderIdentity") or ""


class AuditLog:
    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = path.open("a", encoding="utf-8")
        self._lock = threading.Lock()

    def record(self, entry: dict[str, Any]) -> None:
        line = json.dumps(entry, separators=(",", ":")) + "\n"
        with self._lock:
            if not self._file.closed:
                self._file.write(line)
                self._file.flush()

    def close(self) -> None:
        with self._lock:
            self._file.close()

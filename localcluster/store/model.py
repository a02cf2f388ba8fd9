"""The store's values: events, delete options, the watcher interface and well-known keys."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

ObjKey = tuple[str, str, str]  # (resource key, namespace, name)
CRD_KEY = "apiextensions.k8s.io/customresourcedefinitions"
NS_KEY = "/namespaces"
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


def now_iso(t: float | None = None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if t is None else t))


def clone(obj: Any) -> Any:
    return json.loads(json.dumps(obj))


@dataclass
class Event:
    rv: int
    key: str
    type: str  # ADDED, MODIFIED, DELETED
    namespace: str
    obj: dict[str, Any]
    old: dict[str, Any] | None
    _line: bytes | None = field(default=None, repr=False)

    def line(self) -> bytes:
        # Serialized once and shared by every watcher.
        if self._line is None:
            self._line = (
                json.dumps({"type": self.type, "object": self.obj}, separators=(",", ":")) + "\n"
            ).encode()
        return self._line


class Watcher(Protocol):
    key: str
    namespace: str | None

    def push(self, event: Event) -> None: ...


@dataclass
class DeleteOptions:
    propagation: str = "Background"
    uid: str | None = None
    resource_version: str | None = None
    grace_period: int | None = None
    dry_run: bool = False

    @classmethod
    def parse(cls, body: dict[str, Any] | None, query: dict[str, str]) -> DeleteOptions:
        body = body or {}
        pre = body.get("preconditions") or {}
        grace = body.get("gracePeriodSeconds", query.get("gracePeriodSeconds"))
        propagation = body.get("propagationPolicy") or query.get("propagationPolicy")
        if body.get("orphanDependents") is True or query.get("orphanDependents") == "true":
            propagation = propagation or "Orphan"
        return cls(
            propagation=propagation or "Background",
            uid=pre.get("uid"),
            resource_version=pre.get("resourceVersion"),
            grace_period=int(grace) if grace is not None else None,
            dry_run=bool(body.get("dryRun")) or "dryRun" in query,
        )

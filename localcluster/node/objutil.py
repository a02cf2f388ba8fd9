"""Small pure helpers for API objects."""

from __future__ import annotations

from typing import Any


def controller_reference(owner: dict[str, Any], api_version: str, kind: str) -> dict[str, Any]:
    """The ownerReference a controller puts on what it makes for `owner` (a Deployment's
    pods and ReplicaSets, a Service's EndpointSlices): garbage collection and adoption read
    it (localcluster/node/README.md)."""
    meta = owner["metadata"]
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def controller_owner(obj: dict[str, Any]) -> dict[str, Any] | None:
    """The ownerReference marked controller, if any."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return ref
    return None


def rv_newer(a: str, b: str) -> bool:
    """Whether resourceVersion a is known to be newer than b. The local server uses integers;
    opaque versions are never assumed newer, so watch events always apply."""
    try:
        return int(a) > int(b)
    except ValueError:
        return False


def normalized(value: Any) -> Any:
    """Drop None and empty containers so comparisons ignore how a server spells defaults."""
    if isinstance(value, dict):
        out = {k: normalized(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if not _empty(v)}
    if isinstance(value, list):
        return [normalized(v) for v in value]
    return value


def _empty(v: Any) -> bool:
    return v is None or (isinstance(v, dict | list | str) and len(v) == 0)

"""The discovered HAProxy pod set: a small, comparable view of the HAProxy pod cache (pure).

The deployment scheduler only cares about what it can deploy to; status noise (probe
timestamps, container statuses) must not look like a discovery change, so the view keeps
just the fields below and a change notification fires only when the view changes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from contract import pod_ready


@dataclass(frozen=True, order=True)
class DiscoveredPod:
    namespace: str
    name: str
    uid: str
    pod_ip: str | None
    ready: bool
    deletion_timestamp: str | None

    @property
    def terminating(self) -> bool:
        return self.deletion_timestamp is not None


def discovered_pod(pod: dict) -> DiscoveredPod:
    meta = pod.get("metadata") or {}
    return DiscoveredPod(
        namespace=meta.get("namespace") or "",
        name=meta.get("name") or "",
        uid=meta.get("uid") or "",
        pod_ip=(pod.get("status") or {}).get("podIP") or None,
        ready=pod_ready(pod),
        deletion_timestamp=meta.get("deletionTimestamp"),
    )


def discovered_set(pods: Iterable[dict]) -> tuple[DiscoveredPod, ...]:
    """The view of a pod list, sorted (namespace, name) so equal sets compare equal."""
    return tuple(sorted(discovered_pod(p) for p in pods))

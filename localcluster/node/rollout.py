"""Deployment RollingUpdate / Recreate decisions, following the Deployment controller's
arithmetic but without ReplicaSets: pods of the current template are the "new" set, every
other pod of the Deployment is "old". Pure: callers pass pod summaries and get actions back.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

DEFAULT_MAX_SURGE = "25%"
DEFAULT_MAX_UNAVAILABLE = "25%"
TEMPLATE_HASH_LABEL = "pod-template-hash"
RESTARTED_AT_ANNOTATION = "kubectl.kubernetes.io/restartedAt"

# The alphabet Kubernetes uses for generated name suffixes (no vowels, no confusable digits).
_SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def resolve_int_or_percent(value: int | str | None, total: int, round_up: bool) -> int:
    """An IntOrString against `total`: percentages round up for surge, down for unavailable."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    text = str(value).strip()
    if text.endswith("%"):
        pct = int(text[:-1])
        # Integer arithmetic avoids float surprises such as 0.29 * 100.
        if round_up:
            return -((-pct * total) // 100)
        return (pct * total) // 100
    return int(text)


def resolve_fenceposts(
    max_surge: int | str | None, max_unavailable: int | str | None, replicas: int
) -> tuple[int, int]:
    """(surge, unavailable) as the Deployment controller resolves them.

    If both resolve to 0 (percentages rounding down), unavailable becomes 1 so a rollout can
    still make progress; validation forbids both being an explicit 0.
    """
    surge = resolve_int_or_percent(
        DEFAULT_MAX_SURGE if max_surge is None else max_surge, replicas, round_up=True
    )
    unavailable = resolve_int_or_percent(
        DEFAULT_MAX_UNAVAILABLE if max_unavailable is None else max_unavailable,
        replicas,
        round_up=False,
    )
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


@dataclass(frozen=True)
class PodSummary:
    name: str
    template_hash: str
    ready: bool
    available: bool
    terminating: bool
    created: str = ""  # creationTimestamp; RFC 3339 strings sort chronologically


@dataclass(frozen=True)
class Step:
    create: int = 0
    delete: tuple[str, ...] = ()


def _deletion_order(pods: list[PodSummary]) -> list[PodSummary]:
    """Which pods go first when scaling down: unavailable before available, then newest."""
    newest_first = sorted(pods, key=lambda p: (p.created, p.name), reverse=True)
    return sorted(newest_first, key=lambda p: (p.ready, p.available))


def rolling_update_step(
    pods: list[PodSummary],
    replicas: int,
    current_hash: str,
    max_surge: int | str | None = None,
    max_unavailable: int | str | None = None,
) -> Step:
    """One reconcile of a RollingUpdate Deployment.

    Terminating pods are not counted (the controller only counts active pods). Scale-up of the
    new set happens first; old pods are scaled down only in a reconcile that created nothing,
    and never below replicas - maxUnavailable available pods.
    """
    active = [p for p in pods if not p.terminating]
    new = [p for p in active if p.template_hash == current_hash]
    old = [p for p in active if p.template_hash != current_hash]
    surge, unavailable = resolve_fenceposts(max_surge, max_unavailable, replicas)

    if len(new) > replicas:
        excess = len(new) - replicas
        return Step(delete=tuple(p.name for p in _deletion_order(new)[:excess]))
    if len(new) < replicas:
        max_total = replicas + surge
        room = max_total - len(active)
        create = min(room, replicas - len(new))
        if create > 0:
            return Step(create=create)

    if not old:
        return Step()
    min_available = replicas - unavailable
    new_unavailable = sum(1 for p in new if not p.available)
    max_scaled_down = len(active) - min_available - new_unavailable
    if max_scaled_down <= 0:
        return Step()
    # First drop old pods that are not available anyway: they cost no capacity.
    unhealthy = [p for p in _deletion_order(old) if not p.available][:max_scaled_down]
    doomed = [p.name for p in unhealthy]
    remaining_old = [p for p in old if p.name not in set(doomed)]
    available = sum(1 for p in active if p.available and p.name not in set(doomed))
    if available > min_available:
        budget = available - min_available
        doomed.extend(p.name for p in _deletion_order(remaining_old)[:budget])
    return Step(delete=tuple(doomed))


def recreate_step(pods: list[PodSummary], replicas: int, current_hash: str) -> Step:
    """Recreate: delete every old pod, wait until none exists at all, then create the new ones."""
    old = [p for p in pods if p.template_hash != current_hash]
    old_active = [p for p in old if not p.terminating]
    if old_active:
        return Step(delete=tuple(p.name for p in old_active))
    if old:
        return Step()
    new = [p for p in pods if not p.terminating]
    if len(new) < replicas:
        return Step(create=replicas - len(new))
    if len(new) > replicas:
        excess = len(new) - replicas
        return Step(delete=tuple(p.name for p in _deletion_order(new)[:excess]))
    return Step()


def template_hash(template: dict[str, Any], collision_count: int = 0) -> str:
    """A short stable hash of the pod template (annotations included, so a restartedAt change
    starts a rollout), spelled with the Kubernetes safe alphabet. Null fields do not count:
    a template written back by `kubectl rollout undo` carries `creationTimestamp: null`
    and must hash as the revision it restores."""
    canonical = json.dumps(_without_nulls(template), sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(f"{canonical}/{collision_count}".encode()).digest()
    number = int.from_bytes(digest[:8], "big")
    out = []
    for _ in range(10):
        number, rem = divmod(number, len(_SAFE_ALPHABET))
        out.append(_SAFE_ALPHABET[rem])
    return "".join(out)


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def is_available(ready_since_s: float | None, min_ready_seconds: int, now_s: float) -> bool:
    """A pod is available once it has been Ready for minReadySeconds."""
    if ready_since_s is None:
        return False
    return min_ready_seconds <= 0 or now_s - ready_since_s >= min_ready_seconds


@dataclass(frozen=True)
class DeploymentCounts:
    replicas: int
    updated: int
    ready: int
    available: int


def count_pods(pods: list[PodSummary], current_hash: str) -> DeploymentCounts:
    active = [p for p in pods if not p.terminating]
    return DeploymentCounts(
        replicas=len(active),
        updated=sum(1 for p in active if p.template_hash == current_hash),
        ready=sum(1 for p in active if p.ready),
        available=sum(1 for p in active if p.available),
    )


def deployment_status(
    generation: int,
    desired: int,
    counts: DeploymentCounts,
    max_unavailable_resolved: int,
    rollout_complete: bool,
) -> dict[str, Any]:
    """The status fields; conditions carry (type, status, reason) and get times at the edge."""
    min_available = desired - max_unavailable_resolved
    available_ok = counts.available >= min_available
    return {
        "observedGeneration": generation,
        "replicas": counts.replicas,
        "updatedReplicas": counts.updated,
        "readyReplicas": counts.ready,
        "availableReplicas": counts.available,
        "unavailableReplicas": max(desired - counts.available, 0),
        "conditions": [
            {
                "type": "Available",
                "status": "True" if available_ok else "False",
                "reason": "MinimumReplicasAvailable"
                if available_ok
                else "MinimumReplicasUnavailable",
                "message": "Deployment has minimum availability."
                if available_ok
                else "Deployment does not have minimum availability.",
            },
            {
                "type": "Progressing",
                "status": "True",
                "reason": "NewReplicaSetAvailable" if rollout_complete else "ReplicaSetUpdated",
                "message": "rollout complete" if rollout_complete else "rollout in progress",
            },
        ],
    }

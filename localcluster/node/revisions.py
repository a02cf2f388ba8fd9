"""A Deployment's revisions as ReplicaSets, numbered as the real Deployment controller numbers
them, so `kubectl rollout history` and `kubectl rollout undo` work. The node's controller
still runs the pods itself (owned by the Deployment, see deployments.py); each ReplicaSet
records one pod template, its revision and how many of its pods exist. Pure functions."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from .objutil import controller_reference
from .rollout import TEMPLATE_HASH_LABEL

Obj = dict[str, Any]
REVISION = "deployment.kubernetes.io/revision"
REVISION_HISTORY = "deployment.kubernetes.io/revision-history"
DESIRED_REPLICAS = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS = "deployment.kubernetes.io/max-replicas"
# Deployment annotations a ReplicaSet does not copy (as the real controller skips them).
_NOT_COPIED = {
    "kubectl.kubernetes.io/last-applied-configuration",
    REVISION,
    REVISION_HISTORY,
    DESIRED_REPLICAS,
    MAX_REPLICAS,
}


def revision_of(obj: Obj | None) -> int:
    annotations = ((obj or {}).get("metadata") or {}).get("annotations") or {}
    try:
        return int(annotations.get(REVISION, "0"))
    except ValueError:
        return 0


def replica_set_name(deployment: str, template_hash: str) -> str:
    return f"{deployment}-{template_hash}"


def current_revision(sets: list[Obj], current: Obj | None) -> tuple[int, str]:
    """(revision, revision-history) the current template's ReplicaSet must carry: it keeps
    its number while it is the newest; otherwise (new, or rolled back to) it takes the next
    one and remembers the numbers it had before."""
    newest = max((revision_of(rs) for rs in sets), default=0)
    mine = revision_of(current)
    history = (
        ((current or {}).get("metadata") or {}).get("annotations", {}).get(REVISION_HISTORY, "")
    )
    if current is not None and mine == newest and mine > 0:
        return mine, history
    if mine > 0:
        history = ",".join(p for p in (history, str(mine)) if p)
    return newest + 1, history


@dataclass(frozen=True)
class Counts:
    replicas: int = 0
    ready: int = 0
    available: int = 0


def desired_replica_set(
    dep: Obj, template_hash: str, revision: int, history: str, counts: Counts, surge: int
) -> Obj:
    """The ReplicaSet (spec and status) recording one template of a Deployment."""
    meta, spec = dep["metadata"], dep.get("spec") or {}
    template = copy.deepcopy(spec.get("template") or {})
    tmeta = template.setdefault("metadata", {})
    labels = {**(tmeta.get("labels") or {}), TEMPLATE_HASH_LABEL: template_hash}
    tmeta["labels"] = labels
    selector = copy.deepcopy(spec.get("selector") or {})
    selector["matchLabels"] = {
        **(selector.get("matchLabels") or {}),
        TEMPLATE_HASH_LABEL: template_hash,
    }
    desired = int(spec.get("replicas", 1))
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k not in _NOT_COPIED}
    annotations[REVISION] = str(revision)
    annotations[DESIRED_REPLICAS] = str(desired)
    annotations[MAX_REPLICAS] = str(desired + surge)
    if history:
        annotations[REVISION_HISTORY] = history
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": replica_set_name(meta["name"], template_hash),
            "namespace": meta["namespace"],
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [controller_reference(dep, "apps/v1", "Deployment")],
        },
        "spec": {
            "replicas": counts.replicas,
            "minReadySeconds": int(spec.get("minReadySeconds", 0) or 0),
            "selector": selector,
            "template": template,
        },
        "status": {
            "replicas": counts.replicas,
            "fullyLabeledReplicas": counts.replicas,
            "readyReplicas": counts.ready,
            "availableReplicas": counts.available,
            "observedGeneration": 1,
        },
    }


def to_prune(
    sets: list[Obj], current_hash: str, counts: dict[str, Counts], limit: int
) -> list[str]:
    """Names of old ReplicaSets beyond revisionHistoryLimit (oldest first) that have no pods."""
    old = [
        rs
        for rs in sets
        if (rs["metadata"].get("labels") or {}).get(TEMPLATE_HASH_LABEL) != current_hash
    ]
    old.sort(key=revision_of)
    excess = len(old) - max(limit, 0)
    out = []
    for rs in old:
        if excess <= 0:
            break
        rs_hash = (rs["metadata"].get("labels") or {}).get(TEMPLATE_HASH_LABEL, "")
        if counts.get(rs_hash, Counts()).replicas == 0:
            out.append(rs["metadata"]["name"])
            excess -= 1
    return out

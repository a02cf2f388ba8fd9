"""Pure decisions of the mirror: what to copy, how a copy looks, when to write or delete.

The conflict guard is the load-bearing rule: an object in the Standby's cluster that does not
carry our exact `mirrored-from` label was not made by this mirror, so it is never
overwritten and never deleted.
"""

from __future__ import annotations

import copy
import enum
from collections.abc import Iterable, Mapping
from typing import Any

MIRROR_LABEL = "haproxy-haptic.org/mirrored-from"
SOURCE_RV_ANNOTATION = "haproxy-haptic.org/mirrored-resource-version"
SOURCE_UID_ANNOTATION = "haproxy-haptic.org/mirrored-uid"
ROLE_LABEL = "haproxy-haptic.org/role"
CHECKPOINT_ROLE = "checkpoint"

TEMPLATE, CFG, MAP, GENERAL, CRTLIST, SECRET = (
    "HAProxyTemplateConfig",
    "HAProxyCfg",
    "HAProxyMapFile",
    "HAProxyGeneralFile",
    "HAProxyCRTListFile",
    "Secret",
)
# Owners before dependents, so a dependent's ownerReference can name its owner's local copy.
KINDS = (TEMPLATE, CFG, MAP, GENERAL, CRTLIST, SECRET)
CHILD_REFS = {MAP: "mapFiles", GENERAL: "generalFiles", CRTLIST: "crtListFiles"}
# Server-assigned or cluster-specific metadata that must not travel between clusters.
_DROPPED_META = {
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "generation",
    "managedFields",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "finalizers",
    "ownerReferences",
    "namespace",
    "generateName",
}

Obj = dict[str, Any]
Snapshot = Mapping[str, Mapping[str, Obj]]  # kind -> name -> object


def meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return meta(obj).get("labels") or {}


def annotations(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return meta(obj).get("annotations") or {}


def is_ours(local: Mapping[str, Any], source: str) -> bool:
    return labels(local).get(MIRROR_LABEL) == source


def wanted(snapshot: Snapshot, template_name: str) -> dict[str, dict[str, Obj]]:
    """The source objects to mirror: the template, its checkpoints, the children those
    checkpoints reference or own, and the Secrets the template or checkpoints name."""
    out: dict[str, dict[str, Obj]] = {kind: {} for kind in KINDS}
    template = snapshot.get(TEMPLATE, {}).get(template_name)
    secrets: set[str] = set()
    if template is not None:
        out[TEMPLATE][template_name] = template
        ref = ((template.get("spec") or {}).get("agent") or {}).get("tokenSecretRef") or {}
        if ref.get("name"):
            secrets.add(ref["name"])
    checkpoints = {
        name: obj
        for name, obj in snapshot.get(CFG, {}).items()
        if labels(obj).get(ROLE_LABEL) == CHECKPOINT_ROLE
    }
    out[CFG] = dict(checkpoints)
    owner_uids = {meta(obj).get("uid") for obj in checkpoints.values()} - {None}
    referenced: dict[str, set[str]] = {kind: set() for kind in CHILD_REFS}
    for obj in checkpoints.values():
        aux = (obj.get("spec") or {}).get("auxiliaryFiles") or {}
        for kind, key in CHILD_REFS.items():
            referenced[kind].update(r.get("name") for r in aux.get(key) or [] if r.get("name"))
        secrets.update(
            c.get("secretName") for c in aux.get("certificates") or [] if c.get("secretName")
        )
    for kind in CHILD_REFS:
        for name, obj in snapshot.get(kind, {}).items():
            owners = {r.get("uid") for r in meta(obj).get("ownerReferences") or []}
            if name in referenced[kind] or owners & owner_uids:
                out[kind][name] = obj
    for name, obj in snapshot.get(SECRET, {}).items():
        if name in secrets:
            out[SECRET][name] = obj
    return out


def owner_refs(source_obj: Mapping[str, Any], uid_map: Mapping[str, str]) -> list[Obj]:
    """Owner references re-pointed at the owners' local copies. A reference to an owner we
    have not mirrored is dropped: a foreign uid would make local garbage collection delete
    the copy at once."""
    refs = []
    for ref in meta(source_obj).get("ownerReferences") or []:
        local_uid = uid_map.get(ref.get("uid", ""))
        if local_uid:
            refs.append({**ref, "uid": local_uid})
    return refs


def to_local(
    source_obj: Mapping[str, Any], source: str, namespace: str, uid_map: Mapping[str, str]
) -> Obj:
    """The local copy's body (without status): labelled, annotated with the source version."""
    body = {k: copy.deepcopy(v) for k, v in source_obj.items() if k not in ("metadata", "status")}
    m = {k: copy.deepcopy(v) for k, v in meta(source_obj).items() if k not in _DROPPED_META}
    m["namespace"] = namespace
    m["labels"] = {**labels(source_obj), MIRROR_LABEL: source}
    m["annotations"] = {
        **annotations(source_obj),
        SOURCE_RV_ANNOTATION: str(meta(source_obj).get("resourceVersion", "")),
        SOURCE_UID_ANNOTATION: str(meta(source_obj).get("uid", "")),
    }
    refs = owner_refs(source_obj, uid_map)
    if refs:
        m["ownerReferences"] = refs
    body["metadata"] = m
    return body


class Action(enum.Enum):
    CREATE = "create"
    UPDATE = "update"
    UPDATE_STATUS = "update_status"
    UNCHANGED = "unchanged"
    FOREIGN = "foreign"  # an object we did not make: never overwritten


def decide(
    local: Mapping[str, Any] | None,
    desired: Mapping[str, Any],
    source_status: Any,
    source: str,
    has_status: bool,
) -> Action:
    if local is None:
        return Action.CREATE
    if not is_ours(local, source):
        return Action.FOREIGN
    same_version = annotations(local).get(SOURCE_RV_ANNOTATION) == annotations(desired).get(
        SOURCE_RV_ANNOTATION
    )
    same_owners = (meta(local).get("ownerReferences") or []) == (
        meta(desired).get("ownerReferences") or []
    )
    if not (same_version and same_owners):
        return Action.UPDATE
    if has_status and (local.get("status") or None) != (source_status or None):
        return Action.UPDATE_STATUS
    return Action.UNCHANGED


def prune(
    local_items: Iterable[Mapping[str, Any]], wanted_names: set[str], source: str, synced: bool
) -> list[Mapping[str, Any]]:
    """Local copies whose source is gone. Nothing before the remote cache has synced (an
    empty cache is not evidence of deletion), and only objects carrying our exact label."""
    if not synced:
        return []
    return [
        obj
        for obj in local_items
        if is_ours(obj, source)
        and meta(obj).get("name") not in wanted_names
        and not meta(obj).get("deletionTimestamp")
    ]


def uid_map(local_items: Iterable[Mapping[str, Any]], source: str) -> dict[str, str]:
    """Source uid -> local uid, from our own copies' annotations."""
    out = {}
    for obj in local_items:
        src_uid = annotations(obj).get(SOURCE_UID_ANNOTATION)
        if is_ours(obj, source) and src_uid and meta(obj).get("uid"):
            out[src_uid] = meta(obj)["uid"]
    return out

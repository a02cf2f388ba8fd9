"""Pure decisions of the mirror: what to copy, how a copy looks, when to write or delete.

The conflict guard is the load-bearing rule: an object in the Standby's cluster that does not
carry our exact `mirrored-from` label was not made by this mirror, so it is never
overwritten and never deleted.

What recovery needs travels too (issue 15, 2.10): checkpoints and their children are
re-parented to the local template (owner references, the template-uid label, spec.templateUID
and the children's uids in spec.auxiliaryFiles), their bytes and content checksum unchanged;
the ordinary HAProxyCfg carries the status.retainedConfigs pointers, re-pointed at the local
copies; and the Active's deployment intent becomes the `mirrored-intent` annotation of the
local retained-state Lease, the floor the promoted side's first claim adopts.
"""

from __future__ import annotations

import copy
import enum
import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from contract import (
    CFG_KIND,
    CHECKPOINT_ROLE,
    CHILD_KINDS,
    MIRROR_LABEL,
    PUBLISHED_ROLE,
    ROLE_LABEL,
    TEMPLATE_KIND,
    TEMPLATE_UID_LABEL,
)
from contract import MIRRORED_LOCAL_REFS_ANNOTATION as LOCAL_REFS_ANNOTATION
from contract import MIRRORED_RV_ANNOTATION as SOURCE_RV_ANNOTATION
from contract import MIRRORED_UID_ANNOTATION as SOURCE_UID_ANNOTATION

__all__ = [
    "CHECKPOINT_ROLE",
    "LOCAL_REFS_ANNOTATION",
    "MIRROR_LABEL",
    "PUBLISHED_ROLE",
    "ROLE_LABEL",
    "SOURCE_RV_ANNOTATION",
    "SOURCE_UID_ANNOTATION",
    "TEMPLATE_UID_LABEL",
]

TEMPLATE, CFG, MAP, GENERAL, CRTLIST, SECRET = (
    TEMPLATE_KIND,
    CFG_KIND,
    CHILD_KINDS["map"].kind,
    CHILD_KINDS["general"].kind,
    CHILD_KINDS["crt-list"].kind,
    "Secret",
)
KINDS = (TEMPLATE, CFG, MAP, GENERAL, CRTLIST, SECRET)
# The template first (every copy is re-parented to it), children before the checkpoints that
# name their uids; a child owned by its checkpoint (published before sharing) gets its owner
# reference on the next pass, once the checkpoint's copy exists.
SYNC_ORDER = (TEMPLATE, MAP, GENERAL, CRTLIST, SECRET, CFG)
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
    # The ordinary HAProxyCfg, for its status.retainedConfigs pointers (recovery reads them).
    ordinary = snapshot.get(CFG, {}).get(template_name)
    if ordinary is not None and labels(ordinary).get(ROLE_LABEL) == PUBLISHED_ROLE:
        out[CFG][template_name] = ordinary
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
    """The local copy's body (without status): labelled, annotated with the source version,
    re-parented to the local copies (see `reparent`)."""
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
    used = reparent(body, uid_map)
    m["annotations"][LOCAL_REFS_ANNOTATION] = _digest(sorted(used | {r["uid"] for r in refs}))
    return body


def reparent(body: Obj, uid_map: Mapping[str, str]) -> set[str]:
    """Re-point the template uid (label, spec.templateUID) and the children's uids in
    spec.auxiliaryFiles at the local copies, in place; the bytes, names and content
    checksum stay as they are, so every integrity check still holds. Returns the local
    uids used. An unknown uid is left as it is: recovery refuses it until a later pass."""
    used: set[str] = set()

    def local(uid: Any) -> Any:
        mapped = uid_map.get(uid) if isinstance(uid, str) else None
        if mapped:
            used.add(mapped)
            return mapped
        return uid

    m = body.get("metadata") or {}
    if TEMPLATE_UID_LABEL in (m.get("labels") or {}):
        m["labels"][TEMPLATE_UID_LABEL] = local(m["labels"][TEMPLATE_UID_LABEL])
    spec = body.get("spec")
    if isinstance(spec, dict):
        if "templateUID" in spec:
            spec["templateUID"] = local(spec["templateUID"])
        for entries in (spec.get("auxiliaryFiles") or {}).values():
            for ref in entries or ():
                if isinstance(ref, dict) and "uid" in ref:
                    ref["uid"] = local(ref["uid"])
    return used


def local_status(kind: str, status: Any, uid_map: Mapping[str, str]) -> Any:
    """The status a copy gets: the pointers of an ordinary HAProxyCfg name the local copies
    of the checkpoints (a pointer whose copy does not exist yet is left out until then)."""
    status = copy.deepcopy(status)
    if kind != CFG or not isinstance(status, dict) or "retainedConfigs" not in status:
        return status
    status["retainedConfigs"] = [
        {**p, "uid": uid_map[p.get("uid", "")]}
        for p in status.get("retainedConfigs") or []
        if uid_map.get(p.get("uid", ""))
    ]
    return status


def local_intent(raw: str | None, uid_map: Mapping[str, str]) -> str | None:
    """The Active's deployment intent, re-parented to the local template, as the text of
    the local retained-state Lease's mirrored-intent annotation (None: nothing to carry)."""
    try:
        data = json.loads(raw) if raw else None
    except ValueError:
        return None
    if not isinstance(data, dict) or not data.get("planID") or not data.get("checksum"):
        return None
    local_uid = uid_map.get(str(data.get("templateUID", "")))
    if not local_uid:
        return None  # the template's copy does not exist yet
    return json.dumps({**data, "templateUID": local_uid}, sort_keys=True)


def _digest(values: Iterable[str]) -> str:
    return hashlib.sha256("\0".join(values).encode()).hexdigest()[:16]


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
    same_version = all(
        annotations(local).get(key) == annotations(desired).get(key)
        for key in (SOURCE_RV_ANNOTATION, LOCAL_REFS_ANNOTATION)
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

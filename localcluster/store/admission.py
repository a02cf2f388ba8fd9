"""Admission of a create or an update: pure checks and defaults, no store state.

What the real server does to a body before it is stored: place and name a new object, stamp
what only the server sets, carry over what an update may not change, default and validate,
allocate a Service's ClusterIP, and word the errors as kube-apiserver does.
"""

from __future__ import annotations

import json
import random
import uuid
from typing import Any

from localcluster import builtin, schema, ssa
from localcluster.errors import STALE, ApiError, conflict, invalid, not_found
from localcluster.resources import ResourceType
from localcluster.store.model import clone, now_iso

_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"

# kube-apiserver's answer to a PUT without a resourceVersion where one is required.
MISSING_RV_CAUSE = {
    "field": "metadata.resourceVersion",
    "reason": "FieldValueInvalid",
    "message": "Invalid value: 0x0: must be specified for an update",
}
MISSING_MANAGER_CAUSE = {
    "field": "fieldManager",
    "reason": "FieldValueRequired",
    "message": "Required value: is required for apply patch",
}


def check_namespace(rt: ResourceType, ns: str, ns_obj: dict[str, Any] | None) -> None:
    """New content of a namespaced kind needs its namespace, and one not terminating."""
    if not rt.namespaced:
        return
    if ns_obj is None:
        raise not_found("namespaces", "", ns)
    if ns_obj["metadata"].get("deletionTimestamp"):
        raise ApiError(
            403,
            f'{rt.plural} "" is forbidden: unable to create new content in namespace {ns} '
            "because it is being terminated",
            "Forbidden",
        )


def validate(rt: ResourceType, obj: dict[str, Any]) -> None:
    name = obj["metadata"].get("name", "")
    causes = builtin.validate_name(rt, name)
    if rt.custom:
        causes += schema.validate(rt.schema, obj)
    else:
        causes += builtin.validate_builtin(rt, obj)
    causes += builtin.validate_metadata(obj["metadata"])
    causes += builtin.validate_limits(rt, obj)
    if causes:
        raise invalid(rt.kind, rt.group, name, causes)
    size = len(json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode())
    if size > builtin.MAX_OBJECT_BYTES:
        raise ApiError(413, "etcdserver: request is too large", "RequestEntityTooLarge")


def shape(rt: ResourceType) -> ssa.Shape:
    return ssa.Shape(rt.list_keys, rt.set_lists)


def allocate_cluster_ip(obj: dict[str, Any], n: int) -> bool:
    """Give a Service without one the n-th ClusterIP; True when n was used."""
    spec = obj["spec"]
    used = False
    if spec.get("clusterIP") in (None, ""):
        spec["clusterIP"] = f"10.96.{(n // 250) % 250}.{n % 250 + 1}"
        used = True
    if spec["clusterIP"] != "None":
        spec.setdefault("clusterIPs", [spec["clusterIP"]])
    return used


def crd_status(obj: dict[str, Any]) -> None:
    names = (obj.get("spec") or {}).get("names") or {}
    t = now_iso()
    obj["status"] = {
        "acceptedNames": names,
        "storedVersions": [
            v["name"] for v in (obj.get("spec") or {}).get("versions") or [] if v.get("storage")
        ],
        "conditions": [
            {
                "type": "NamesAccepted",
                "status": "True",
                "reason": "NoConflicts",
                "message": "no conflicts found",
                "lastTransitionTime": t,
            },
            {
                "type": "Established",
                "status": "True",
                "reason": "InitialNamesAccepted",
                "message": "the initial names have been accepted",
                "lastTransitionTime": t,
            },
        ],
    }


def spec_part(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


def generation_changes(rt: ResourceType, old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether an update bumps metadata.generation: a change outside metadata and status,
    or of the annotations where the kind counts them (Deployments)."""
    if spec_part(old) != spec_part(new):
        return True
    if not rt.generation_counts_annotations:
        return False
    annotations = [(o.get("metadata") or {}).get("annotations") or {} for o in (old, new)]
    return annotations[0] != annotations[1]


def without_managed(obj: dict[str, Any]) -> dict[str, Any]:
    out = dict(obj)
    meta = dict(out.get("metadata") or {})
    meta.pop("managedFields", None)
    out["metadata"] = meta
    return out


def same(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Equal apart from resourceVersion and managedFields timestamps (a change of ownership
    alone is a real write, a re-apply of the same config is not)."""

    def strip(o: dict[str, Any]) -> dict[str, Any]:
        out = dict(o)
        meta = dict(out.get("metadata") or {})
        meta["managedFields"] = [
            {k: v for k, v in e.items() if k != "time"} for e in meta.get("managedFields") or []
        ]
        meta.pop("resourceVersion", None)
        out["metadata"] = meta
        return out

    return strip(old) == strip(new)


def apply_conflict(
    rt: ResourceType, name: str, conflicts: list[tuple[str, ssa.Path]], api_version: str
) -> ApiError:
    causes = [
        {
            "reason": "FieldManagerConflict",
            "message": f'conflict with "{m}" using {api_version}',
            "field": ssa.describe_path(p),
        }
        for m, p in conflicts
    ]
    # The real server's wording: one conflict inline, several grouped by manager.
    if len(causes) == 1:
        text = f"{causes[0]['message']}: {causes[0]['field']}"
    else:
        by_manager: dict[str, list[str]] = {}
        for m, p in conflicts:
            by_manager.setdefault(m, []).append(ssa.describe_path(p))
        text = "\n".join(
            f'conflicts with "{m}" using {api_version}:\n' + "\n".join(f"- {f}" for f in fields)
            for m, fields in by_manager.items()
        )
    plural = "conflict" if len(causes) == 1 else "conflicts"
    return ApiError(
        409,
        f"Apply failed with {len(causes)} {plural}: {text}",
        "Conflict",
        {"name": name, "group": rt.group, "kind": rt.plural, "causes": causes},
    )


def place_new(rt: ResourceType, ns: str, meta: dict[str, Any]) -> str:
    """The namespace of an object being created: the request's (the body may only repeat
    it), or "" for a cluster-scoped kind."""
    if not rt.namespaced:
        meta.pop("namespace", None)
        return ""
    body_ns = meta.get("namespace")
    if body_ns and body_ns != ns:
        raise ApiError(
            400,
            "the namespace of the provided object does not match the namespace sent on the request",
        )
    meta["namespace"] = ns
    return ns


def name_new(rt: ResourceType, meta: dict[str, Any]) -> str:
    """The name of an object being created, generated from generateName when absent."""
    if not meta.get("name"):
        if not meta.get("generateName"):
            raise invalid(
                rt.kind,
                rt.group,
                "",
                [
                    {
                        "field": "metadata.name",
                        "reason": "FieldValueRequired",
                        "message": "Required value: name or generateName is required",
                    }
                ],
            )
        suffix = "".join(random.choice(_NAME_CHARS) for _ in range(5))
        meta["name"] = meta["generateName"] + suffix
    return meta["name"]


def stamp_new(rt: ResourceType, obj: dict[str, Any]) -> None:
    """What the server sets on every new object, dropping what a client may not set."""
    meta = obj["metadata"]
    obj["apiVersion"] = rt.api_version
    obj["kind"] = rt.kind
    for f in (
        "resourceVersion",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "selfLink",
        "managedFields",
    ):
        meta.pop(f, None)
    meta["uid"] = str(uuid.uuid4())
    meta["creationTimestamp"] = now_iso()
    if rt.generation:
        meta["generation"] = 1
    else:
        meta.pop("generation", None)


def carry_over(
    rt: ResourceType, name: str, old: dict[str, Any], new: dict[str, Any], subresource: str
) -> dict[str, Any]:
    """The body of an update checked against the stored object (name, resourceVersion
    precondition, no finalizer added while deleting), with what it may not change taken
    from the stored object: status outside /status, everything but status on /status,
    and the immutable metadata."""
    if not isinstance(new, dict) or not isinstance(new.get("metadata", {}), dict):
        raise ApiError(400, "the body of the request must be an object")
    meta = new.setdefault("metadata", {})
    if meta.get("name") not in (None, name):
        raise ApiError(
            400,
            f"the name of the object ({meta.get('name')}) does not match "
            f"the name on the URL ({name})",
        )
    want_rv = meta.get("resourceVersion")
    if want_rv not in (None, "") and str(want_rv) != old["metadata"]["resourceVersion"]:
        raise conflict(rt.plural, rt.group, name, STALE)
    old_meta = old["metadata"]
    if subresource == "status":
        # /status changes only status (and nothing else).
        merged = clone(old)
        if "status" in new:
            merged["status"] = new["status"]
        else:
            merged.pop("status", None)
        new = merged
        meta = new["metadata"]
    elif rt.status_subresource:
        if "status" in old:
            new["status"] = clone(old["status"])
        else:
            new.pop("status", None)
    new["apiVersion"] = rt.api_version
    new["kind"] = rt.kind
    for f in (
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "namespace",
        "generation",
    ):
        if f in old_meta:
            meta[f] = old_meta[f]
        else:
            meta.pop(f, None)
    meta["name"] = name
    meta.pop("selfLink", None)
    if old_meta.get("deletionTimestamp"):
        added = set(meta.get("finalizers") or []) - set(old_meta.get("finalizers") or [])
        if added:
            raise invalid(
                rt.kind,
                rt.group,
                name,
                [
                    {
                        "field": "metadata.finalizers",
                        "reason": "FieldValueForbidden",
                        "message": "Forbidden: no new finalizers can be added if the object is "
                        "being deleted",
                    }
                ],
            )
    return new

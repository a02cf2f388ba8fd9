"""The `scale` subresource (autoscaling/v1 Scale) of Deployments, ReplicaSets and custom
resources that declare one, and the answers to the self reviews kubectl sends (`auth can-i`,
`auth can-i --list`, `auth whoami`). Pure functions."""

from __future__ import annotations

from typing import Any

from localcluster.errors import ApiError
from localcluster.resources import ResourceType


def _path_get(obj: Any, path: str) -> Any:
    node = obj
    for step in path.strip(".").split("."):
        if not step:
            continue
        if not isinstance(node, dict):
            return None
        node = node.get(step)
    return node


def selector_string(selector: dict[str, Any] | None) -> str:
    """A LabelSelector in its string form (`app=web,tier in (a,b)`), as Scale.status has it."""
    selector = selector or {}
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key", ""), expr.get("operator", ""), expr.get("values") or []
        if op == "In":
            parts.append(f"{key} in ({','.join(sorted(values))})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({','.join(sorted(values))})")
        elif op == "Exists":
            parts.append(key)
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts)


def scale_of(rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
    """The Scale view of an object."""
    assert rt.scale is not None
    spec_path, status_path, selector_path = rt.scale
    meta = obj["metadata"]
    if rt.custom:
        selector = _path_get(obj, selector_path) if selector_path else None
    else:
        selector = selector_string((obj.get("spec") or {}).get("selector"))
    status: dict[str, Any] = {"replicas": int(_path_get(obj, status_path) or 0)}
    if selector:
        status["selector"] = selector
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            k: meta[k]
            for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if k in meta
        },
        "spec": {"replicas": int(_path_get(obj, spec_path) or 0)},
        "status": status,
    }


def replicas_patch(rt: ResourceType, scale: Any) -> dict[str, Any]:
    """The merge patch that writes a Scale's spec.replicas (and its resourceVersion, a
    precondition) into the object it scales."""
    assert rt.scale is not None
    replicas = (
        ((scale or {}).get("spec") or {}).get("replicas") if isinstance(scale, dict) else None
    )
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        raise ApiError(
            422,
            f'Scale.autoscaling "{((scale or {}).get("metadata") or {}).get("name", "")}" is '
            "invalid: spec.replicas: Invalid value: must be greater than or equal to 0",
            "Invalid",
        )
    patch: dict[str, Any] = {}
    node = patch
    steps = [s for s in rt.scale[0].strip(".").split(".") if s]
    for step in steps[:-1]:
        node = node.setdefault(step, {})
    node[steps[-1]] = replicas
    rv = (scale.get("metadata") or {}).get("resourceVersion")
    if rv:
        patch["metadata"] = {"resourceVersion": rv}
    return patch


# Who every request is, here: the kubeconfig's token is not checked, so everyone is admin.
ADMIN = {"username": "localcluster-admin", "groups": ["system:masters", "system:authenticated"]}


def review(rt: ResourceType, body: Any) -> dict[str, Any]:
    """The answer to a SelfSubjectAccessReview (allowed), SelfSubjectRulesReview (every verb
    on everything) or SelfSubjectReview (the admin user): there is no RBAC, so a real
    server would answer the same to a cluster admin."""
    spec = (body.get("spec") if isinstance(body, dict) else None) or {}
    if rt.kind == "SelfSubjectAccessReview":
        status: dict[str, Any] = {"allowed": True, "reason": "localcluster allows every request"}
    elif rt.kind == "SelfSubjectRulesReview":
        status = {
            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
            "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
            "incomplete": False,
        }
    else:
        status = {"userInfo": dict(ADMIN)}
    out = {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": {}, "status": status}
    if rt.kind != "SelfSubjectReview":
        out["spec"] = spec
    return out

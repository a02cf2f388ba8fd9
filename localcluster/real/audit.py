"""Reading the real API server's audit log against RBAC manifests. Pure except `read_events`.

A permission is (apiGroup, resource[/subresource], verb) as RBAC names it; the audit log
records the same triple for every request, so what a ServiceAccount was granted and what it
used can be compared exactly.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

Doc = dict[str, Any]


class Permission(NamedTuple):
    group: str
    resource: str
    verb: str


def read_events(path: Path) -> list[Doc]:
    """The audit log's events, one per request (the last stage recorded for each)."""
    by_id: dict[str, Doc] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            event = json.loads(line)
            by_id[event.get("auditID", str(len(by_id)))] = event
    return list(by_id.values())


def service_account_user(namespace: str, name: str) -> str:
    return f"system:serviceaccount:{namespace}:{name}"


def _resource(ref: Doc) -> str:
    sub = ref.get("subresource")
    return f"{ref.get('resource', '')}/{sub}" if sub else ref.get("resource", "")


def of_user(events: Iterable[Doc], user: str) -> list[Doc]:
    return [e for e in events if (e.get("user") or {}).get("username") == user]


def forbidden(events: Iterable[Doc]) -> list[Doc]:
    return [e for e in events if (e.get("responseStatus") or {}).get("code") == 403]


def used(events: Iterable[Doc]) -> set[Permission]:
    """The permissions the requests needed (resource requests only: discovery and /version
    are open to every authenticated user)."""
    out = set()
    for event in events:
        ref = event.get("objectRef")
        if ref and ref.get("resource"):
            out.add(Permission(ref.get("apiGroup", ""), _resource(ref), event["verb"]))
    return out


def _subject_is(binding: Doc, namespace: str, name: str) -> bool:
    return any(
        s.get("kind") == "ServiceAccount"
        and s.get("name") == name
        and s.get("namespace", binding["metadata"].get("namespace")) == namespace
        for s in binding.get("subjects") or []
    )


def granted(docs: Iterable[Doc], namespace: str, name: str) -> set[Permission]:
    """Everything the Roles and ClusterRoles bound to ServiceAccount namespace/name allow."""
    docs = [d for d in docs if d]
    roles = {
        (d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]): d
        for d in docs
        if d.get("kind") in ("Role", "ClusterRole")
    }
    out: set[Permission] = set()
    for binding in docs:
        if binding.get("kind") not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        if not _subject_is(binding, namespace, name):
            continue
        ref = binding["roleRef"]
        scope = binding["metadata"].get("namespace", "") if ref["kind"] == "Role" else ""
        role = roles.get((ref["kind"], scope, ref["name"]))
        for rule in (role or {}).get("rules") or []:
            for group in rule.get("apiGroups") or []:
                for resource in rule.get("resources") or []:
                    for verb in rule.get("verbs") or []:
                        out.add(Permission(group, resource, verb))
    return out

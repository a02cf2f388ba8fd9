"""The audit-log reading the manifests test relies on (pure)."""

from __future__ import annotations

import json
from pathlib import Path

from localcluster.real.audit import Permission, forbidden, granted, of_user, read_events, used

SA = "system:serviceaccount:haptic:ctl"
DOCS = [
    {
        "kind": "Role",
        "metadata": {"name": "r", "namespace": "haptic"},
        "rules": [{"apiGroups": [""], "resources": ["pods", "pods/status"], "verbs": ["get"]}],
    },
    {
        "kind": "RoleBinding",
        "metadata": {"name": "r", "namespace": "haptic"},
        "roleRef": {"kind": "Role", "name": "r"},
        "subjects": [{"kind": "ServiceAccount", "name": "ctl"}],
    },
    {
        "kind": "ClusterRole",
        "metadata": {"name": "c"},
        "rules": [{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["list"]}],
    },
    {
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "c"},
        "roleRef": {"kind": "ClusterRole", "name": "c"},
        "subjects": [{"kind": "ServiceAccount", "name": "other", "namespace": "haptic"}],
    },
]


def test_granted_follows_bindings_to_their_subjects() -> None:
    assert granted(DOCS, "haptic", "ctl") == {
        Permission("", "pods", "get"),
        Permission("", "pods/status", "get"),
    }
    assert granted(DOCS, "haptic", "other") == {Permission("apps", "deployments", "list")}
    assert granted(DOCS, "elsewhere", "ctl") == set()


def test_events_give_used_permissions_and_403s(tmp_path: Path) -> None:
    events = [
        {"auditID": "1", "stage": "ResponseStarted", "verb": "watch", "user": {"username": SA},
         "objectRef": {"resource": "pods"}},
        {"auditID": "1", "stage": "ResponseComplete", "verb": "watch", "user": {"username": SA},
         "objectRef": {"resource": "pods"}, "responseStatus": {"code": 200}},
        {"auditID": "2", "stage": "ResponseComplete", "verb": "patch", "user": {"username": SA},
         "objectRef": {"resource": "pods", "subresource": "status"},
         "responseStatus": {"code": 403}},
        {"auditID": "3", "stage": "ResponseComplete", "verb": "get", "user": {"username": "x"},
         "objectRef": {"resource": "secrets"}, "responseStatus": {"code": 200}},
        {"auditID": "4", "stage": "ResponseComplete", "verb": "get", "user": {"username": SA},
         "requestURI": "/version", "responseStatus": {"code": 200}},
    ]  # fmt: skip
    log = tmp_path / "audit.log"
    log.write_text("".join(json.dumps(e) + "\n" for e in events))
    read = read_events(log)
    assert len(read) == 4  # one per request: the last stage of auditID 1
    mine = of_user(read, SA)
    assert used(mine) == {Permission("", "pods", "watch"), Permission("", "pods/status", "patch")}
    assert [e["auditID"] for e in forbidden(mine)] == ["2"]

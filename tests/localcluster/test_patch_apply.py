"""Merge, JSON and strategic merge patches; server-side apply with field managers."""

from __future__ import annotations

import json

import pytest
from kubernetes.client import ApiException

APPLY = "application/apply-patch+yaml"


def _pod(name: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "containers": [
                {"name": "a", "image": "i", "env": [{"name": "X", "value": "1"}]},
                {"name": "b", "image": "i"},
            ]
        },
    }


def test_merge_patch_via_custom_objects_api(client, namespace):
    import kubernetes

    co = kubernetes.client.CustomObjectsApi(client)
    args = ("haproxy-haptic.org", "v1alpha1", namespace, "haproxymapfiles")
    co.create_namespaced_custom_object(
        *args,
        {
            "apiVersion": "haproxy-haptic.org/v1alpha1",
            "kind": "HAProxyMapFile",
            "metadata": {"name": "m", "labels": {"a": "1", "b": "2"}},
            "spec": {"path": "maps/host.map", "content": "x", "checksum": "sha256:1"},
        },
    )
    out = co.patch_namespaced_custom_object(
        *args, "m", {"metadata": {"labels": {"a": None, "c": "3"}}, "spec": {"content": "y"}}
    )
    assert out["metadata"]["labels"] == {"b": "2", "c": "3"}
    assert out["spec"]["content"] == "y" and out["spec"]["path"] == "maps/host.map"
    assert out["metadata"]["generation"] == 2


def test_strategic_merge_is_refused_for_custom_resources(client, namespace):
    import kubernetes

    co = kubernetes.client.CustomObjectsApi(client)
    args = ("haproxy-haptic.org", "v1alpha1", namespace, "haproxymapfiles")
    co.create_namespaced_custom_object(
        *args,
        {
            "apiVersion": "haproxy-haptic.org/v1alpha1",
            "kind": "HAProxyMapFile",
            "metadata": {"name": "m"},
            "spec": {"path": "p", "content": "x", "checksum": "c"},
        },
    )
    with pytest.raises(ApiException) as err:
        co.patch_namespaced_custom_object(
            *args,
            "m",
            {"spec": {"content": "y"}},
            _content_type="application/strategic-merge-patch+json",
        )
    assert err.value.status == 415


def test_json_patch_with_test_operation(core, namespace):
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "j"}, "data": {"a": "1"}})
    out = core.patch_namespaced_config_map(
        "j",
        namespace,
        [
            {"op": "test", "path": "/data/a", "value": "1"},
            {"op": "replace", "path": "/data/a", "value": "2"},
            {"op": "add", "path": "/data/b", "value": "3"},
        ],
    )
    assert out.data == {"a": "2", "b": "3"}
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_config_map(
            "j",
            namespace,
            [
                {"op": "test", "path": "/data/a", "value": "1"},
                {"op": "replace", "path": "/data/a", "value": "9"},
            ],
        )
    assert err.value.status == 422
    assert core.read_namespaced_config_map("j", namespace).data["a"] == "2"


def test_resource_version_in_patch_is_a_precondition(core, namespace):
    cm = core.create_namespaced_config_map(namespace, {"metadata": {"name": "p"}})
    core.patch_namespaced_config_map("p", namespace, {"data": {"a": "1"}})
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_config_map(
            "p",
            namespace,
            {"metadata": {"resourceVersion": cm.metadata.resource_version}, "data": {"a": "2"}},
        )
    assert err.value.status == 409
    current = core.read_namespaced_config_map("p", namespace)
    out = core.patch_namespaced_config_map(
        "p",
        namespace,
        {"metadata": {"resourceVersion": current.metadata.resource_version}, "data": {"a": "3"}},
    )
    assert out.data == {"a": "3"}


def test_strategic_merge_patch_merges_containers_and_conditions_by_key(core, namespace):
    core.create_namespaced_pod(namespace, _pod("s"))
    # A dict body goes out as strategic merge patch with this client.
    pod = core.patch_namespaced_pod(
        "s",
        namespace,
        {
            "spec": {
                "containers": [
                    {"name": "b", "image": "new"},
                    {"name": "a", "env": [{"name": "Y", "value": "2"}]},
                ]
            }
        },
    )
    containers = {c.name: c for c in pod.spec.containers}
    assert set(containers) == {"a", "b"}
    assert containers["b"].image == "new" and containers["a"].image == "i"
    assert {(e.name, e.value) for e in containers["a"].env} == {("X", "1"), ("Y", "2")}
    core.patch_namespaced_pod_status(
        "s",
        namespace,
        {
            "status": {
                "conditions": [
                    {"type": "Ready", "status": "False"},
                    {"type": "example.com/gate", "status": "True"},
                ]
            }
        },
    )
    pod = core.patch_namespaced_pod_status(
        "s", namespace, {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    )
    conds = {c.type: c.status for c in pod.status.conditions}
    assert conds == {"Ready": "True", "example.com/gate": "True"}
    pod = core.patch_namespaced_pod(
        "s", namespace, {"spec": {"containers": [{"name": "b", "$patch": "delete"}]}}
    )
    assert [c.name for c in pod.spec.containers] == ["a"]


def _apply_condition(
    core, namespace: str, manager: str, ctype: str, status: str, force: bool = False
):
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "ssa"},
        "status": {"conditions": [{"type": ctype, "status": status}]},
    }
    return core.patch_namespaced_pod_status(
        "ssa", namespace, body, field_manager=manager, force=force, _content_type=APPLY
    )


def test_two_managers_each_own_one_pod_condition(core, namespace):
    core.create_namespaced_pod(namespace, _pod("ssa"))
    _apply_condition(core, namespace, "kubelet-ish", "Ready", "False")
    pod = _apply_condition(
        core, namespace, "haptic-deployed", "haproxy-haptic.org/load-balancer-ready", "True"
    )
    conds = {c.type: c.status for c in pod.status.conditions}
    assert conds == {"Ready": "False", "haproxy-haptic.org/load-balancer-ready": "True"}
    # Re-applying one manager's condition leaves the other's alone.
    pod = _apply_condition(core, namespace, "kubelet-ish", "Ready", "True")
    conds = {c.type: c.status for c in pod.status.conditions}
    assert conds == {"Ready": "True", "haproxy-haptic.org/load-balancer-ready": "True"}
    pod = _apply_condition(
        core, namespace, "haptic-deployed", "haproxy-haptic.org/load-balancer-ready", "False"
    )
    conds = {c.type: c.status for c in pod.status.conditions}
    assert conds == {"Ready": "True", "haproxy-haptic.org/load-balancer-ready": "False"}
    owners = {}
    for entry in pod.metadata.managed_fields:
        conditions = (entry.fields_v1 or {}).get("f:status", {}).get("f:conditions", {})
        for key in conditions:
            owners[json.loads(key[2:])["type"]] = (
                entry.manager,
                entry.operation,
                entry.subresource,
            )
    assert owners == {
        "Ready": ("kubelet-ish", "Apply", "status"),
        "haproxy-haptic.org/load-balancer-ready": ("haptic-deployed", "Apply", "status"),
    }


def test_changing_another_managers_field_conflicts_unless_forced(core, namespace):
    core.create_namespaced_pod(namespace, _pod("ssa"))
    _apply_condition(core, namespace, "owner", "Ready", "True")
    with pytest.raises(ApiException) as err:
        _apply_condition(core, namespace, "intruder", "Ready", "False")
    assert err.value.status == 409
    body = json.loads(err.value.body)
    assert body["reason"] == "Conflict"
    assert body["details"]["causes"][0]["field"] == '.status.conditions[type="Ready"].status'
    assert body["message"] == (
        'Apply failed with 1 conflict: conflict with "owner" using v1: '
        '.status.conditions[type="Ready"].status'
    )
    # Applying the same value is shared ownership, not a conflict.
    _apply_condition(core, namespace, "intruder", "Ready", "True")
    pod = _apply_condition(core, namespace, "intruder", "Ready", "False", force=True)
    assert {c.type: c.status for c in pod.status.conditions} == {"Ready": "False"}


def test_apply_removes_fields_the_manager_stopped_applying(core, namespace):
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cfg", "labels": {"a": "1", "b": "2"}},
        "data": {"x": "1"},
    }
    # Apply creates the object when it does not exist.
    out = core.patch_namespaced_config_map(
        "cfg", namespace, body, field_manager="m1", _content_type=APPLY
    )
    assert out.metadata.labels == {"a": "1", "b": "2"}
    core.patch_namespaced_config_map("cfg", namespace, {"data": {"y": "2"}}, field_manager="editor")
    body["metadata"]["labels"] = {"a": "1"}
    body["data"] = {}
    out = core.patch_namespaced_config_map(
        "cfg", namespace, body, field_manager="m1", _content_type=APPLY
    )
    assert out.metadata.labels == {"a": "1"}
    assert out.data == {"y": "2"}  # still owned by "editor"


def test_apply_requires_field_manager(core, namespace):
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "fm"}})
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_config_map(
            "fm",
            namespace,
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "fm"}},
            _content_type=APPLY,
        )
    assert err.value.status in (400, 422)


def test_apply_naming_another_uid_is_refused_as_the_real_server_does(core, namespace):
    """An applied configuration may carry metadata.uid: the real API server then refuses
    it on an object with another uid (422, "field is immutable"), a uid precondition."""
    created = core.create_namespaced_config_map(namespace, {"metadata": {"name": "uidp"}})
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "uidp"}}
    body["metadata"]["uid"] = created.metadata.uid
    body["data"] = {"x": "1"}
    out = core.patch_namespaced_config_map(
        "uidp", namespace, body, field_manager="m1", _content_type=APPLY
    )
    assert out.data == {"x": "1"}
    body["metadata"]["uid"] = "00000000-0000-0000-0000-000000000000"
    body["data"] = {"x": "2"}
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_config_map(
            "uidp", namespace, body, field_manager="m1", _content_type=APPLY
        )
    assert err.value.status == 422 and "field is immutable" in err.value.body
    assert core.read_namespaced_config_map("uidp", namespace).data == {"x": "1"}


def test_custom_resource_list_map_from_schema_is_shared_by_appliers(client, namespace):
    import kubernetes

    co = kubernetes.client.CustomObjectsApi(client)
    args = ("haproxy-haptic.org", "v1alpha1", namespace, "haproxycfgs")
    co.create_namespaced_custom_object(
        *args,
        {
            "apiVersion": "haproxy-haptic.org/v1alpha1",
            "kind": "HAProxyCfg",
            "metadata": {"name": "cfg"},
            "spec": {"path": "haproxy.cfg", "content": "x", "checksum": "sha256:1"},
        },
    )

    def apply(manager: str, pod: str, checksum: str) -> dict:
        body = {
            "apiVersion": "haproxy-haptic.org/v1alpha1",
            "kind": "HAProxyCfg",
            "metadata": {"name": "cfg"},
            "status": {"deployedToPods": [{"podName": pod, "checksum": checksum}]},
        }
        return co.patch_namespaced_custom_object_status(
            *args, "cfg", body, field_manager=manager, _content_type=APPLY
        )

    apply("deployer-a", "haproxy-0", "sha256:1")
    out = apply("deployer-b", "haproxy-1", "sha256:1")
    out = apply("deployer-a", "haproxy-0", "sha256:2")
    pods = {p["podName"]: p["checksum"] for p in out["status"]["deployedToPods"]}
    assert pods == {"haproxy-0": "sha256:2", "haproxy-1": "sha256:1"}
    assert out["spec"]["content"] == "x"

"""Delete preconditions, finalizers, owner garbage collection and namespace deletion."""

from __future__ import annotations

import json
import time

import kubernetes
import pytest
from kubernetes.client import ApiException


def _wait_gone(read, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            read()
        except ApiException as exc:
            if exc.status == 404:
                return
            raise
        time.sleep(0.05)
    pytest.fail("object still present")


def _owner_ref(obj, kind: str, api_version: str, block: bool = False) -> dict:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": obj.metadata.name,
        "uid": obj.metadata.uid,
        "blockOwnerDeletion": block,
    }


def test_delete_preconditions(core, namespace):
    cm = core.create_namespaced_config_map(namespace, {"metadata": {"name": "pre"}})
    with pytest.raises(ApiException) as err:
        core.delete_namespaced_config_map(
            "pre",
            namespace,
            body={"preconditions": {"uid": "00000000-0000-0000-0000-000000000000"}},
        )
    assert err.value.status == 409
    assert "Precondition failed: UID in precondition" in json.loads(err.value.body)["message"]
    core.patch_namespaced_config_map("pre", namespace, {"data": {"a": "b"}})
    with pytest.raises(ApiException) as err:
        core.delete_namespaced_config_map(
            "pre",
            namespace,
            body={"preconditions": {"resourceVersion": cm.metadata.resource_version}},
        )
    assert err.value.status == 409
    current = core.read_namespaced_config_map("pre", namespace)
    core.delete_namespaced_config_map(
        "pre",
        namespace,
        body={
            "preconditions": {
                "uid": current.metadata.uid,
                "resourceVersion": current.metadata.resource_version,
            }
        },
    )
    _wait_gone(lambda: core.read_namespaced_config_map("pre", namespace))


def test_finalizers_hold_deletion_until_removed(core, namespace):
    core.create_namespaced_config_map(
        namespace, {"metadata": {"name": "fin", "finalizers": ["example.com/hold"]}}
    )
    core.delete_namespaced_config_map("fin", namespace)
    held = core.read_namespaced_config_map("fin", namespace)
    assert held.metadata.deletion_timestamp is not None
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_config_map(
            "fin", namespace, {"metadata": {"finalizers": ["example.com/hold", "example.com/new"]}}
        )
    assert err.value.status == 422
    core.patch_namespaced_config_map("fin", namespace, {"metadata": {"finalizers": None}})
    _wait_gone(lambda: core.read_namespaced_config_map("fin", namespace))


def test_background_garbage_collection_by_owner_uid(core, namespace):
    owner = core.create_namespaced_config_map(namespace, {"metadata": {"name": "owner"}})
    ref = _owner_ref(owner, "ConfigMap", "v1")
    core.create_namespaced_secret(
        namespace, {"metadata": {"name": "dep1", "ownerReferences": [ref]}}
    )
    core.create_namespaced_config_map(
        namespace, {"metadata": {"name": "dep2", "ownerReferences": [ref]}}
    )
    stranger = dict(ref, uid="11111111-1111-1111-1111-111111111111", name="gone")
    core.create_namespaced_config_map(
        namespace, {"metadata": {"name": "unrelated", "ownerReferences": [stranger]}}
    )
    core.delete_namespaced_config_map("owner", namespace)
    _wait_gone(lambda: core.read_namespaced_secret("dep1", namespace))
    _wait_gone(lambda: core.read_namespaced_config_map("dep2", namespace))
    assert core.read_namespaced_config_map("unrelated", namespace).metadata.name == "unrelated"


def test_recreated_owner_with_same_name_does_not_adopt(core, namespace):
    owner = core.create_namespaced_config_map(namespace, {"metadata": {"name": "o"}})
    other = core.create_namespaced_config_map(namespace, {"metadata": {"name": "o2"}})
    core.create_namespaced_secret(
        namespace,
        {
            "metadata": {
                "name": "two-owners",
                "ownerReferences": [
                    _owner_ref(owner, "ConfigMap", "v1"),
                    _owner_ref(other, "ConfigMap", "v1"),
                ],
            }
        },
    )
    core.delete_namespaced_config_map("o", namespace)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        refs = core.read_namespaced_secret("two-owners", namespace).metadata.owner_references
        if len(refs) == 1:
            break
        time.sleep(0.05)
    assert [r.uid for r in refs] == [other.metadata.uid]


def test_foreground_deletion_waits_for_dependents(client, namespace):
    core = kubernetes.client.CoreV1Api(client)
    owner = core.create_namespaced_config_map(namespace, {"metadata": {"name": "fg"}})
    core.create_namespaced_config_map(
        namespace,
        {
            "metadata": {
                "name": "fg-dep",
                "finalizers": ["example.com/slow"],
                "ownerReferences": [_owner_ref(owner, "ConfigMap", "v1", block=True)],
            }
        },
    )
    core.delete_namespaced_config_map("fg", namespace, propagation_policy="Foreground")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        dep = core.read_namespaced_config_map("fg-dep", namespace)
        if dep.metadata.deletion_timestamp:
            break
        time.sleep(0.05)
    held = core.read_namespaced_config_map("fg", namespace)
    assert held.metadata.deletion_timestamp is not None
    assert "foregroundDeletion" in held.metadata.finalizers
    core.patch_namespaced_config_map("fg-dep", namespace, {"metadata": {"finalizers": None}})
    _wait_gone(lambda: core.read_namespaced_config_map("fg-dep", namespace))
    _wait_gone(lambda: core.read_namespaced_config_map("fg", namespace))


def test_orphan_propagation_keeps_dependents(core, namespace):
    owner = core.create_namespaced_config_map(namespace, {"metadata": {"name": "orph"}})
    core.create_namespaced_config_map(
        namespace,
        {"metadata": {"name": "kept", "ownerReferences": [_owner_ref(owner, "ConfigMap", "v1")]}},
    )
    core.delete_namespaced_config_map("orph", namespace, propagation_policy="Orphan")
    _wait_gone(lambda: core.read_namespaced_config_map("orph", namespace))
    kept = core.read_namespaced_config_map("kept", namespace)
    assert not kept.metadata.owner_references


def test_custom_resource_children_are_collected_with_their_template(client, namespace):
    co = kubernetes.client.CustomObjectsApi(client)
    group, version = "haproxy-haptic.org", "v1alpha1"
    tpl = co.create_namespaced_custom_object(
        group,
        version,
        namespace,
        "haproxytemplateconfigs",
        {
            "apiVersion": f"{group}/{version}",
            "kind": "HAProxyTemplateConfig",
            "metadata": {"name": "haptic"},
            "spec": {"podSelector": {"matchLabels": {"app": "haproxy"}}},
        },
    )
    ref = {
        "apiVersion": f"{group}/{version}",
        "kind": "HAProxyTemplateConfig",
        "name": "haptic",
        "uid": tpl["metadata"]["uid"],
    }
    co.create_namespaced_custom_object(
        group,
        version,
        namespace,
        "haproxycfgs",
        {
            "apiVersion": f"{group}/{version}",
            "kind": "HAProxyCfg",
            "metadata": {"name": "checkpoint-1", "ownerReferences": [ref]},
            "spec": {"path": "haproxy.cfg", "content": "global", "checksum": "sha256:0"},
        },
    )
    kubernetes.client.CoordinationV1Api(client).create_namespaced_lease(
        namespace,
        {"metadata": {"name": "haptic-retained-state", "ownerReferences": [ref]}, "spec": {}},
    )
    co.delete_namespaced_custom_object(
        group, version, namespace, "haproxytemplateconfigs", "haptic"
    )
    _wait_gone(
        lambda: co.get_namespaced_custom_object(
            group, version, namespace, "haproxycfgs", "checkpoint-1"
        )
    )
    _wait_gone(
        lambda: kubernetes.client.CoordinationV1Api(client).read_namespaced_lease(
            "haptic-retained-state", namespace
        )
    )


def test_bound_pod_deletes_gracefully_and_node_finishes(core, namespace):
    core.create_namespaced_pod(
        namespace,
        {
            "metadata": {"name": "bound"},
            "spec": {"nodeName": "local", "containers": [{"name": "c"}]},
        },
    )
    core.delete_namespaced_pod("bound", namespace)
    pod = core.read_namespaced_pod("bound", namespace)
    assert pod.metadata.deletion_timestamp is not None
    assert pod.metadata.deletion_grace_period_seconds == 30
    core.delete_namespaced_pod("bound", namespace, grace_period_seconds=0)
    _wait_gone(lambda: core.read_namespaced_pod("bound", namespace))


def test_namespace_deletion_removes_its_content(core):
    core.create_namespace({"metadata": {"name": "doomed"}})
    core.create_namespaced_config_map("doomed", {"metadata": {"name": "a"}})
    core.create_namespaced_pod(
        "doomed", {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}}
    )
    core.delete_namespace("doomed")
    _wait_gone(lambda: core.read_namespace("doomed"))
    assert core.list_namespaced_config_map("doomed").items == []
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map("doomed", {"metadata": {"name": "late"}})
    assert err.value.status == 404


def test_bound_pod_with_finalizer_completes_after_node_delete_and_finalizer_removal(
    core, namespace
):
    core.create_namespaced_pod(
        namespace,
        {
            "metadata": {"name": "fp", "finalizers": ["example.com/keep"]},
            "spec": {"nodeName": "local", "containers": [{"name": "c"}]},
        },
    )
    core.delete_namespaced_pod("fp", namespace)
    assert core.read_namespaced_pod("fp", namespace).metadata.deletion_grace_period_seconds == 30
    core.delete_namespaced_pod("fp", namespace, grace_period_seconds=0)
    pod = core.read_namespaced_pod("fp", namespace)
    assert pod.metadata.deletion_grace_period_seconds == 0
    core.patch_namespaced_pod("fp", namespace, {"metadata": {"finalizers": None}})
    _wait_gone(lambda: core.read_namespaced_pod("fp", namespace))

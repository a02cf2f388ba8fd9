"""Label and field selectors, pagination, and custom resources validated by their schema."""

from __future__ import annotations

import json

import kubernetes
import pytest
from kubernetes.client import ApiException

GROUP, VERSION = "haproxy-haptic.org", "v1alpha1"


@pytest.fixture()
def labelled(core, namespace):
    for name, labels in [
        ("a", {"app": "web", "tier": "front"}),
        ("b", {"app": "web"}),
        ("c", {"app": "db", "tier": "back"}),
        ("d", {}),
    ]:
        core.create_namespaced_config_map(namespace, {"metadata": {"name": name, "labels": labels}})
    return namespace


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("app=web", ["a", "b"]),
        ("app==web", ["a", "b"]),
        ("app!=web", ["c", "d"]),
        ("app in (web, db)", ["a", "b", "c"]),
        ("app notin (web)", ["c", "d"]),
        ("tier", ["a", "c"]),
        ("!tier", ["b", "d"]),
        ("app=web,tier", ["a"]),
        ("app=web,!tier", ["b"]),
    ],
)
def test_label_selectors(core, labelled, selector, expected):
    items = core.list_namespaced_config_map(labelled, label_selector=selector).items
    assert sorted(i.metadata.name for i in items) == expected


def test_bad_label_selector_is_400(core, namespace):
    with pytest.raises(ApiException) as err:
        core.list_namespaced_config_map(namespace, label_selector="a in (b")
    assert err.value.status == 400


def test_field_selectors(core, labelled):
    items = core.list_namespaced_config_map(labelled, field_selector="metadata.name=c").items
    assert [i.metadata.name for i in items] == ["c"]
    items = core.list_config_map_for_all_namespaces(
        field_selector=f"metadata.namespace={labelled},metadata.name!=c"
    ).items
    assert sorted(i.metadata.name for i in items) == ["a", "b", "d"]
    with pytest.raises(ApiException) as err:
        core.list_namespaced_config_map(labelled, field_selector="data.x=1")
    assert err.value.status == 400


def test_pod_phase_field_selector(core, namespace):
    for name in ("run", "wait"):
        core.create_namespaced_pod(
            namespace, {"metadata": {"name": name}, "spec": {"containers": [{"name": "c"}]}}
        )
    core.patch_namespaced_pod_status("run", namespace, {"status": {"phase": "Running"}})
    running = core.list_namespaced_pod(namespace, field_selector="status.phase=Running").items
    assert [p.metadata.name for p in running] == ["run"]
    other = core.list_namespaced_pod(namespace, field_selector="status.phase!=Running").items
    assert [p.metadata.name for p in other] == ["wait"]


def test_limit_and_continue_give_a_consistent_snapshot(core, namespace):
    for i in range(7):
        core.create_namespaced_config_map(namespace, {"metadata": {"name": f"c{i}"}})
    page = core.list_namespaced_config_map(namespace, limit=3)
    names = [i.metadata.name for i in page.items]
    assert len(names) == 3 and page.metadata._continue
    assert page.metadata.remaining_item_count == 4
    list_rv = page.metadata.resource_version
    # Changes after the first page do not show in later pages of the same list.
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "c9-late"}})
    core.delete_namespaced_config_map("c6", namespace)
    while page.metadata._continue:
        page = core.list_namespaced_config_map(
            namespace, limit=3, _continue=page.metadata._continue
        )
        assert page.metadata.resource_version == list_rv
        names += [i.metadata.name for i in page.items]
    assert names == [f"c{i}" for i in range(7)]


def _tpl(name: str, spec: dict) -> dict:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "HAProxyTemplateConfig",
        "metadata": {"name": name},
        "spec": spec,
    }


def test_custom_resource_defaults_are_applied(client, namespace):
    co = kubernetes.client.CustomObjectsApi(client)
    out = co.create_namespaced_custom_object(
        GROUP,
        VERSION,
        namespace,
        "haproxytemplateconfigs",
        _tpl("t", {"podSelector": {}, "agent": {}}),
    )
    assert out["spec"]["agent"]["port"] == 8405
    assert out["spec"]["agent"]["scheme"] == "http"
    assert out["metadata"]["generation"] == 1


@pytest.mark.parametrize(
    ("spec", "field", "words"),
    [
        ({}, "spec.podSelector", "Required value"),
        (
            {"podSelector": {}, "agent": {"port": "eighty"}},
            "spec.agent.port",
            "must be of type integer",
        ),
        ({"podSelector": {}, "agent": {"scheme": "ftp"}}, "spec.agent.scheme", "Unsupported value"),
        ({"podSelector": {}, "agent": {"port": 70000}}, "spec.agent.port", "less than or equal"),
    ],
)
def test_custom_resource_validation_names_the_field(client, namespace, spec, field, words):
    co = kubernetes.client.CustomObjectsApi(client)
    with pytest.raises(ApiException) as err:
        co.create_namespaced_custom_object(
            GROUP, VERSION, namespace, "haproxytemplateconfigs", _tpl("bad", spec)
        )
    assert err.value.status == 422
    body = json.loads(err.value.body)
    assert body["reason"] == "Invalid"
    assert field in body["message"] and words in body["message"]
    assert any(c["field"] == field for c in body["details"]["causes"])


def test_custom_resource_status_subresource(client, namespace):
    co = kubernetes.client.CustomObjectsApi(client)
    args = (GROUP, VERSION, namespace, "haproxycfgs")
    co.create_namespaced_custom_object(
        *args,
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "HAProxyCfg",
            "metadata": {"name": "c"},
            "spec": {"path": "haproxy.cfg", "content": "x", "checksum": "sha256:1"},
            "status": {"observedGeneration": 99},
        },
    )
    got = co.get_namespaced_custom_object(*args, "c")
    assert "status" not in got
    out = co.patch_namespaced_custom_object_status(
        *args, "c", {"status": {"deployedToPods": [{"podName": "p1", "checksum": "sha256:1"}]}}
    )
    assert out["status"]["deployedToPods"][0]["podName"] == "p1"
    assert out["metadata"]["generation"] == 1
    with pytest.raises(ApiException) as err:
        co.patch_namespaced_custom_object_status(
            *args, "c", {"status": {"deployedToPods": [{"podName": "p1", "mode": "teleport"}]}}
        )
    assert err.value.status == 422
    assert "status.deployedToPods[0].mode" in json.loads(err.value.body)["message"]


def test_crd_created_through_the_api_serves_its_kind(client, namespace):
    ext = kubernetes.client.ApiextensionsV1Api(client)
    ext.create_custom_resource_definition(
        {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {
                "group": "example.com",
                "scope": "Namespaced",
                "names": {
                    "plural": "widgets",
                    "singular": "widget",
                    "kind": "Widget",
                    "listKind": "WidgetList",
                },
                "versions": [
                    {
                        "name": "v1",
                        "served": True,
                        "storage": True,
                        "schema": {
                            "openAPIV3Schema": {
                                "type": "object",
                                "properties": {
                                    "spec": {
                                        "type": "object",
                                        "required": ["size"],
                                        "properties": {"size": {"type": "integer"}},
                                    }
                                },
                            }
                        },
                    }
                ],
            },
        }
    )
    co = kubernetes.client.CustomObjectsApi(client)
    w = co.create_namespaced_custom_object(
        "example.com",
        "v1",
        namespace,
        "widgets",
        {
            "apiVersion": "example.com/v1",
            "kind": "Widget",
            "metadata": {"name": "w"},
            "spec": {"size": 3, "unknown": "pruned"},
        },
    )
    assert w["spec"] == {"size": 3}
    with pytest.raises(ApiException) as err:
        co.create_namespaced_custom_object(
            "example.com",
            "v1",
            namespace,
            "widgets",
            {
                "apiVersion": "example.com/v1",
                "kind": "Widget",
                "metadata": {"name": "x"},
                "spec": {},
            },
        )
    assert err.value.status == 422
    crd = ext.read_custom_resource_definition("widgets.example.com")
    assert any(c.type == "Established" and c.status == "True" for c in crd.status.conditions)
    ext.delete_custom_resource_definition("widgets.example.com")


def test_list_at_an_exact_resource_version(core, namespace):
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "e1"}})
    then = core.list_namespaced_config_map(namespace).metadata.resource_version
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "e2"}})
    core.delete_namespaced_config_map("e1", namespace)
    old = core.list_namespaced_config_map(
        namespace, resource_version=then, resource_version_match="Exact"
    )
    assert [i.metadata.name for i in old.items] == ["e1"]
    assert old.metadata.resource_version == then
    now = core.list_namespaced_config_map(namespace)
    assert [i.metadata.name for i in now.items] == ["e2"]


def test_watch_custom_objects(client, namespace):
    from kubernetes import watch

    co = kubernetes.client.CustomObjectsApi(client)
    args = (GROUP, VERSION, namespace, "haproxygeneralfiles")
    rv = co.list_namespaced_custom_object(*args)["metadata"]["resourceVersion"]
    co.create_namespaced_custom_object(
        *args,
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "HAProxyGeneralFile",
            "metadata": {"name": "g"},
            "spec": {"path": "general/a", "content": "x", "checksum": "sha256:1"},
        },
    )
    events = list(
        watch.Watch().stream(
            co.list_namespaced_custom_object, *args, resource_version=rv, timeout_seconds=1
        )
    )
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "g")]

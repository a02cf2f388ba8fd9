"""CRUD, optimistic concurrency, metadata and discovery through the official client."""

from __future__ import annotations

import json

import kubernetes
import pytest
from kubernetes.client import ApiException

from localcluster.testing import ApiServer


def _pod(name: str, **labels: str) -> dict:
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "main", "image": "busybox", "command": ["sleep"]}]},
    }


def test_create_get_list_replace_delete_configmap(core, namespace):
    created = core.create_namespaced_config_map(
        namespace, {"metadata": {"name": "cm"}, "data": {"a": "1"}}
    )
    assert created.metadata.uid and created.metadata.creation_timestamp
    got = core.read_namespaced_config_map("cm", namespace)
    assert got.data == {"a": "1"}
    assert got.metadata.resource_version == created.metadata.resource_version
    got.data["b"] = "2"
    replaced = core.replace_namespaced_config_map("cm", namespace, got)
    assert int(replaced.metadata.resource_version) > int(created.metadata.resource_version)
    assert replaced.metadata.uid == created.metadata.uid
    listed = core.list_namespaced_config_map(namespace)
    assert [i.metadata.name for i in listed.items] == ["cm"]
    assert int(listed.metadata.resource_version) >= int(replaced.metadata.resource_version)
    status = core.delete_namespaced_config_map("cm", namespace)
    # This client version hands a Status body back as a dict.
    assert (status if isinstance(status, dict) else status.to_dict())["status"] == "Success"
    with pytest.raises(ApiException) as err:
        core.read_namespaced_config_map("cm", namespace)
    assert err.value.status == 404
    body = json.loads(err.value.body)
    assert body["kind"] == "Status" and body["reason"] == "NotFound"
    assert body["message"] == 'configmaps "cm" not found'


def test_global_resource_version_increases_across_kinds(core, namespace):
    a = core.create_namespaced_config_map(namespace, {"metadata": {"name": "a"}})
    b = core.create_namespaced_secret(namespace, {"metadata": {"name": "b"}})
    c = core.create_namespaced_config_map(namespace, {"metadata": {"name": "c"}})
    rvs = [int(x.metadata.resource_version) for x in (a, b, c)]
    assert rvs == sorted(rvs) and len(set(rvs)) == 3


def test_stale_resource_version_is_conflict(client, namespace):
    coord = kubernetes.client.CoordinationV1Api(client)
    lease = coord.create_namespaced_lease(
        namespace, {"metadata": {"name": "l"}, "spec": {"holderIdentity": "a"}}
    )
    lease.spec.holder_identity = "b"
    coord.replace_namespaced_lease("l", namespace, lease)
    lease.spec.holder_identity = "c"
    with pytest.raises(ApiException) as err:
        coord.replace_namespaced_lease("l", namespace, lease)
    assert err.value.status == 409
    body = json.loads(err.value.body)
    assert body["reason"] == "Conflict"
    assert "the object has been modified" in body["message"]
    assert coord.read_namespaced_lease("l", namespace).spec.holder_identity == "b"


def test_create_existing_is_already_exists(core, namespace):
    core.create_namespaced_secret(namespace, {"metadata": {"name": "s"}, "stringData": {}})
    with pytest.raises(ApiException) as err:
        core.create_namespaced_secret(namespace, {"metadata": {"name": "s"}})
    assert err.value.status == 409
    assert json.loads(err.value.body)["reason"] == "AlreadyExists"


def test_generate_name(core, namespace):
    a = core.create_namespaced_config_map(namespace, {"metadata": {"generateName": "gen-"}})
    b = core.create_namespaced_config_map(namespace, {"metadata": {"generateName": "gen-"}})
    assert a.metadata.name.startswith("gen-") and len(a.metadata.name) == 9
    assert a.metadata.name != b.metadata.name


def test_missing_name_is_invalid(core, namespace):
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map(namespace, {"metadata": {}})
    assert err.value.status == 422
    assert "metadata.name" in json.loads(err.value.body)["message"]


def test_create_in_missing_namespace_is_not_found(core):
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map("no-such-ns", {"metadata": {"name": "x"}})
    assert err.value.status == 404
    assert json.loads(err.value.body)["message"] == 'namespaces "no-such-ns" not found'


def _deployment(name: str) -> dict:
    return {
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "i"}]},
            },
        },
    }


def test_generation_bumps_on_spec_changes_only(client, namespace):
    apps = kubernetes.client.AppsV1Api(client)
    dep = apps.create_namespaced_deployment(namespace, _deployment("d"))
    assert dep.metadata.generation == 1
    dep = apps.patch_namespaced_deployment("d", namespace, {"metadata": {"labels": {"x": "y"}}})
    assert dep.metadata.generation == 1
    dep = apps.patch_namespaced_deployment("d", namespace, {"spec": {"replicas": 3}})
    assert dep.metadata.generation == 2
    dep = apps.patch_namespaced_deployment_status(
        "d", namespace, {"status": {"observedGeneration": 2, "replicas": 3}}
    )
    assert dep.metadata.generation == 2 and dep.status.replicas == 3


def test_a_deployments_generation_also_counts_its_annotations(client, namespace):
    """kube-apiserver bumps a Deployment's generation when its annotations change too (they
    are copied to its ReplicaSets); a merge patch of one annotation took the real server's
    Deployment from generation 2 to 3 (tests/fidelity: deployment-patch-merge, found by the
    recorded request shapes). Labels still do not count."""
    apps = kubernetes.client.AppsV1Api(client)
    apps.create_namespaced_deployment(namespace, _deployment("d"))
    merge = {"_content_type": "application/merge-patch+json"}
    patch = {"metadata": {"annotations": {"deployment.kubernetes.io/revision": "1"}}}
    dep = apps.patch_namespaced_deployment("d", namespace, patch, **merge)
    assert dep.metadata.generation == 2
    dep = apps.patch_namespaced_deployment("d", namespace, patch, **merge)
    assert dep.metadata.generation == 2  # no change, no bump
    dep = apps.patch_namespaced_deployment("d", namespace, {"metadata": {"labels": {"x": "y"}}})
    assert dep.metadata.generation == 2


def test_status_subresource_separation(core, namespace):
    pod = core.create_namespaced_pod(namespace, _pod("p"))
    assert pod.status.phase == "Pending"
    # The main resource ignores status changes...
    pod.status.phase = "Running"
    pod.metadata.labels = {"changed": "yes"}
    pod = core.replace_namespaced_pod("p", namespace, pod)
    assert pod.status.phase == "Pending" and pod.metadata.labels == {"changed": "yes"}
    # ...and /status ignores everything else.
    pod.status.phase = "Running"
    pod.metadata.labels = {"changed": "again"}
    pod = core.replace_namespaced_pod_status("p", namespace, pod)
    assert pod.status.phase == "Running" and pod.metadata.labels == {"changed": "yes"}


def test_no_op_update_keeps_resource_version(core, namespace):
    cm = core.create_namespaced_config_map(
        namespace, {"metadata": {"name": "n"}, "data": {"a": "1"}}
    )
    again = core.replace_namespaced_config_map("n", namespace, cm)
    assert again.metadata.resource_version == cm.metadata.resource_version


def test_namespaced_and_cluster_lists(core, namespace):
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "one"}})
    all_cms = core.list_config_map_for_all_namespaces()
    assert any(
        i.metadata.name == "one" and i.metadata.namespace == namespace for i in all_cms.items
    )
    names = [n.metadata.name for n in core.list_namespace().items]
    assert {"default", "kube-system", namespace} <= set(names)


def test_every_builtin_kind_round_trips(client, namespace):
    core = kubernetes.client.CoreV1Api(client)
    disc = kubernetes.client.DiscoveryV1Api(client)
    net = kubernetes.client.NetworkingV1Api(client)
    svc = core.create_namespaced_service(
        namespace,
        {"metadata": {"name": "svc"}, "spec": {"selector": {"app": "a"}, "ports": [{"port": 80}]}},
    )
    assert svc.spec.cluster_ip and svc.spec.ports[0].protocol == "TCP"
    assert svc.spec.ports[0].target_port == 80
    eps = disc.create_namespaced_endpoint_slice(
        namespace,
        {
            "metadata": {"name": "svc-1", "labels": {"kubernetes.io/service-name": "svc"}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["127.0.0.2"]}],
            "ports": [{"port": 8080}],
        },
    )
    assert eps.endpoints[0].addresses == ["127.0.0.2"]
    ing = net.create_namespaced_ingress(
        namespace,
        {
            "metadata": {"name": "ing"},
            "spec": {
                "rules": [
                    {
                        "host": "a.example",
                        "http": {
                            "paths": [
                                {
                                    "path": "/",
                                    "pathType": "Prefix",
                                    "backend": {"service": {"name": "svc", "port": {"number": 80}}},
                                }
                            ]
                        },
                    }
                ]
            },
        },
    )
    assert ing.spec.rules[0].host == "a.example"
    ev = core.create_namespaced_event(
        namespace,
        {
            "metadata": {"name": "ev1"},
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": namespace},
            "reason": "Test",
            "message": "hello",
            "type": "Normal",
        },
    )
    assert ev.reason == "Test"
    assert core.list_namespaced_event(namespace, field_selector="reason=Test").items
    node_name = f"node-{namespace}"
    core.create_node({"metadata": {"name": node_name}})
    node = core.patch_node_status(
        node_name, {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    )
    assert node.status.conditions[0].type == "Ready"
    core.delete_node(node_name)


def test_discovery_and_version(client, apiserver: ApiServer):
    version = kubernetes.client.VersionApi(client).get_code()
    assert version.major == "1"
    groups = kubernetes.client.ApisApi(client).get_api_versions()
    names = {g.name for g in groups.groups}
    assert {
        "apps",
        "coordination.k8s.io",
        "discovery.k8s.io",
        "networking.k8s.io",
        "haproxy-haptic.org",
        "apiextensions.k8s.io",
    } <= names
    core_resources = kubernetes.client.CoreV1Api(client).get_api_resources()
    names = {r.name for r in core_resources.resources}
    assert {
        "pods",
        "pods/status",
        "pods/log",
        "services",
        "secrets",
        "configmaps",
        "events",
        "namespaces",
    } <= names
    custom = kubernetes.client.CustomObjectsApi(client).get_api_resources(
        "haproxy-haptic.org", "v1alpha1"
    )
    assert {r.kind for r in custom.resources} >= {
        "HAProxyTemplateConfig",
        "HAProxyCfg",
        "HAProxyMapFile",
        "HAProxyGeneralFile",
        "HAProxyCRTListFile",
    }


def test_kubeconfig_loads_with_the_official_loader(apiserver: ApiServer):
    config = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(
        config_file=str(apiserver.kubeconfig), client_configuration=config
    )
    assert config.host == apiserver.url
    with kubernetes.client.ApiClient(config) as c:
        assert kubernetes.client.CoreV1Api(c).read_namespace("default").metadata.name == "default"


def test_secret_string_data_becomes_base64_data(core, namespace):
    import base64

    s = core.create_namespaced_secret(
        namespace, {"metadata": {"name": "tok"}, "stringData": {"token": "s3cret"}}
    )
    assert s.string_data is None
    assert base64.b64decode(s.data["token"]) == b"s3cret"
    assert s.type == "Opaque"


def test_pod_binding_sets_node_once(core, namespace):
    pod = core.create_namespaced_pod(namespace, _pod("b"))
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "b", "uid": pod.metadata.uid},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "local"},
    }
    core.create_namespaced_pod_binding("b", namespace, binding, _preload_content=False)
    assert core.read_namespaced_pod("b", namespace).spec.node_name == "local"
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod_binding("b", namespace, binding, _preload_content=False)
    assert err.value.status == 409
    # kube-apiserver names the subresource in a binding Conflict (tests/fidelity: pod-bind-again).
    assert json.loads(err.value.body)["details"]["kind"] == "pods/binding"


def test_a_precondition_conflict_names_the_kind(core, client, namespace):
    """As kube-apiserver: a delete whose uid or resourceVersion precondition fails answers a
    Conflict whose details.kind is the Kind ("Secret", "HAProxyMapFile"); other Conflicts
    name the plural (tests/fidelity: secret-delete-stale-rv, mapfile-delete-stale)."""
    core.create_namespaced_secret(namespace, {"metadata": {"name": "s"}})
    stale = {"preconditions": {"uid": "not-its-uid"}}
    with pytest.raises(ApiException) as err:
        core.delete_namespaced_secret("s", namespace, body=stale)
    assert err.value.status == 409
    assert json.loads(err.value.body)["details"]["kind"] == "Secret"
    custom = kubernetes.client.CustomObjectsApi(client)
    body = {
        "apiVersion": "haproxy-haptic.org/v1alpha1",
        "kind": "HAProxyMapFile",
        "metadata": {"name": "m"},
        "spec": {"path": "/m", "content": "", "checksum": "sha256:00"},
    }
    created = custom.create_namespaced_custom_object(
        "haproxy-haptic.org", "v1alpha1", namespace, "haproxymapfiles", body
    )
    with pytest.raises(ApiException) as err:
        custom.delete_namespaced_custom_object(
            "haproxy-haptic.org", "v1alpha1", namespace, "haproxymapfiles", "m",
            body={"preconditions": {"resourceVersion": "1", "uid": created["metadata"]["uid"]}},
        )  # fmt: skip
    assert json.loads(err.value.body)["details"]["kind"] == "HAProxyMapFile"


def test_dry_run_writes_nothing(core, namespace):
    out = core.create_namespaced_config_map(namespace, {"metadata": {"name": "dry"}}, dry_run="All")
    assert out.metadata.name == "dry"
    with pytest.raises(ApiException) as err:
        core.read_namespaced_config_map("dry", namespace)
    assert err.value.status == 404


def test_pod_log_is_served_from_the_state_dir(core, namespace, apiserver: ApiServer):
    core.create_namespaced_pod(namespace, _pod("logger"))
    log_dir = apiserver.state_dir / "pods" / namespace / "logger"
    log_dir.mkdir(parents=True)
    (log_dir / "main.log").write_text("one\ntwo\nthree\n")
    assert core.read_namespaced_pod_log("logger", namespace) == "one\ntwo\nthree\n"
    assert core.read_namespaced_pod_log("logger", namespace, tail_lines=1) == "three\n"
    with pytest.raises(ApiException) as err:
        core.read_namespaced_pod_log("logger", namespace, container="nope")
    assert err.value.status == 400
    # follow streams what is appended until the pod goes away
    resp = core.read_namespaced_pod_log("logger", namespace, follow=True, _preload_content=False)
    first = resp.read(14)
    assert first == b"one\ntwo\nthree\n"
    with (log_dir / "main.log").open("a") as f:
        f.write("four\n")
    assert resp.read(5) == b"four\n"
    core.delete_namespaced_pod("logger", namespace)
    assert resp.read() == b""
    resp.release_conn()


def test_table_output_for_kubectl(core, namespace, apiserver: ApiServer):
    import urllib.request

    core.create_namespaced_pod(namespace, _pod("tbl"))
    req = urllib.request.Request(
        f"{apiserver.url}/api/v1/namespaces/{namespace}/pods",
        headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"},
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        table = json.loads(resp.read())
    assert table["kind"] == "Table"
    assert [c["name"] for c in table["columnDefinitions"]][:3] == ["Name", "Ready", "Status"]
    assert table["rows"][0]["cells"][:3] == ["tbl", "0/1", "Pending"]
    assert table["rows"][0]["object"]["metadata"]["name"] == "tbl"


def test_size_limits_like_the_real_server(client, namespace):
    core = kubernetes.client.CoreV1Api(client)
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map(
            namespace, {"metadata": {"name": "big"}, "data": {"a": "x" * (1024 * 1024 + 1)}}
        )
    assert err.value.status == 422 and "data" in json.loads(err.value.body)["message"]
    co = kubernetes.client.CustomObjectsApi(client)
    body = {
        "apiVersion": "haproxy-haptic.org/v1alpha1",
        "kind": "HAProxyGeneralFile",
        "metadata": {"name": "huge"},
        "spec": {"path": "general/x", "content": "x" * (1600 * 1024), "checksum": "c"},
    }
    args = ("haproxy-haptic.org", "v1alpha1", namespace, "haproxygeneralfiles")
    with pytest.raises(ApiException) as err:
        co.create_namespaced_custom_object(*args, body)
    assert err.value.status == 413
    body["spec"]["content"] = "x" * (3 * 1024 * 1024 + 10)
    with pytest.raises(ApiException) as err:
        co.create_namespaced_custom_object(*args, body)
    assert err.value.status == 413
    assert json.loads(err.value.body)["reason"] == "RequestEntityTooLarge"
    body["spec"]["content"] = "x" * (1400 * 1024)
    assert co.create_namespaced_custom_object(*args, body)["metadata"]["name"] == "huge"


@pytest.mark.parametrize(
    ("labels", "annotations"),
    [
        ({"haproxy-haptic.org/checksum": "sha256:abc"}, {}),  # ':' is not allowed in values
        ({"app": "x" * 64}, {}),  # values are at most 63 characters
        ({"Bad_Prefix.example/x": "y"}, {}),  # prefixes are DNS subdomains
        ({}, {"-leading-dash": "fine value: anything goes"}),
    ],
)
def test_label_and_annotation_validation(core, namespace, labels, annotations):
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map(
            namespace,
            {"metadata": {"name": "lbl", "labels": labels, "annotations": annotations}},
        )
    assert err.value.status == 422
    body = json.loads(err.value.body)
    assert body["details"]["causes"][0]["field"] in ("metadata.labels", "metadata.annotations")


def test_valid_labels_and_annotations_pass(core, namespace):
    cm = core.create_namespaced_config_map(
        namespace,
        {
            "metadata": {
                "name": "ok",
                "labels": {"haproxy-haptic.org/role": "checkpoint", "empty": ""},
                "annotations": {"haproxy-haptic.org/claim": '{"holder": "a", "epoch": 3}'},
            }
        },
    )
    assert cm.metadata.labels["haproxy-haptic.org/role"] == "checkpoint"


def test_put_without_resource_version_is_invalid_for_leases_only(client, namespace):
    """As kube-apiserver: Leases (and custom resources) refuse an unconditional update;
    Secrets accept one (tests/fidelity found the difference)."""
    coord = kubernetes.client.CoordinationV1Api(client)
    coord.create_namespaced_lease(namespace, {"metadata": {"name": "u"}, "spec": {}})
    with pytest.raises(ApiException) as err:
        coord.replace_namespaced_lease(
            "u", namespace, {"metadata": {"name": "u"}, "spec": {"holderIdentity": "x"}}
        )
    assert err.value.status == 422
    body = json.loads(err.value.body)
    assert body["reason"] == "Invalid"
    assert [c["field"] for c in body["details"]["causes"]] == ["metadata.resourceVersion"]
    core = kubernetes.client.CoreV1Api(client)
    core.create_namespaced_secret(namespace, {"metadata": {"name": "u"}})
    core.replace_namespaced_secret("u", namespace, {"metadata": {"name": "u"}, "data": {}})


def test_status_details_omit_an_empty_group(core, namespace):
    """The real server leaves out details.group for the core group (omitempty)."""
    with pytest.raises(ApiException) as err:
        core.read_namespaced_secret("absent", namespace)
    assert json.loads(err.value.body)["details"] == {"name": "absent", "kind": "secrets"}


def test_secret_type_is_immutable(core, namespace):
    """As kube-apiserver: 422 on a change of a Secret's type (found by tests/fidelity)."""
    core.create_namespaced_secret(
        namespace,
        {
            "metadata": {"name": "t"},
            "type": "kubernetes.io/tls",
            "data": {"tls.crt": "", "tls.key": ""},
        },
    )
    with pytest.raises(ApiException) as err:
        core.replace_namespaced_secret(
            "t", namespace, {"metadata": {"name": "t"}, "type": "Opaque"}
        )
    assert err.value.status == 422
    assert [c["field"] for c in json.loads(err.value.body)["details"]["causes"]] == ["type"]
    assert core.read_namespaced_secret("t", namespace).type == "kubernetes.io/tls"


def test_pod_node_name_changes_only_through_binding(core, namespace):
    """As kube-apiserver: an update of a pod may not set spec.nodeName (pods/binding does);
    found by tests/fidelity."""
    core.create_namespaced_pod(namespace, _pod("nn"))
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_pod("nn", namespace, {"spec": {"nodeName": "other"}})
    assert err.value.status == 422
    assert json.loads(err.value.body)["details"]["causes"][0]["reason"] == "FieldValueForbidden"
    binding = {"metadata": {"name": "nn"}, "target": {"kind": "Node", "name": "n1"}}
    core.create_namespaced_pod_binding("nn", namespace, binding, _preload_content=False)
    assert core.read_namespaced_pod("nn", namespace).spec.node_name == "n1"


def test_custom_resource_delete_answers_a_status(client, namespace):
    """As kube-apiserver: deleting a custom resource (no finalizers) answers Success."""
    custom = kubernetes.client.CustomObjectsApi(client)
    group, version, plural = "haproxy-haptic.org", "v1alpha1", "haproxycfgs"
    body = {
        "apiVersion": f"{group}/{version}",
        "kind": "HAProxyCfg",
        "metadata": {"name": "d"},
        "spec": {"path": "/x", "content": "", "checksum": "sha256:00"},
    }
    custom.create_namespaced_custom_object(group, version, namespace, plural, body)
    answer = custom.delete_namespaced_custom_object(group, version, namespace, plural, "d")
    assert answer["kind"] == "Status" and answer["status"] == "Success"


def test_apply_without_field_manager_is_invalid(client, namespace):
    """As kube-apiserver: 422 Invalid on PatchOptions.fieldManager, not 400."""
    core = kubernetes.client.CoreV1Api(client)
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "fm"}})
    response = client.call_api(
        *client.param_serialize(
            "PATCH",
            f"/api/v1/namespaces/{namespace}/configmaps/fm",
            header_params={"Content-Type": "application/apply-patch+yaml"},
            body='{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "fm"}}',
        )
    )
    body = json.loads(response.read())
    assert response.status == 422, body
    assert body["details"]["causes"][0]["field"] == "fieldManager"
    assert "name" not in body["details"]  # omitted when empty, as by the real server


def _status_causes(client, path: str, body: dict) -> list[tuple[str, str]]:
    """POST body (past the client's own model checks); the 422's causes."""
    response = client.call_api(
        *client.param_serialize(
            "POST", path, header_params={"Content-Type": "application/json"}, body=body
        )
    )
    answer = json.loads(response.read())
    assert response.status == 422, answer
    return [(c["field"], c["reason"]) for c in answer["details"]["causes"]]


def test_builtin_validation_the_real_server_applies(client, namespace):
    """Found by tests/fidelity: a Deployment selector that misses its template labels, an
    Ingress path without pathType, an Event whose involvedObject is in another namespace."""
    container = _pod("x")["spec"]["containers"][0]
    template = {"metadata": {"labels": {"app": "b"}}, "spec": {"containers": [container]}}
    selector = {"matchLabels": {"app": "a"}}
    deployment = {"metadata": {"name": "d"}, "spec": {"selector": selector, "template": template}}
    path = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    assert _status_causes(client, path, deployment) == [
        ("spec.template.metadata.labels", "FieldValueInvalid")
    ]
    backend = {"service": {"name": "s", "port": {"number": 80}}}
    http = {"paths": [{"path": "/", "backend": backend}]}
    ingress = {"metadata": {"name": "i"}, "spec": {"rules": [{"http": http}]}}
    path = f"/apis/networking.k8s.io/v1/namespaces/{namespace}/ingresses"
    assert _status_causes(client, path, ingress) == [
        ("spec.rules[0].http.paths[0].pathType", "FieldValueRequired")
    ]
    involved = {"kind": "Pod", "name": "p", "namespace": "elsewhere"}
    event = {"metadata": {"name": "e"}, "involvedObject": involved}
    path = f"/api/v1/namespaces/{namespace}/events"
    assert _status_causes(client, path, event) == [
        ("involvedObject.namespace", "FieldValueInvalid")
    ]

"""OpenAPI documents, field validation, the scale view, ReplicaSet revision numbering and
Table columns: the pure parts behind tests/localcluster/test_kubectl.py."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from localcluster import openapi, scale, tables
from localcluster.node import revisions
from localcluster.node.rollout import TEMPLATE_HASH_LABEL
from localcluster.resources import Registry, resource_types_from_crd

CRD = {
    "spec": {
        "group": "example.org",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "kind": "Widget", "singular": "widget"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "subresources": {
                    "status": {},
                    "scale": {
                        "specReplicasPath": ".spec.size",
                        "statusReplicasPath": ".status.size",
                        "labelSelectorPath": ".status.selector",
                    },
                },
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "properties": {
                                    "size": {"type": "integer"},
                                    "extra": {
                                        "type": "object",
                                        "x-kubernetes-preserve-unknown-fields": True,
                                    },
                                    "labels": {
                                        "type": "object",
                                        "additionalProperties": {"type": "string"},
                                    },
                                },
                            },
                            "status": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                            },
                        },
                    }
                },
            }
        ],
    }
}


def test_builtin_schemas_come_from_the_client_models_with_the_servers_list_keys() -> None:
    registry = Registry()
    root, list_name, defs = openapi.kind_schemas(registry.get("apps", "v1", "deployments"))
    assert root == "io.k8s.api.apps.v1.Deployment"
    assert list_name == "io.k8s.api.apps.v1.DeploymentList"
    assert defs[root]["x-kubernetes-group-version-kind"] == [
        {"group": "apps", "kind": "Deployment", "version": "v1"}
    ]
    spec = defs["io.k8s.api.apps.v1.DeploymentSpec"]
    assert spec["properties"]["replicas"]["type"] == "integer"
    assert "Number of desired pods" in spec["properties"]["replicas"]["description"]
    assert "template" in spec["required"]
    # Shared types are named after the package that defines them (core's PodSpec).
    containers = defs["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"]
    assert containers["x-kubernetes-patch-merge-key"] == "name"
    assert containers["x-kubernetes-list-map-keys"] == ["name"]
    meta = defs[f"{openapi.META}.ObjectMeta"]["properties"]
    assert meta["finalizers"]["x-kubernetes-list-type"] == "set"


def test_group_version_document_advertises_field_validation_on_patch() -> None:
    registry = Registry()
    doc = openapi.gv_document(registry, "apps", "v1")
    item = doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]
    patch = item["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {
        "group": "apps",
        "kind": "Deployment",
        "version": "v1",
    }
    assert "fieldValidation" in [p["name"] for p in patch["parameters"]]
    assert "/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale" in doc["paths"]
    schemas = doc["components"]["schemas"]
    assert "io.k8s.api.autoscaling.v1.Scale" in schemas
    assert "io.k8s.api.core.v1.Pod" not in schemas  # only what apps/v1 refers to


def test_crd_documents_follow_the_crd_and_the_index_hash_changes_with_it() -> None:
    registry = Registry()
    before = openapi.v3_index(registry)["paths"]
    assert "apis/example.org/v1" not in before
    for rt in resource_types_from_crd(CRD):
        registry.add(rt)
    after = openapi.v3_index(registry)["paths"]
    assert after["api/v1"] == before["api/v1"]
    doc, _ = openapi.document(registry, "example.org", "v1")
    widget = doc["components"]["schemas"]["org.example.v1.Widget"]
    assert widget["properties"]["spec"]["properties"]["size"] == {"type": "integer"}
    assert "/apis/example.org/v1/namespaces/{namespace}/widgets/{name}/scale" in doc["paths"]
    v2 = openapi.v2_document(registry)
    # v2 readers follow a $ref beside a description, not a one-item allOf.
    assert v2["definitions"]["org.example.v1.Widget"]["properties"]["metadata"] == {
        "$ref": f"#/definitions/{openapi.META}.ObjectMeta",
        "description": "Standard object's metadata.",
    }
    # A field named like a keyword ("not" of JSONSchemaProps) survives the v2 conversion.
    props = v2["definitions"][
        "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps"
    ]["properties"]
    assert "not" in props and "nullable" in props


def test_unknown_fields() -> None:
    registry = Registry()
    deployments = registry.get("apps", "v1", "deployments")
    body: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "labels": {"any": "x"}, "nmae": "typo"},
        "spec": {
            "replicaz": 1,
            "strategy": {"rollingUpdate": {"maxSurge": "25%"}},
            "template": {"spec": {"containers": [{"name": "a", "imagee": "x"}]}},
            "$setElementOrder/containers": [{"name": "a"}],
        },
    }
    assert openapi.unknown_fields(deployments, body) == [
        "metadata.nmae",
        "spec.replicaz",
        "spec.template.spec.containers[0].imagee",
    ]
    [widgets] = resource_types_from_crd(CRD)
    cr = {
        "metadata": {"name": "w"},
        "spec": {"size": 1, "extra": {"free": {"form": 1}}, "labels": {"k": "v"}, "sise": 2},
        "status": {"anything": True},
    }
    assert openapi.unknown_fields(widgets, cr) == ["spec.sise"]


def test_scale_view_and_patch() -> None:
    registry = Registry()
    deployments = registry.get("apps", "v1", "deployments")
    dep = {
        "metadata": {"name": "d", "namespace": "n", "resourceVersion": "7"},
        "spec": {
            "replicas": 2,
            "selector": {
                "matchLabels": {"app": "d"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["b", "a"]}],
            },
        },
        "status": {"replicas": 1},
    }
    view = scale.scale_of(deployments, dep)
    assert view["spec"] == {"replicas": 2}
    assert view["status"] == {"replicas": 1, "selector": "app=d,tier in (a,b)"}
    assert scale.replicas_patch(deployments, {"spec": {"replicas": 5}}) == {"spec": {"replicas": 5}}
    [widgets] = resource_types_from_crd(CRD)
    cr = {"metadata": {"name": "w"}, "spec": {"size": 3}, "status": {"selector": "a=b"}}
    assert scale.scale_of(widgets, cr)["status"] == {"replicas": 0, "selector": "a=b"}
    patch = scale.replicas_patch(
        widgets, {"metadata": {"resourceVersion": "9"}, "spec": {"replicas": 4}}
    )
    assert patch == {"spec": {"size": 4}, "metadata": {"resourceVersion": "9"}}


def _rs(template_hash: str, revision: int, history: str = "") -> dict[str, Any]:
    annotations = {revisions.REVISION: str(revision)}
    if history:
        annotations[revisions.REVISION_HISTORY] = history
    return {
        "metadata": {
            "name": f"d-{template_hash}",
            "labels": {TEMPLATE_HASH_LABEL: template_hash},
            "annotations": annotations,
        }
    }


@given(st.lists(st.sampled_from("abcd"), min_size=1, max_size=12))
def test_revisions_number_templates_like_the_deployment_controller(rollouts: list[str]) -> None:
    """Any sequence of templates (rollouts and undos): the current template's ReplicaSet
    holds the highest revision, revisions never repeat, and a template that comes back takes
    the next number and remembers its earlier ones."""
    sets: dict[str, dict[str, Any]] = {}
    seen: list[int] = []
    previous = None
    for template in rollouts:
        revision, history = revisions.current_revision(list(sets.values()), sets.get(template))
        old = revisions.revision_of(sets.get(template))
        sets[template] = _rs(template, revision, history)
        if template == previous:
            assert revision == old  # a resync, not a rollout
        else:
            assert revision == max(seen, default=0) + 1
            if old:
                assert history.split(",")[-1] == str(old)
            seen.append(revision)
        assert revision == max(revisions.revision_of(rs) for rs in sets.values())
        current = [revisions.revision_of(rs) for rs in sets.values()]
        assert len(current) == len(set(current))
        previous = template


def test_prune_keeps_revision_history_limit_and_never_a_set_with_pods() -> None:
    sets = [_rs("a", 1), _rs("b", 2), _rs("c", 3), _rs("d", 4)]
    counts = {"b": revisions.Counts(replicas=1)}
    # b still has a pod: the next oldest goes instead.
    assert revisions.to_prune(sets, "d", counts, limit=1) == ["d-a", "d-c"]
    assert revisions.to_prune(sets, "d", {}, limit=1) == ["d-a", "d-b"]
    assert revisions.to_prune(sets, "d", {}, limit=10) == []


def test_event_and_ingress_columns() -> None:
    registry = Registry()
    event = {
        "metadata": {"name": "e"},
        "involvedObject": {"kind": "Pod", "name": "p"},
        "type": "Warning",
        "reason": "BackOff",
        "message": "restarting",
        "lastTimestamp": "2026-01-01T00:00:00Z",
    }
    table = tables.to_table(registry.get("", "v1", "events"), [event], {})
    names = [(c["name"], c["priority"]) for c in table["columnDefinitions"]]
    assert names[:5] == [
        ("Last Seen", 0),
        ("Type", 0),
        ("Reason", 0),
        ("Object", 0),
        ("Message", 0),
    ]
    assert ("Name", 1) in names
    assert table["rows"][0]["cells"][1:5] == ["Warning", "BackOff", "pod/p", "restarting"]
    ingress = {
        "metadata": {"name": "i"},
        "spec": {"ingressClassName": "haproxy", "rules": [{"host": "a"}, {}], "tls": [{}]},
        "status": {"loadBalancer": {"ingress": [{"ip": "10.0.0.1"}]}},
    }
    row = tables.to_table(registry.get("networking.k8s.io", "v1", "ingresses"), [ingress], {})
    # As kubectl's printer: a rule without a host adds nothing.
    assert row["rows"][0]["cells"][:5] == ["i", "haproxy", "a", "10.0.0.1", "80, 443"]


def test_protobuf_encoding_of_a_schema() -> None:
    from localcluster import protov2

    # Schema.type (22) is a TypeItem whose repeated string value (1) holds "string".
    assert protov2.encode_schema({"type": "string"}) == b"\xb2\x01\x08\x0a\x06string"
    # $ref (1), then a vendor extension (31) as NamedAny{name, Any{yaml}}.
    encoded = protov2.encode_schema({"$ref": "#/d/X", "x-a": 1})
    assert encoded == b"\x0a\x05#/d/X" + b"\xfa\x01\x0a\x0a\x03x-a\x12\x03\x12\x011"


def test_ingress_class_columns_are_ready_for_the_kind() -> None:
    from localcluster.resources import ResourceType

    rt = ResourceType("networking.k8s.io", "v1", "ingressclasses", "IngressClass", namespaced=False)
    ic = {
        "metadata": {"name": "haproxy"},
        "spec": {
            "controller": "haproxy-haptic.org/controller",
            "parameters": {"apiGroup": "haproxy-haptic.org", "kind": "Params", "name": "p"},
        },
    }
    table = tables.to_table(rt, [ic], {})
    assert [c["name"] for c in table["columnDefinitions"]] == [
        "Name", "Controller", "Parameters", "Age",
    ]  # fmt: skip
    assert table["rows"][0]["cells"][:3] == [
        "haproxy", "haproxy-haptic.org/controller", "Params.haproxy-haptic.org/p",
    ]  # fmt: skip
    _, _, defs = openapi.kind_schemas(rt)  # the client's V1IngressClass
    assert "io.k8s.api.networking.v1.IngressClassSpec" in defs


def test_the_projects_manifests_declare_no_unknown_field() -> None:
    """The generated schemas are not stricter than the API: every manifest in deploy/ of a
    kind served here passes `fieldValidation=Strict`."""
    from pathlib import Path

    import yaml

    registry = Registry()
    deploy = Path(__file__).resolve().parents[2] / "deploy"
    docs = [
        doc
        for path in sorted(deploy.rglob("*.yaml"))
        if "monitoring" not in path.parts  # Prometheus rules, not Kubernetes objects
        for doc in yaml.safe_load_all(path.read_text())
        if isinstance(doc, dict)
    ]
    for crd in (d for d in docs if d.get("kind") == "CustomResourceDefinition"):
        for rt in resource_types_from_crd(crd):
            registry.add(rt)
    checked = set()
    for doc in docs:
        group, _, version = doc["apiVersion"].rpartition("/")
        rt = next(
            (
                r
                for r in registry.all()
                if (r.group, r.version, r.kind) == (group, version, doc["kind"])
            ),
            None,
        )
        if rt is not None:
            assert openapi.unknown_fields(rt, doc) == [], doc["metadata"]["name"]
            checked.add(rt.kind)
    assert {"Deployment", "Service", "CustomResourceDefinition", "HAProxyTemplateConfig"} <= checked

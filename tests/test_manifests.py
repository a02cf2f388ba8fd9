"""Every manifest under deploy/ parses, names only kinds that exist, and images copy real files."""

from __future__ import annotations

import re
from pathlib import Path

import jsonschema
import pytest
import yaml

from tests.conftest import REPO_ROOT

DEPLOY = REPO_ROOT / "deploy"

BUILTIN_KINDS = {
    ("v1", "Namespace"),
    ("v1", "ServiceAccount"),
    ("v1", "Service"),
    ("v1", "Secret"),
    ("v1", "ConfigMap"),
    ("apps/v1", "Deployment"),
    ("rbac.authorization.k8s.io/v1", "Role"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
    ("networking.k8s.io/v1", "IngressClass"),
}

# Resources an RBAC rule may name, by API group.
KNOWN_RESOURCES = {
    "": {
        "pods",
        "pods/status",
        "pods/log",
        "services",
        "secrets",
        "configmaps",
        "events",
        "namespaces",
    },
    "coordination.k8s.io": {"leases"},
    "networking.k8s.io": {"ingresses", "ingresses/status", "ingressclasses"},
    "discovery.k8s.io": {"endpointslices"},
    "apps": {"deployments", "deployments/status"},
}


def _documents(path: Path) -> list[dict]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def _all_manifests() -> list[tuple[Path, dict]]:
    # deploy/monitoring holds Prometheus rules and a Grafana dashboard, not Kubernetes objects.
    paths = [p for p in sorted(DEPLOY.rglob("*.yaml")) if "monitoring" not in p.parts]
    return [(p, d) for p in paths for d in _documents(p)]


def _crds() -> list[dict]:
    return [d for p in sorted((DEPLOY / "crds").glob("*.yaml")) for d in _documents(p)]


def _crd_kinds() -> set[tuple[str, str]]:
    kinds = set()
    for crd in _crds():
        for version in crd["spec"]["versions"]:
            kinds.add((f"{crd['spec']['group']}/{version['name']}", crd["spec"]["names"]["kind"]))
    return kinds


def test_every_manifest_parses_and_names_a_known_kind() -> None:
    manifests = _all_manifests()
    assert len(manifests) >= 15
    known = BUILTIN_KINDS | _crd_kinds()
    for path, doc in manifests:
        assert (doc.get("apiVersion"), doc.get("kind")) in known, f"{path}: unknown kind"
        assert doc.get("metadata", {}).get("name"), f"{path}: object without a name"


def test_crds_are_structural_with_status_subresource_short_names_and_columns() -> None:
    crds = _crds()
    assert {c["spec"]["names"]["kind"] for c in crds} == {
        "HAProxyTemplateConfig",
        "HAProxyCfg",
        "HAProxyMapFile",
        "HAProxyGeneralFile",
        "HAProxyCRTListFile",
    }
    for crd in crds:
        assert crd["spec"]["group"] == "haproxy-haptic.org"
        assert crd["spec"]["names"]["shortNames"]
        for version in crd["spec"]["versions"]:
            assert version["name"] == "v1alpha1"
            assert version["subresources"] == {"status": {}}
            assert version["additionalPrinterColumns"]
            schema = version["schema"]["openAPIV3Schema"]
            assert schema["type"] == "object"
            assert {"spec", "status"} <= set(schema["properties"])
            jsonschema.Draft7Validator.check_schema(_as_json_schema(schema))


def _as_json_schema(schema: object) -> object:
    """openAPIV3Schema without the Kubernetes extensions, as plain JSON Schema."""
    if isinstance(schema, dict):
        return {
            k: _as_json_schema(v)
            for k, v in schema.items()
            if not k.startswith("x-kubernetes-") and k != "default"
        }
    if isinstance(schema, list):
        return [_as_json_schema(v) for v in schema]
    return schema


# The fields of apiextensions.k8s.io/v1 JSONSchemaProps; the real API server refuses others.
SCHEMA_FIELDS = {
    "$schema", "$ref", "id", "description", "type", "format", "title", "default", "maximum",
    "exclusiveMaximum", "minimum", "exclusiveMinimum", "maxLength", "minLength", "pattern",
    "maxItems", "minItems", "uniqueItems", "multipleOf", "enum", "maxProperties",
    "minProperties", "required", "items", "allOf", "oneOf", "anyOf", "not", "properties",
    "additionalProperties", "patternProperties", "dependencies", "additionalItems",
    "definitions", "externalDocs", "example", "nullable", "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-embedded-resource", "x-kubernetes-int-or-string", "x-kubernetes-list-map-keys",
    "x-kubernetes-list-type", "x-kubernetes-map-type", "x-kubernetes-validations",
}  # fmt: skip


def _schema_nodes(node: dict, path: str):
    yield path, node
    for name, child in (node.get("properties") or {}).items():
        yield from _schema_nodes(child or {}, f"{path}.properties.{name}")
    for key in ("items", "additionalProperties", "not"):
        if isinstance(node.get(key), dict):
            yield from _schema_nodes(node[key], f"{path}.{key}")
    for key in ("allOf", "oneOf", "anyOf"):
        for i, child in enumerate(node.get(key) or []):
            yield from _schema_nodes(child, f"{path}.{key}[{i}]")


def test_crd_schemas_use_only_json_schema_props_fields() -> None:
    """A YAML slip such as `{type: string, description: A, or B.}` (a flow mapping: the
    comma starts a new key) puts an unknown field in the schema, which the real API server
    refuses; the local one used to ignore it."""
    for crd in _crds():
        for version in crd["spec"]["versions"]:
            schema = version["schema"]["openAPIV3Schema"]
            for path, node in _schema_nodes(schema, crd["metadata"]["name"]):
                unknown = set(node) - SCHEMA_FIELDS
                assert not unknown, f"{path}: not JSONSchemaProps fields: {sorted(unknown)}"
                if node.get("properties") is not None:
                    for name, child in node["properties"].items():
                        assert isinstance(child, dict), f"{path}.properties.{name}: {child!r}"


def test_sample_template_config_validates_against_its_crd() -> None:
    crd = next(c for c in _crds() if c["spec"]["names"]["kind"] == "HAProxyTemplateConfig")
    schema = _as_json_schema(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
    (sample,) = _documents(DEPLOY / "template-config.yaml")
    jsonschema.validate(sample, schema)
    broken = dict(sample, spec={"agent": {"port": "not-a-number"}})
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)


def test_rbac_names_only_known_resources_and_the_seeds_lease_verbs() -> None:
    crd_resources = {c["spec"]["names"]["plural"] for c in _crds()}
    known = dict(KNOWN_RESOURCES)
    known["haproxy-haptic.org"] = crd_resources | {f"{r}/status" for r in crd_resources}
    roles = [(p, d) for p, d in _all_manifests() if d["kind"] in {"Role", "ClusterRole"}]
    assert roles
    for path, role in roles:
        for rule in role["rules"]:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    assert resource in known[group], f"{path}: unknown {group}/{resource}"
    controller = next(d for _, d in roles if d["metadata"]["name"] == "haptic-controller")
    lease_rule = next(r for r in controller["rules"] if "leases" in r["resources"])
    # The seed's get, create and update, plus list and watch for the elector's Lease watch
    # (a follower takes a released Lease at once: controller/election/lease_watch.py).
    assert sorted(lease_rule["verbs"]) == ["create", "get", "list", "update", "watch"]
    # pods/status patch is granted only by the readiness-gate manifest (ADR-0034).
    for path, role in roles:
        grants_status = any("pods/status" in r["resources"] for r in role["rules"])
        assert grants_status == (path.name == "rbac-readiness-gate.yaml"), path


def test_bindings_reference_roles_and_service_accounts_that_exist() -> None:
    manifests = [d for _, d in _all_manifests()]
    names = {(d["kind"], d["metadata"]["name"]) for d in manifests}
    for doc in manifests:
        if doc["kind"] in {"RoleBinding", "ClusterRoleBinding"}:
            assert (doc["roleRef"]["kind"], doc["roleRef"]["name"]) in names
            for subject in doc["subjects"]:
                assert ("ServiceAccount", subject["name"]) in names


@pytest.mark.parametrize("containerfile", sorted((DEPLOY / "images").glob("*.Containerfile")))
def test_every_file_an_image_copies_exists(containerfile: Path) -> None:
    text = containerfile.read_text()
    copies = re.findall(r"^COPY\s+(\S+)\s+\S+$", text, flags=re.MULTILINE)
    assert copies, f"{containerfile.name} copies nothing"
    for source in copies:
        assert (REPO_ROOT / source).exists(), f"{containerfile.name}: {source} does not exist"
    # Installs only from requirements.txt.
    installs = re.findall(r"pip install[^\n]*", text)
    assert installs and all("-r requirements.txt" in line for line in installs)


def test_images_exist_for_controller_web_and_haproxy() -> None:
    names = {p.name for p in (DEPLOY / "images").glob("*.Containerfile")}
    assert names == {"controller.Containerfile", "web.Containerfile", "haproxy.Containerfile"}


def test_the_shipped_ingress_class_is_the_one_make_run_installs() -> None:
    from devstack import stack

    (doc,) = _documents(DEPLOY / "ingressclass.yaml")
    assert doc == stack.ingress_class()
    assert doc["spec"]["controller"] == "haproxy-haptic.org/controller"
    assert stack.ingress_class() in stack.base_objects("token")


def test_the_haproxy_pods_mount_no_service_account_token() -> None:
    """The agent never calls the Kubernetes API (the controller drives it over its apply
    API), so the HAProxy pods hold no API credentials at all (issue 16: every component
    runs with what it uses, and no more)."""
    docs = yaml.safe_load_all((REPO_ROOT / "deploy" / "haproxy.yaml").read_text())
    (deployment,) = [d for d in docs if d and d["kind"] == "Deployment"]
    assert deployment["spec"]["template"]["spec"].get("automountServiceAccountToken") is False
    clients = [
        str(path.relative_to(REPO_ROOT))
        for path in (REPO_ROOT / "agents").rglob("*.py")
        if re.search(r"^\s*(import|from) kubernetes\b", path.read_text(), re.M)
    ]
    assert clients == []

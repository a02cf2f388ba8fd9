"""The resource types the server knows: built-in kinds and those declared by CRDs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# How lists merge, by dotted path with "[]" for "every item of a list". Strategic merge patch
# and server-side apply both treat these as maps keyed by the named fields; other lists are
# atomic (replaced whole), as for a real API server's built-in types.
ListKeys = dict[str, tuple[str, ...]]

_POD_SPEC: ListKeys = {
    "containers": ("name",),
    "initContainers": ("name",),
    "containers[].env": ("name",),
    "initContainers[].env": ("name",),
    "containers[].ports": ("containerPort", "protocol"),
    "initContainers[].ports": ("containerPort", "protocol"),
    "containers[].volumeMounts": ("mountPath",),
    "initContainers[].volumeMounts": ("mountPath",),
    "volumes": ("name",),
    "readinessGates": ("conditionType",),
    "tolerations": (),
    "imagePullSecrets": ("name",),
}
_META: ListKeys = {"metadata.ownerReferences": ("uid",)}
# Lists of scalars merged as sets (strategic merge "merge" strategy on primitives).
SET_LISTS = {"metadata.finalizers"}


ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
# Deployments and ReplicaSets scale through spec.replicas; status.selector is the string form.
_REPLICAS_SCALE = (".spec.replicas", ".status.replicas", ".status.selector")


def _prefixed(prefix: str, keys: ListKeys) -> ListKeys:
    return {f"{prefix}.{k}": v for k, v in keys.items() if v}


@dataclass(frozen=True)
class ResourceType:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    singular: str = ""
    short_names: tuple[str, ...] = ()
    status_subresource: bool = False
    # Whether metadata.generation is kept (bumped on changes outside metadata and status).
    generation: bool = False
    # Deployments: a change of annotations bumps it too, as kube-apiserver's strategy does
    # (they are copied to the ReplicaSets; tests/fidelity, deployment-patch-merge).
    generation_counts_annotations: bool = False
    list_keys: ListKeys = field(default_factory=dict)
    set_lists: frozenset[str] = frozenset(SET_LISTS)
    # Strategic merge patch is refused for custom resources, as by the real server.
    strategic_merge: bool = True
    schema: dict[str, Any] | None = None
    custom: bool = False
    # A PUT without metadata.resourceVersion is refused (422), as kube-apiserver refuses it
    # for Leases and custom resources (their strategies disallow unconditional updates).
    unconditional_update: bool = True
    # additionalPrinterColumns of a CRD version, for `kubectl get` tables.
    printer_columns: tuple[dict[str, Any], ...] = ()
    # The scale subresource: (specReplicasPath, statusReplicasPath, labelSelectorPath).
    scale: tuple[str, str, str] | None = None
    # Verbs served; a create-only kind (a review) is answered, never stored.
    verbs: tuple[str, ...] = ALL_VERBS
    # Discovery categories (`kubectl get all` lists the kinds in "all").
    categories: tuple[str, ...] = ()

    @property
    def scale_subresource(self) -> bool:
        return self.scale is not None

    @property
    def stored(self) -> bool:
        return "get" in self.verbs

    @property
    def key(self) -> str:
        return f"{self.group}/{self.plural}"

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    def describe(self) -> str:
        """The name the server uses in messages: plural.group."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


def _conditions() -> ListKeys:
    return {"status.conditions": ("type",)}


def _reviews() -> list[ResourceType]:
    """Create-only kinds that are answered, never stored (see scale.review)."""
    return [
        ResourceType(
            group,
            "v1",
            f"{kind.lower()}s",
            kind,
            namespaced=False,
            singular=kind.lower(),
            verbs=("create",),
        )
        for group, kind in (
            ("authorization.k8s.io", "SelfSubjectAccessReview"),
            ("authorization.k8s.io", "SelfSubjectRulesReview"),
            ("authentication.k8s.io", "SelfSubjectReview"),
        )
    ]


BUILTIN: list[ResourceType] = [
    ResourceType(
        "",
        "v1",
        "namespaces",
        "Namespace",
        namespaced=False,
        singular="namespace",
        short_names=("ns",),
        status_subresource=True,
        list_keys={**_META, **_conditions()},
    ),
    ResourceType(
        "",
        "v1",
        "pods",
        "Pod",
        singular="pod",
        short_names=("po",),
        status_subresource=True,
        generation=True,
        list_keys={
            **_META,
            **_prefixed("spec", _POD_SPEC),
            **_conditions(),
            "status.podIPs": ("ip",),
        },
        categories=("all",),
    ),
    ResourceType(
        "",
        "v1",
        "nodes",
        "Node",
        namespaced=False,
        singular="node",
        short_names=("no",),
        status_subresource=True,
        list_keys={**_META, **_conditions(), "status.addresses": ("type",)},
    ),
    ResourceType(
        "",
        "v1",
        "services",
        "Service",
        singular="service",
        short_names=("svc",),
        status_subresource=True,
        list_keys={**_META, "spec.ports": ("port", "protocol"), **_conditions()},
        categories=("all",),
    ),
    ResourceType("", "v1", "secrets", "Secret", singular="secret", list_keys=dict(_META)),
    ResourceType(
        "",
        "v1",
        "configmaps",
        "ConfigMap",
        singular="configmap",
        short_names=("cm",),
        list_keys=dict(_META),
    ),
    ResourceType(
        "", "v1", "events", "Event", singular="event", short_names=("ev",), list_keys=dict(_META)
    ),
    ResourceType(
        "discovery.k8s.io",
        "v1",
        "endpointslices",
        "EndpointSlice",
        singular="endpointslice",
        list_keys=dict(_META),
    ),
    ResourceType(
        "networking.k8s.io",
        "v1",
        "ingresses",
        "Ingress",
        singular="ingress",
        short_names=("ing",),
        status_subresource=True,
        generation=True,
        list_keys=dict(_META),
    ),
    ResourceType(
        "networking.k8s.io",
        "v1",
        "ingressclasses",
        "IngressClass",
        namespaced=False,
        singular="ingressclass",
        list_keys=dict(_META),
    ),
    ResourceType(
        "coordination.k8s.io",
        "v1",
        "leases",
        "Lease",
        singular="lease",
        list_keys=dict(_META),
        unconditional_update=False,
    ),
    ResourceType(
        "apps",
        "v1",
        "deployments",
        "Deployment",
        singular="deployment",
        short_names=("deploy",),
        status_subresource=True,
        generation=True,
        generation_counts_annotations=True,
        list_keys={**_META, **_prefixed("spec.template.spec", _POD_SPEC), **_conditions()},
        scale=_REPLICAS_SCALE,
        categories=("all",),
    ),
    ResourceType(
        "apps",
        "v1",
        "replicasets",
        "ReplicaSet",
        singular="replicaset",
        short_names=("rs",),
        status_subresource=True,
        generation=True,
        list_keys={**_META, **_prefixed("spec.template.spec", _POD_SPEC), **_conditions()},
        scale=_REPLICAS_SCALE,
        categories=("all",),
    ),
    *_reviews(),
    ResourceType(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        namespaced=False,
        singular="customresourcedefinition",
        short_names=("crd", "crds"),
        status_subresource=True,
        generation=True,
        list_keys=dict(_META),
    ),
]


def list_keys_from_schema(schema: dict[str, Any] | None) -> tuple[ListKeys, frozenset[str]]:
    """The list-map and set paths declared in an openAPIV3Schema (x-kubernetes-list-type)."""
    maps: ListKeys = dict(_META)
    sets: set[str] = set(SET_LISTS)

    def walk(node: dict[str, Any], path: str) -> None:
        if not isinstance(node, dict):
            return
        if node.get("type") == "array":
            list_type = node.get("x-kubernetes-list-type")
            if list_type == "map":
                maps[path] = tuple(node.get("x-kubernetes-list-map-keys") or ())
            elif list_type == "set":
                sets.add(path)
            items = node.get("items")
            if isinstance(items, dict):
                walk(items, path + "[]")
            return
        for name, sub in (node.get("properties") or {}).items():
            walk(sub, f"{path}.{name}" if path else name)
        extra = node.get("additionalProperties")
        if isinstance(extra, dict):
            walk(extra, f"{path}.*" if path else "*")

    if schema:
        walk(schema, "")
    return maps, frozenset(sets)


def resource_types_from_crd(crd: dict[str, Any]) -> list[ResourceType]:
    """One ResourceType per served version of a CustomResourceDefinition."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    out = []
    for version in spec.get("versions") or []:
        if not version.get("served", True):
            continue
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        maps, sets = list_keys_from_schema(schema)
        subresources = version.get("subresources") or {}
        scale = subresources.get("scale")
        out.append(
            ResourceType(
                group=spec.get("group", ""),
                version=version["name"],
                plural=names.get("plural", ""),
                kind=names.get("kind", ""),
                namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                singular=names.get("singular", ""),
                short_names=tuple(names.get("shortNames") or ()),
                categories=tuple(names.get("categories") or ()),
                status_subresource="status" in subresources,
                scale=(
                    scale.get("specReplicasPath", ""),
                    scale.get("statusReplicasPath", ""),
                    scale.get("labelSelectorPath", ""),
                )
                if isinstance(scale, dict)
                else None,
                generation=True,
                list_keys=maps,
                set_lists=sets,
                strategic_merge=False,
                schema=schema,
                printer_columns=tuple(version.get("additionalPrinterColumns") or ()),
                custom=True,
                unconditional_update=False,
            )
        )
    return out


class Registry:
    """Resource types by (group, version, plural) and by key (group/plural)."""

    def __init__(self) -> None:
        self._by_gvr: dict[tuple[str, str, str], ResourceType] = {}
        for rt in BUILTIN:
            self.add(rt)

    def add(self, rt: ResourceType) -> None:
        self._by_gvr[(rt.group, rt.version, rt.plural)] = rt

    def remove_group_plural(self, group: str, plural: str) -> None:
        for key in [k for k in self._by_gvr if k[0] == group and k[2] == plural]:
            del self._by_gvr[key]

    def get(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._by_gvr.get((group, version, plural))

    def by_key(self, key: str) -> ResourceType | None:
        group, _, plural = key.partition("/")
        for (g, _v, p), rt in self._by_gvr.items():
            if g == group and p == plural:
                return rt
        return None

    def all(self) -> list[ResourceType]:
        return list(self._by_gvr.values())

    def groups(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for g, v, _p in self._by_gvr:
            versions = out.setdefault(g, [])
            if v not in versions:
                versions.append(v)
        return out

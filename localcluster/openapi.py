"""OpenAPI documents for every kind the server serves: `/openapi/v3` (an index, then one
document per group-version) and `/openapi/v2` (one document), as kubectl reads them for
`explain`, `apply` and its field-validation check.

Built-in kinds' schemas are generated from the official client's model classes
(`kubernetes.client.models.*`: `openapi_types`, `attribute_map`, field descriptions and
required flags), not written by hand; custom resources' from their CRD's openAPIV3Schema.
The server's own list keys (resources.py) become the `x-kubernetes-patch-*` and
`x-kubernetes-list-*` extensions, so kubectl computes patches the server merges the same way.
Pure functions.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from typing import Any

from kubernetes.client import models

from localcluster.resources import BUILTIN, Registry, ResourceType

Schema = dict[str, Any]
V3_REF = "#/components/schemas/"
V2_REF = "#/definitions/"
META_PKG = "io.k8s.apimachinery.pkg.apis.meta"
META = f"{META_PKG}.v1"
INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
_META_TYPES = {
    "ObjectMeta", "ListMeta", "OwnerReference", "ManagedFieldsEntry", "LabelSelector",
    "LabelSelectorRequirement", "Condition", "Status", "StatusDetails", "StatusCause",
    "DeleteOptions", "Preconditions",
}  # fmt: skip
# The python client's class names: an optional group prefix, the version, the Go type name.
_CLASS_NAME = re.compile(r"^([A-Z][a-z]+)*?(V\d+(?:alpha\d+|beta\d+)?)([A-Z]\w*)$")
_PACKAGES = {
    "": "io.k8s.api.core",
    "apiextensions.k8s.io": "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions",
}
_TOP_LEVEL = ("apiVersion", "kind", "metadata")


def package(group: str) -> str:
    """The Go package a group's types live in, as the real documents name schemas."""
    return _PACKAGES.get(group) or f"io.k8s.api.{group.split('.')[0]}"


def model_class(rt: ResourceType, kind: str | None = None) -> type | None:
    """The client's model class of a built-in kind (`V1Pod`, `CoreV1Event`, ...)."""
    kind = kind or rt.kind
    version = rt.version[0].upper() + rt.version[1:]
    prefix = "Core" if not rt.group else rt.group.split(".")[0].capitalize()
    for name in (f"{version}{kind}", f"{prefix}{version}{kind}"):
        cls = getattr(models, name, None)
        if cls is not None and hasattr(cls, "openapi_types"):
            return cls
    return None


class _Builder:
    """Schemas of model classes, named as the real server names them, into `defs`."""

    def __init__(self, defs: dict[str, Schema]) -> None:
        self.defs = defs
        self.names: dict[type, str] = {}

    def name_of(self, cls: type, pkg: str) -> str:
        if cls in self.names:
            return self.names[cls]
        match = _CLASS_NAME.match(cls.__name__)
        version, go_name = (match.group(2).lower(), match.group(3)) if match else ("", "")
        name = f"{META_PKG if go_name in _META_TYPES else pkg}.{version}.{go_name}"
        if not match or name in self.defs:
            name = f"{pkg}.{cls.__name__}"  # never two classes under one name
        self.names[cls] = name
        self.defs[name] = {}  # reserved before recursion: types refer to themselves
        self.defs[name] = self._object(cls, pkg)
        return name

    def _object(self, cls: type, pkg: str) -> Schema:
        props: dict[str, Schema] = {}
        required = []
        fields = getattr(cls, "model_fields", {})
        for attr, type_name in cls.openapi_types.items():  # type: ignore[attr-defined]
            key = cls.attribute_map[attr]  # type: ignore[attr-defined]
            field = fields.get(attr)
            annotation = str(getattr(field, "annotation", ""))
            prop = self._type(
                type_name, pkg, int_or_string="int" in annotation and "str" in annotation
            )
            # The client drops descriptions of fields that name a type: the type's own
            # description stands in (DeploymentStrategy: "describes how to replace ...").
            description = getattr(field, "description", None) or _class_doc(
                getattr(models, type_name, None)
            )
            if description:
                prop = {"allOf": [prop], "description": description} if "$ref" in prop else prop
                prop["description"] = description
            props[key] = prop
            if field is not None and field.is_required():
                required.append(key)
        schema: Schema = {"type": "object", "properties": props}
        doc = _class_doc(cls)
        if doc:
            schema["description"] = doc
        if required:
            schema["required"] = sorted(required)
        return schema

    def _type(self, type_name: str, pkg: str, int_or_string: bool = False) -> Schema:
        inner = re.match(r"^[Ll]ist\[(.*)\]$", type_name)
        if inner:
            return {"type": "array", "items": self._type(inner.group(1), pkg)}
        inner = re.match(r"^[Dd]ict\(str, (.*)\)$|^Dict\[str, (.*)\]$", type_name)
        if inner:
            value = inner.group(1) or inner.group(2)
            return {"type": "object", "additionalProperties": self._type(value, pkg)}
        scalar = {
            "str": {"type": "string"},
            "int": {"type": "integer", "format": "int64"},
            "float": {"type": "number", "format": "double"},
            "bool": {"type": "boolean"},
            "datetime": {"type": "string", "format": "date-time"},
            "date": {"type": "string", "format": "date"},
            "bytes": {"type": "string", "format": "byte"},
        }.get(type_name)
        if scalar is not None:
            return dict(scalar)
        if type_name == "object":
            if not int_or_string:
                return {}  # RawExtension, FieldsV1, JSON: any value
            self.defs.setdefault(INT_OR_STRING, {"type": "string", "format": "int-or-string"})
            return {"$ref": V3_REF + INT_OR_STRING}
        cls = getattr(models, type_name, None)
        if cls is None or not hasattr(cls, "openapi_types"):
            return {}
        return {"$ref": V3_REF + self.name_of(cls, pkg)}


def _class_doc(cls: type | None) -> str:
    if cls is None or not hasattr(cls, "openapi_types"):
        return ""
    return " ".join((cls.__doc__ or "").split("Attributes:")[0].split())


def _gvk(rt: ResourceType, kind: str | None = None) -> list[dict[str, str]]:
    return [{"group": rt.group, "kind": kind or rt.kind, "version": rt.version}]


def _prop_at(defs: dict[str, Schema], root: str, path: str) -> Schema | None:
    """The property schema a dotted list-key path (`spec.containers[].ports`) names."""
    node: Schema | None = defs.get(root)
    target: Schema | None = None
    for step in path.split("."):
        each = step.endswith("[]")
        step = step.removesuffix("[]")
        node = _resolve(defs, node)
        target = ((node or {}).get("properties") or {}).get(step)
        if target is None:
            return None
        node = target
        if each:
            node = _resolve(defs, node).get("items")
    return target


def _resolve(defs: dict[str, Schema], node: Schema | None) -> Schema:
    while node and ("$ref" in node or len(node.get("allOf") or ()) == 1):
        ref = node.get("$ref") or node["allOf"][0].get("$ref", "")
        node = defs.get(ref.removeprefix(V3_REF)) if ref else node["allOf"][0]
    return node or {}


def _mark_lists(defs: dict[str, Schema], root: str, rt: ResourceType) -> None:
    for path, keys in rt.list_keys.items():
        prop = _prop_at(defs, root, path)
        if prop is not None and prop.get("type") == "array" and keys:
            prop.update(
                {
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": list(keys),
                    "x-kubernetes-patch-merge-key": keys[0],
                    "x-kubernetes-patch-strategy": "merge",
                }
            )
    for path in rt.set_lists:
        prop = _prop_at(defs, root, path)
        if prop is not None and prop.get("type") == "array":
            prop.update({"x-kubernetes-list-type": "set", "x-kubernetes-patch-strategy": "merge"})


_BUILTIN_DEFS: dict[str, Schema] = {}
_BUILTIN_ROOTS: dict[tuple[str, str, str], tuple[str, str]] = {}
_BUILDER = _Builder(_BUILTIN_DEFS)


def _builtin(rt: ResourceType) -> tuple[str, str, dict[str, Schema]]:
    """(kind schema name, list schema name, the schemas of every built-in kind).

    Built once for all of BUILTIN, core kinds first, so a shared type is named after the
    package that defines it (PodSpec is core's, reached from Pod before Deployment); callers
    must not change what it returns."""
    if not _BUILTIN_ROOTS:
        # Core types that no served core kind reaches but apps' kinds embed.
        _BUILDER.name_of(models.V1PodTemplateSpec, package(""))
        for kind in BUILTIN:
            cls = model_class(kind)
            if cls is not None:
                _BUILTIN_ROOTS[(kind.group, kind.version, kind.kind)] = _add_kind(
                    _BUILDER, kind, cls
                )
    names = _BUILTIN_ROOTS.get((rt.group, rt.version, rt.kind))
    if names is None:
        cls = model_class(rt)
        if cls is None:
            raise LookupError(f"no client model for {rt.kind}")
        names = _BUILTIN_ROOTS[(rt.group, rt.version, rt.kind)] = _add_kind(_BUILDER, rt, cls)
    return names[0], names[1], _BUILTIN_DEFS


def _add_kind(builder: _Builder, rt: ResourceType, cls: type) -> tuple[str, str]:
    defs = builder.defs
    pkg = package(rt.group)
    root = builder.name_of(cls, pkg)
    defs[root]["x-kubernetes-group-version-kind"] = _gvk(rt)
    list_cls = model_class(rt, rt.list_kind)
    list_name = builder.name_of(list_cls, pkg) if list_cls is not None else ""
    if list_name:
        defs[list_name]["x-kubernetes-group-version-kind"] = _gvk(rt, rt.list_kind)
    _mark_lists(defs, root, rt)
    return root, list_name


def _meta_defs() -> dict[str, Schema]:
    defs: dict[str, Schema] = {}
    builder = _Builder(defs)
    for name in ("V1ObjectMeta", "V1ListMeta", "V1Status", "V1DeleteOptions"):
        builder.name_of(getattr(models, name), META_PKG)
    defs[f"{META}.Patch"] = {
        "type": "object",
        "description": "Patch is provided to give a concrete name and type to the Kubernetes "
        "PATCH request body.",
    }
    return defs


_META_DEFS = _meta_defs()


def crd_schema_name(rt: ResourceType, kind: str | None = None) -> str:
    reverse = ".".join(reversed(rt.group.split(".")))
    return f"{reverse}.{rt.version}.{kind or rt.kind}"


def _custom(rt: ResourceType) -> tuple[str, str, dict[str, Schema]]:
    root = crd_schema_name(rt)
    schema = copy.deepcopy(rt.schema) if rt.schema else {"type": "object"}
    if not rt.schema:
        schema["x-kubernetes-preserve-unknown-fields"] = True
    props = schema.setdefault("properties", {})
    props["apiVersion"] = {"type": "string", "description": "APIVersion of this object."}
    props["kind"] = {"type": "string", "description": "Kind of this object."}
    props["metadata"] = {
        "allOf": [{"$ref": f"{V3_REF}{META}.ObjectMeta"}],
        "description": "Standard object's metadata.",
    }
    schema["x-kubernetes-group-version-kind"] = _gvk(rt)
    list_name = crd_schema_name(rt, rt.list_kind)
    listing = {
        "type": "object",
        "required": ["items"],
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"allOf": [{"$ref": f"{V3_REF}{META}.ListMeta"}]},
            "items": {"type": "array", "items": {"$ref": V3_REF + root}},
        },
        "x-kubernetes-group-version-kind": _gvk(rt, rt.list_kind),
    }
    return root, list_name, {root: schema, list_name: listing}


def kind_schemas(rt: ResourceType) -> tuple[str, str, dict[str, Schema]]:
    """(schema name of the kind, of its list, the schemas both need, meta types included)."""
    root, list_name, defs = _custom(rt) if rt.custom else _builtin(rt)
    return root, list_name, {**_META_DEFS, **defs}


# --- paths ------------------------------------------------------------------------------------

_QUERY = {
    "dryRun": "When present, modifications are not persisted (All).",
    "fieldManager": "The name of the actor making these changes.",
    "fieldValidation": "How the server treats unknown fields: Ignore, Warn or Strict.",
    "force": "Force is going to force Apply requests (re-acquires conflicting fields).",
    "pretty": "If 'true', the output is pretty printed.",
}
_WRITE_PARAMS = ("dryRun", "fieldManager", "fieldValidation", "pretty")
_READ_PARAMS = (
    "labelSelector", "fieldSelector", "limit", "continue", "resourceVersion",
    "resourceVersionMatch", "watch", "allowWatchBookmarks", "timeoutSeconds",
)  # fmt: skip
PATCH_MEDIA = (
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
)


def _params(names: tuple[str, ...]) -> list[Schema]:
    return [
        {
            "name": n,
            "in": "query",
            "description": _QUERY.get(n, n),
            "schema": {"type": "boolean" if n in ("force", "watch") else "string"},
        }
        for n in names
    ]


def _op(rt: ResourceType, action: str, op_id: str, out: str, params: tuple[str, ...] = (),
        body: tuple[str, str] | None = None, kind: str | None = None) -> Schema:  # fmt: skip
    op: Schema = {
        "operationId": op_id,
        "parameters": _params(params),
        "responses": {
            "200": {
                "description": "OK",
                "content": {"application/json": {"schema": {"$ref": V3_REF + out}}},
            },
            "401": {"description": "Unauthorized"},
        },
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": _gvk(rt, kind)[0],
    }
    if body is not None:
        media, ref = body
        types = PATCH_MEDIA if media == "patch" else ("application/json",)
        op["requestBody"] = {
            "required": True,
            "content": {t: {"schema": {"$ref": V3_REF + ref}} for t in types},
        }
    return op


def _base(rt: ResourceType) -> str:
    prefix = f"/apis/{rt.group}/{rt.version}" if rt.group else "/api/v1"
    if rt.namespaced:
        return f"{prefix}/namespaces/{{namespace}}/{rt.plural}"
    return f"{prefix}/{rt.plural}"


def _camel(rt: ResourceType) -> str:
    group = "".join(p.capitalize() for p in (rt.group.split(".")[0] or "core").split("-"))
    return f"{group}{rt.version.capitalize()}{'Namespaced' if rt.namespaced else ''}{rt.kind}"


def resource_paths(rt: ResourceType, root: str, list_name: str) -> dict[str, Schema]:
    """The collection, item, status and scale paths of one resource, with their verbs."""
    base, camel, status = _base(rt), _camel(rt), f"{META}.Status"
    write = _WRITE_PARAMS
    patch = (*write, "force")
    paths: dict[str, Schema] = {
        base: {
            "get": _op(rt, "list", f"list{camel}", list_name or root, _READ_PARAMS),
            "post": _op(rt, "post", f"create{camel}", root, write, ("json", root)),
            "delete": _op(rt, "deletecollection", f"deleteCollection{camel}", status),
        },
        f"{base}/{{name}}": {
            "get": _op(rt, "get", f"read{camel}", root),
            "put": _op(rt, "put", f"replace{camel}", root, write, ("json", root)),
            "patch": _op(rt, "patch", f"patch{camel}", root, patch, ("patch", f"{META}.Patch")),
            "delete": _op(rt, "delete", f"delete{camel}", status, ("dryRun",)),
        },
    }
    if rt.status_subresource:
        paths[f"{base}/{{name}}/status"] = {
            "get": _op(rt, "get", f"read{camel}Status", root),
            "put": _op(rt, "put", f"replace{camel}Status", root, write, ("json", root)),
            "patch": _op(
                rt, "patch", f"patch{camel}Status", root, patch, ("patch", f"{META}.Patch")
            ),
        }
    if rt.scale_subresource:
        scale = "io.k8s.api.autoscaling.v1.Scale"
        scale_rt = ResourceType("autoscaling", "v1", "scale", "Scale")
        paths[f"{base}/{{name}}/scale"] = {
            "get": _op(scale_rt, "get", f"read{camel}Scale", scale),
            "put": _op(scale_rt, "put", f"replace{camel}Scale", scale, write, ("json", scale)),
            "patch": _op(
                scale_rt, "patch", f"patch{camel}Scale", scale, patch, ("patch", f"{META}.Patch")
            ),
        }
    return paths


# --- documents --------------------------------------------------------------------------------


def _reachable(defs: dict[str, Schema], roots: list[str]) -> dict[str, Schema]:
    """Only the schemas the roots refer to, directly or not."""
    out: dict[str, Schema] = {}
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in out or name not in defs:
            continue
        out[name] = defs[name]
        text = json.dumps(defs[name])
        todo.extend(re.findall(re.escape(V3_REF) + r'([^"]+)"', text))
    return out


def _served(registry: Registry, group: str, version: str) -> list[ResourceType]:
    return [rt for rt in registry.all() if rt.group == group and rt.version == version]


def gv_document(registry: Registry, group: str, version: str) -> Schema:
    """GET /openapi/v3/api/v1 or /openapi/v3/apis/G/V: paths and schemas of one group-version."""
    defs: dict[str, Schema] = {}
    paths: dict[str, Schema] = {}
    roots: list[str] = []
    for rt in sorted(_served(registry, group, version), key=lambda r: r.plural):
        try:
            root, list_name, kind_defs = kind_schemas(rt)
        except LookupError:
            continue
        for name, schema in kind_defs.items():
            defs.setdefault(name, schema)
        defs[root] = kind_defs[root]
        roots += [root, list_name, f"{META}.Status", f"{META}.Patch", f"{META}.DeleteOptions"]
        if rt.scale_subresource:
            scale_rt = ResourceType("autoscaling", "v1", "scale", "Scale")
            scale_root, _, scale_defs = kind_schemas(scale_rt)
            defs.update({k: v for k, v in scale_defs.items() if k not in defs})
            roots.append(scale_root)
        paths.update(resource_paths(rt, root, list_name))
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.31.0-localcluster"},
        "paths": paths,
        "components": {"schemas": dict(sorted(_reachable(defs, roots).items()))},
    }


def gv_key(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def content_hash(doc: Schema) -> str:
    return hashlib.sha512(json.dumps(doc, sort_keys=True).encode()).hexdigest().upper()


def v3_index(registry: Registry) -> Schema:
    """GET /openapi/v3: one entry per group-version, its URL carrying the content's hash so
    clients may cache it (and refetch when a CRD changes it)."""
    paths = {}
    for group, versions in sorted(registry.groups().items()):
        for version in versions:
            key = gv_key(group, version)
            _, digest = document(registry, group, version)
            paths[key] = {"serverRelativeURL": f"/openapi/v3/{key}?hash={digest}"}
    return {"paths": paths}


def _to_v2(node: Any, names: bool = False) -> Any:
    """A v3 schema as Swagger 2.0 has it: refs to #/definitions, no nullable/anyOf/oneOf.
    `names`: the keys of this mapping are names (properties, paths), not keywords."""
    if isinstance(node, list):
        return [_to_v2(n) for n in node]
    if not isinstance(node, dict):
        return node
    if names:
        return {key: _to_v2(value) for key, value in node.items()}
    out = {}
    for key, value in node.items():
        if key in ("nullable", "anyOf", "oneOf", "not", "x-kubernetes-validations"):
            continue
        if key == "$ref":
            out[key] = V2_REF + value.removeprefix(V3_REF)
        else:
            out[key] = _to_v2(value, key in _NAMED)
    if out.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
    refs = out.get("allOf") or []
    if len(refs) == 1 and set(refs[0]) == {"$ref"}:
        # v2 readers (kubectl's validator) follow a sibling $ref but not a one-item allOf.
        out["$ref"] = out.pop("allOf")[0]["$ref"]
    return out


_NAMED = {"properties", "patternProperties", "definitions", "paths", "responses"}


def _v2_operation(op: Schema) -> Schema:
    params = [{k: v for k, v in p.items() if k != "schema"} | p["schema"] for p in op["parameters"]]
    if "requestBody" in op:
        media = next(iter(op["requestBody"]["content"].values()))
        params.append({"name": "body", "in": "body", "required": True, "schema": media["schema"]})
    ok = op["responses"]["200"]["content"]["application/json"]["schema"]
    out = {k: v for k, v in op.items() if k not in ("parameters", "requestBody", "responses")}
    if "requestBody" in op:
        out["consumes"] = list(op["requestBody"]["content"])
    out.update(
        parameters=params,
        produces=["application/json"],
        responses={
            "200": {"description": "OK", "schema": ok},
            "401": {"description": "Unauthorized"},
        },
    )
    return out


def v2_document(registry: Registry) -> Schema:
    """GET /openapi/v2 (JSON): every group-version's paths and schemas in one document."""
    definitions: dict[str, Schema] = {}
    paths: dict[str, Schema] = {}
    for group, versions in sorted(registry.groups().items()):
        for version in versions:
            doc, _ = document(registry, group, version)
            definitions.update(doc["components"]["schemas"])
            for path, item in doc["paths"].items():
                paths[path] = {verb: _v2_operation(op) for verb, op in item.items()}
    return _to_v2(
        {
            "swagger": "2.0",
            "info": {"title": "Kubernetes", "version": "v1.31.0-localcluster"},
            "paths": dict(sorted(paths.items())),
            "definitions": dict(sorted(definitions.items())),
        }
    )


# --- field validation -------------------------------------------------------------------------


def unknown_fields(rt: ResourceType, body: Any) -> list[str]:
    """The paths of fields the kind's schema does not declare (`spec.replicaz`), for
    `fieldValidation=Strict|Warn`; strategic-merge directives (`$patch`, ...) are not fields."""
    root, _, defs = kind_schemas(rt)
    found: list[str] = []
    _walk_unknown(defs, defs[root], body, "", found)
    return found


def _walk_unknown(defs: dict[str, Schema], node: Schema, value: Any, path: str,
                  found: list[str]) -> None:  # fmt: skip
    node = _resolve(defs, node)
    if isinstance(value, list):
        items = node.get("items")
        if isinstance(items, dict):
            for n, item in enumerate(value):
                _walk_unknown(defs, items, item, f"{path}[{n}]", found)
        return
    if not isinstance(value, dict) or node.get("x-kubernetes-preserve-unknown-fields"):
        return
    props = node.get("properties")
    extra = node.get("additionalProperties")
    if props is None and not isinstance(extra, dict):
        return  # a free-form object
    for key, sub in value.items():
        where = f"{path}.{key}" if path else key
        if key.startswith("$"):
            continue
        if props is not None and key in props:
            _walk_unknown(defs, props[key], sub, where, found)
        elif isinstance(extra, dict):
            _walk_unknown(defs, extra, sub, where, found)
        elif extra is not True:
            found.append(where)


# --- caching --------------------------------------------------------------------------------

_DOCS: dict[tuple[str, str], tuple[str, Schema, str]] = {}


def _fingerprint(registry: Registry, group: str, version: str) -> str:
    served = sorted(_served(registry, group, version), key=lambda r: r.plural)
    return json.dumps(
        [[r.plural, r.kind, r.schema, r.scale, r.status_subresource] for r in served],
        sort_keys=True,
    )


def document(registry: Registry, group: str, version: str) -> tuple[Schema, str]:
    """The group-version's document and its hash, rebuilt only when what it serves changed
    (a CRD created, updated or deleted)."""
    fingerprint = _fingerprint(registry, group, version)
    cached = _DOCS.get((group, version))
    if cached is None or cached[0] != fingerprint:
        doc = gv_document(registry, group, version)
        cached = (fingerprint, doc, content_hash(doc))
        _DOCS[(group, version)] = cached
    return cached[1], cached[2]

"""Defaults and minimal validation the real server applies to built-in kinds. Pure."""

from __future__ import annotations

import base64
import re
from typing import Any

from localcluster.resources import ResourceType

Cause = dict[str, str]

_DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")


def validate_name(rt: ResourceType, name: str) -> list[Cause]:
    # Namespaces and services need DNS labels; most others DNS subdomains; events are lax.
    if rt.kind == "Event":
        return []
    label = rt.kind in ("Namespace", "Service")
    pattern = _DNS1123_LABEL if label else _DNS1123_SUBDOMAIN
    limit = 63 if label else 253
    if len(name) > limit or not pattern.match(name):
        what = "RFC 1123 label" if label else "RFC 1123 subdomain"
        return [
            {
                "field": "metadata.name",
                "reason": "FieldValueInvalid",
                "message": f'Invalid value: "{name}": a lowercase {what} must consist of '
                "lower case alphanumeric characters, '-' or '.', and must start and end with an "
                "alphanumeric character",
            }
        ]
    return []


_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]\Z")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?\Z")


_LABEL_RULE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
    "or '.', and must start and end with an alphanumeric character (at most 63 characters)"
)


def _key_problem(key: str) -> str | None:
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _DNS1123_SUBDOMAIN.match(prefix)):
        return "prefix part must be a lowercase RFC 1123 subdomain"
    if not name or len(name) > 63 or not _QUALIFIED_NAME.match(name):
        return (
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must "
            "start and end with an alphanumeric character (at most 63 characters)"
        )
    return None


def validate_metadata(meta: dict[str, Any]) -> list[Cause]:
    """Label keys and values, and annotation keys, as ObjectMeta validation checks them."""
    causes = []
    for field in ("labels", "annotations"):
        values = meta.get(field) or {}
        if not isinstance(values, dict):
            causes.append(
                {
                    "field": f"metadata.{field}",
                    "reason": "FieldValueTypeInvalid",
                    "message": "Invalid value: must be a map of strings",
                }
            )
            continue
        for key, value in values.items():
            problem = _key_problem(key)
            if problem:
                causes.append(
                    {
                        "field": f"metadata.{field}",
                        "reason": "FieldValueInvalid",
                        "message": f'Invalid value: "{key}": {problem}',
                    }
                )
            if not isinstance(value, str):
                causes.append(
                    {
                        "field": f"metadata.{field}",
                        "reason": "FieldValueTypeInvalid",
                        "message": f"Invalid value: {key}: must be a string",
                    }
                )
            elif field == "labels" and (len(value) > 63 or not _LABEL_VALUE.match(value)):
                causes.append(
                    {
                        "field": "metadata.labels",
                        "reason": "FieldValueInvalid",
                        "message": f'Invalid value: "{value}": {_LABEL_RULE}',
                    }
                )
    return causes


def _default_container(c: dict[str, Any]) -> None:
    c.setdefault("imagePullPolicy", "IfNotPresent")
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    c.setdefault("resources", {})
    for port in c.get("ports") or []:
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")


def default_pod_spec(spec: dict[str, Any]) -> None:
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("securityContext", {})
    for c in spec.get("containers") or []:
        if isinstance(c, dict):
            _default_container(c)
    for c in spec.get("initContainers") or []:
        if isinstance(c, dict):
            _default_container(c)


def validate_pod_spec(spec: Any, field: str) -> list[Cause]:
    if not isinstance(spec, dict):
        return [{"field": field, "reason": "FieldValueRequired", "message": "Required value"}]
    containers = spec.get("containers")
    if not containers:
        return [
            {
                "field": f"{field}.containers",
                "reason": "FieldValueRequired",
                "message": "Required value",
            }
        ]
    causes = []
    for n, c in enumerate(containers):
        if not isinstance(c, dict) or not c.get("name"):
            causes.append(
                {
                    "field": f"{field}.containers[{n}].name",
                    "reason": "FieldValueRequired",
                    "message": "Required value",
                }
            )
    return causes


def normalize(rt: ResourceType, obj: dict[str, Any]) -> None:
    """On every write: Secret stringData is folded into base64 data, as the real server does."""
    if rt.kind == "Secret" and "stringData" in obj:
        data = obj.get("data") or {}
        for key, value in (obj.pop("stringData") or {}).items():
            data[key] = base64.b64encode(str(value).encode()).decode()
        obj["data"] = data


def prepare_create(rt: ResourceType, obj: dict[str, Any]) -> None:
    """Defaults on create, in place: what `kubectl get -o yaml` shows right after creation."""
    kind = rt.kind
    if rt.custom:
        return
    if kind == "Pod":
        default_pod_spec(obj.setdefault("spec", {}))
        obj["status"] = {"phase": "Pending", "qosClass": "BestEffort"}
    elif kind == "Namespace":
        obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
        obj["status"] = {"phase": "Active"}
        obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = obj["metadata"][
            "name"
        ]
    elif kind == "Service":
        spec = obj.setdefault("spec", {})
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        for port in spec.get("ports") or []:
            if isinstance(port, dict):
                port.setdefault("protocol", "TCP")
                port.setdefault("targetPort", port.get("port"))
        obj["status"] = {"loadBalancer": {}}
    elif kind == "Deployment":
        spec = obj.setdefault("spec", {})
        spec.setdefault("replicas", 1)
        spec.setdefault("revisionHistoryLimit", 10)
        spec.setdefault("progressDeadlineSeconds", 600)
        strategy = spec.setdefault("strategy", {"type": "RollingUpdate"})
        if strategy.get("type", "RollingUpdate") == "RollingUpdate":
            strategy.setdefault("type", "RollingUpdate")
            strategy.setdefault("rollingUpdate", {"maxUnavailable": "25%", "maxSurge": "25%"})
        template_spec = spec.setdefault("template", {}).setdefault("spec", {})
        default_pod_spec(template_spec)
        obj["status"] = {}
    elif kind == "Secret":
        obj.setdefault("type", "Opaque")
    elif kind == "Lease":
        obj.setdefault("spec", {})  # a struct, not a pointer, in the real API
    elif rt.status_subresource:
        obj.pop("status", None)


# Limits of the real server: total annotation size, ConfigMap/Secret data, and what etcd
# stores in one value (1.5 MiB by default; the API answers 413).
MAX_ANNOTATIONS_BYTES = 256 * 1024
MAX_DATA_BYTES = 1024 * 1024
MAX_OBJECT_BYTES = 1536 * 1024


def validate_update(rt: ResourceType, old: dict[str, Any], new: dict[str, Any]) -> list[Cause]:
    """What kube-apiserver refuses to change by an update (PUT or PATCH of the object): a
    Secret's type, and a pod's spec.nodeName, which only pods/binding sets."""
    if rt.group or rt.kind not in ("Secret", "Pod"):
        return []
    if rt.kind == "Secret":
        before, after = old.get("type") or "Opaque", new.get("type") or "Opaque"
        if before != after:
            return [{"field": "type", "reason": "FieldValueInvalid",
                     "message": f'Invalid value: "{after}": field is immutable'}]  # fmt: skip
        return []
    if (old.get("spec") or {}).get("nodeName") != (new.get("spec") or {}).get("nodeName"):
        return [{"field": "spec", "reason": "FieldValueForbidden",
                 "message": "Forbidden: pod updates may not change spec.nodeName "
                 "(pods/binding sets it)"}]  # fmt: skip
    return []


def validate_limits(rt: ResourceType, obj: dict[str, Any]) -> list[Cause]:
    causes = []
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    size = sum(len(k) + len(str(v)) for k, v in annotations.items())
    if size > MAX_ANNOTATIONS_BYTES:
        causes.append(
            {
                "field": "metadata.annotations",
                "reason": "FieldValueTooLong",
                "message": f"Too long: may not be more than {MAX_ANNOTATIONS_BYTES} bytes",
            }
        )
    if rt.kind in ("ConfigMap", "Secret"):
        data = obj.get("data") or {}
        size = sum(len(k) + len(str(v)) for k, v in data.items())
        size += sum(len(k) + len(str(v)) for k, v in (obj.get("binaryData") or {}).items())
        if size > MAX_DATA_BYTES:
            causes.append(
                {
                    "field": "data",
                    "reason": "FieldValueTooLong",
                    "message": f"Too long: may not be more than {MAX_DATA_BYTES} bytes",
                }
            )
    return causes


def _selector_matches_template(spec: dict[str, Any]) -> list[Cause]:
    """A Deployment's matchLabels must select its own pod template."""
    want = (spec.get("selector") or {}).get("matchLabels") or {}
    labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    if all(labels.get(k) == v for k, v in want.items()):
        return []
    return [{"field": "spec.template.metadata.labels", "reason": "FieldValueInvalid",
             "message": "Invalid value: selector does not match template labels"}]  # fmt: skip


def _ingress_path_types(spec: dict[str, Any]) -> list[Cause]:
    causes: list[Cause] = []
    for i, rule in enumerate(spec.get("rules") or []):
        for j, path in enumerate(((rule or {}).get("http") or {}).get("paths") or []):
            if not (path or {}).get("pathType"):
                field = f"spec.rules[{i}].http.paths[{j}].pathType"
                causes.append(
                    {"field": field, "reason": "FieldValueRequired", "message": "Required value"}
                )
    return causes


def _event_namespace(obj: dict[str, Any]) -> list[Cause]:
    """A core Event names an object of its own namespace (or, unnamespaced, of default)."""
    event_ns = (obj.get("metadata") or {}).get("namespace") or "default"
    involved_ns = (obj.get("involvedObject") or {}).get("namespace") or "default"
    if involved_ns == event_ns:
        return []
    message = f'Invalid value: "{involved_ns}": does not match event.namespace'
    return [
        {"field": "involvedObject.namespace", "reason": "FieldValueInvalid", "message": message}
    ]


def validate_builtin(rt: ResourceType, obj: dict[str, Any]) -> list[Cause]:
    if rt.kind == "Pod":
        return validate_pod_spec(obj.get("spec"), "spec")
    if rt.kind == "Deployment":
        spec = obj.get("spec") or {}
        causes = validate_pod_spec((spec.get("template") or {}).get("spec"), "spec.template.spec")
        if not (spec.get("selector") or {}):
            causes.append(
                {
                    "field": "spec.selector",
                    "reason": "FieldValueRequired",
                    "message": "Required value",
                }
            )
        return causes + _selector_matches_template(spec)
    if rt.kind == "Ingress":
        return _ingress_path_types(obj.get("spec") or {})
    if rt.kind == "Event":
        return _event_namespace(obj)
    if rt.kind == "Lease":
        spec = obj.get("spec") or {}
        causes = []
        for f in ("leaseDurationSeconds", "leaseTransitions"):
            v = spec.get(f)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
                causes.append(
                    {
                        "field": f"spec.{f}",
                        "reason": "FieldValueInvalid",
                        "message": f"Invalid value: {v!r}: must be greater than or equal to 0",
                    }
                )
        return causes
    if rt.kind == "EndpointSlice" and "addressType" not in obj:
        return [
            {"field": "addressType", "reason": "FieldValueRequired", "message": "Required value"}
        ]
    return []

"""Label and field selectors: parsing and matching, with the real server's grammar."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubewatch.selectors import Requirement, SelectorError, parse
from localcluster.errors import ApiError

__all__ = ["Requirement", "labels_match", "parse_label_selector"]


def parse_label_selector(text: str | None) -> list[Requirement]:
    """Parse `a=b,c!=d,e in (f,g),h notin (i),j,!k` (kubewatch's grammar); 400 if malformed."""
    try:
        return list(parse(text or ""))
    except SelectorError as exc:
        raise ApiError(400, f"unable to parse requirement: {exc}") from exc


def labels_match(reqs: list[Requirement], obj: dict[str, Any]) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return all(r.matches(labels) for r in reqs)


# Fields the real server lets clients select on, per kind (metadata.name and
# metadata.namespace work for every kind).
FIELD_LABELS: dict[str, set[str]] = {
    "Pod": {
        "status.phase",
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "status.podIP",
        "status.nominatedNodeName",
    },
    "Event": {
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    },
    "Secret": {"type"},
    "Namespace": {"status.phase"},
}


@dataclass(frozen=True)
class FieldRequirement:
    path: str
    op: str  # "=" or "!="
    value: str


def parse_field_selector(text: str | None, kind: str) -> list[FieldRequirement]:
    if not text or not text.strip():
        return []
    allowed = {"metadata.name", "metadata.namespace"} | FIELD_LABELS.get(kind, set())
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        for op in ("!=", "==", "="):
            if op in part:
                path, _, value = part.partition(op)
                path = path.strip()
                if path not in allowed:
                    raise ApiError(
                        400,
                        f'"{path}" is not a known field selector: only '
                        f'"metadata.name", "metadata.namespace"',
                    )
                out.append(FieldRequirement(path, "!=" if op == "!=" else "=", value.strip()))
                break
        else:
            raise ApiError(400, f"invalid selector: '{part}'; can't understand '{part}'")
    return out


def _field_value(obj: dict[str, Any], path: str) -> str:
    node: Any = obj
    for step in path.split("."):
        if not isinstance(node, dict):
            return ""
        node = node.get(step)
    if node is None:
        return ""
    return node if isinstance(node, str) else str(node)


def fields_match(reqs: list[FieldRequirement], obj: dict[str, Any]) -> bool:
    for r in reqs:
        value = _field_value(obj, r.path)
        if (value == r.value) != (r.op == "="):
            return False
    return True

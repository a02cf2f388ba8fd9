"""Label and field selectors: parsing and matching, with the real server's grammar."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from localcluster.errors import ApiError


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!exists"
    values: tuple[str, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        present = self.key in labels
        if self.op == "exists":
            return present
        if self.op == "!exists":
            return not present
        if self.op == "=":
            return present and labels[self.key] == self.values[0]
        if self.op == "!=":
            return not present or labels[self.key] != self.values[0]
        if self.op == "in":
            return present and labels[self.key] in self.values
        if self.op == "notin":
            return not present or labels[self.key] not in self.values
        raise AssertionError(self.op)


_KEY = r"[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?"
_VALUE = r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_SET_RE = re.compile(rf"^\s*({_KEY})\s+(in|notin)\s+\(([^)]*)\)\s*$")
_EQ_RE = re.compile(rf"^\s*({_KEY})\s*(==|!=|=)\s*({_VALUE})\s*$")
_EXISTS_RE = re.compile(rf"^\s*(!?)\s*({_KEY})\s*$")


def _split_top(text: str) -> list[str]:
    """Split on commas outside parentheses."""
    parts, depth, current = [], 0, []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return parts


def parse_label_selector(text: str | None) -> list[Requirement]:
    """Parse `a=b,c!=d,e in (f,g),h notin (i),j,!k`; raises 400 on a malformed selector."""
    if not text or not text.strip():
        return []
    reqs = []
    for part in _split_top(text):
        if not part.strip():
            raise ApiError(400, f"unable to parse requirement: empty requirement in {text!r}")
        m = _SET_RE.match(part)
        if m:
            values = tuple(v.strip() for v in m.group(4).split(",") if v.strip())
            reqs.append(Requirement(m.group(1), m.group(3), values))
            continue
        m = _EQ_RE.match(part)
        if m:
            op = "!=" if m.group(3) == "!=" else "="
            reqs.append(Requirement(m.group(1), op, (m.group(4),)))
            continue
        m = _EXISTS_RE.match(part)
        if m:
            reqs.append(Requirement(m.group(2), "!exists" if m.group(1) else "exists"))
            continue
        raise ApiError(400, f"unable to parse requirement: {part.strip()!r}")
    return reqs


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

"""Label selectors: match, format for the API server's `labelSelector`, and parse.

Pure functions, the one label-selector grammar of the repository. The controller's caches
ask the API server to filter (so a watch only carries the pods it needs) and match on the
client side with the same semantics when they re-check or index; the template's
watchedResources selectors are parsed here; localcluster's API server parses a request's
`labelSelector` here too (localcluster/selectors.py turns SelectorError into a 400).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

# A requirement is (key, operator, values); operators as in metav1.LabelSelectorRequirement.
OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")

_KEY_RE = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?\Z")
# A label value may be empty ("app=" selects app set to "").
_VALUE_RE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?\Z")


class SelectorError(ValueError):
    """A selector that is not well formed."""


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.operator == "Exists":
            return self.key in labels
        if self.operator == "DoesNotExist":
            return self.key not in labels
        if self.operator == "In":
            return self.key in labels and labels[self.key] in self.values
        if self.operator == "NotIn":
            # As in Kubernetes: a missing key satisfies NotIn.
            return self.key not in labels or labels[self.key] not in self.values
        raise SelectorError(f"unknown operator {self.operator!r}")


def requirements(selector: Mapping | None) -> tuple[Requirement, ...]:
    """Requirements of a metav1.LabelSelector dict (`matchLabels` and `matchExpressions`)."""
    if not selector:
        return ()
    reqs: list[Requirement] = []
    for key, value in sorted((selector.get("matchLabels") or {}).items()):
        reqs.append(Requirement(str(key), "In", (str(value),)))
    for expr in selector.get("matchExpressions") or []:
        op = expr.get("operator")
        if op not in OPERATORS:
            raise SelectorError(f"unknown operator {op!r}")
        values = tuple(str(v) for v in expr.get("values") or ())
        if op in ("In", "NotIn") and not values:
            raise SelectorError(f"operator {op} needs values")
        if op in ("Exists", "DoesNotExist") and values:
            raise SelectorError(f"operator {op} takes no values")
        reqs.append(Requirement(str(expr["key"]), op, values))
    return tuple(reqs)


def matches(selector: Mapping | None, labels: Mapping[str, str] | None) -> bool:
    """Whether `labels` satisfy a LabelSelector dict. An empty selector matches everything."""
    labels = labels or {}
    return all(r.matches(labels) for r in requirements(selector))


def to_string(selector: Mapping | None) -> str:
    """The `labelSelector` query string for a LabelSelector dict ('' for match-all)."""
    parts = []
    for r in requirements(selector):
        if r.operator == "In" and len(r.values) == 1:
            parts.append(f"{r.key}={r.values[0]}")
        elif r.operator == "In":
            parts.append(f"{r.key} in ({','.join(sorted(r.values))})")
        elif r.operator == "NotIn":
            parts.append(f"{r.key} notin ({','.join(sorted(r.values))})")
        elif r.operator == "Exists":
            parts.append(r.key)
        else:
            parts.append(f"!{r.key}")
    return ",".join(parts)


def _split_top_level(text: str) -> list[str]:
    # Commas inside "in (a,b)" do not separate requirements.
    out, depth, cur = [], 0, []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                raise SelectorError(f"unbalanced parenthesis in {text!r}")
        if ch == "," and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth:
        raise SelectorError(f"unbalanced parenthesis in {text!r}")
    out.append("".join(cur))
    return out


def _check_key(key: str) -> str:
    if not _KEY_RE.match(key):
        raise SelectorError(f"invalid label key {key!r}")
    return key


def _check_value(value: str) -> str:
    if not _VALUE_RE.match(value):
        raise SelectorError(f"invalid label value {value!r}")
    return value


_SET_RE = re.compile(r"^(\S+)\s+(in|notin)\s*\((.*)\)\Z")


def parse(text: str) -> tuple[Requirement, ...]:
    """Parse a `labelSelector` string (=, ==, !=, in, notin, key, !key)."""
    text = text.strip()
    if not text:
        return ()
    reqs: list[Requirement] = []
    for raw in _split_top_level(text):
        part = raw.strip()
        if not part:
            raise SelectorError(f"empty requirement in {text!r}")
        m = _SET_RE.match(part)
        if m:
            values = tuple(_check_value(v.strip()) for v in m.group(3).split(",") if v.strip())
            if not values:
                raise SelectorError("for 'in', 'notin' operators, values set can't be empty")
            op = "In" if m.group(2) == "in" else "NotIn"
            reqs.append(Requirement(_check_key(m.group(1)), op, values))
        elif "!=" in part:
            key, value = part.split("!=", 1)
            reqs.append(
                Requirement(_check_key(key.strip()), "NotIn", (_check_value(value.strip()),))
            )
        elif "=" in part:
            key, value = part.split("==", 1) if "==" in part else part.split("=", 1)
            reqs.append(Requirement(_check_key(key.strip()), "In", (_check_value(value.strip()),)))
        elif part.startswith("!"):
            reqs.append(Requirement(_check_key(part[1:].strip()), "DoesNotExist"))
        else:
            reqs.append(Requirement(_check_key(part), "Exists"))
    return tuple(reqs)


def matches_string(text: str, labels: Mapping[str, str] | None) -> bool:
    """Whether `labels` satisfy a `labelSelector` string."""
    labels = labels or {}
    return all(r.matches(labels) for r in parse(text))

"""Fault rules for the admin endpoint and how a request matches them. Pure logic."""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from typing import Any

_ids = itertools.count(1)


@dataclass
class FaultRule:
    """One injected fault. A request matches when its path matches `path_regex` (searched)
    and its method is in `methods` (all methods when empty).

    latency_ms: delay before answering; status: answer with this error code (a Status body);
    blackhole: accept and never answer (until the rule is cleared); refuse: new TCP
    connections are refused and open ones dropped (global, path ignored); freeze: a resource
    ("leases" or "coordination.k8s.io/leases") whose watch events stop and writes hang;
    times: apply to this many matching requests only (0 = until cleared).
    """

    path_regex: str = ""
    methods: tuple[str, ...] = ()
    latency_ms: float = 0.0
    status: int = 0
    message: str = ""
    blackhole: bool = False
    refuse: bool = False
    freeze: str = ""
    times: int = 0
    id: int = field(default_factory=lambda: next(_ids))
    hits: int = 0

    def __post_init__(self) -> None:
        self._re = re.compile(self.path_regex) if self.path_regex else None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FaultRule:
        allowed = {
            "path_regex",
            "methods",
            "latency_ms",
            "status",
            "message",
            "blackhole",
            "refuse",
            "freeze",
            "times",
        }
        unknown = set(data) - allowed
        if unknown:
            raise ValueError(f"unknown fault fields: {sorted(unknown)}")
        methods = data.get("methods") or ()
        if isinstance(methods, str):
            methods = (methods,)
        rule = cls(
            path_regex=str(data.get("path_regex") or ""),
            methods=tuple(m.upper() for m in methods),
            latency_ms=float(data.get("latency_ms") or 0),
            status=int(data.get("status") or 0),
            message=str(data.get("message") or ""),
            blackhole=bool(data.get("blackhole")),
            refuse=bool(data.get("refuse")),
            freeze=str(data.get("freeze") or ""),
            times=int(data.get("times") or 0),
        )
        if rule.status and not 400 <= rule.status <= 599:
            raise ValueError("status must be an HTTP error code (400-599)")
        return rule

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "path_regex": self.path_regex,
            "methods": list(self.methods),
            "latency_ms": self.latency_ms,
            "status": self.status,
            "message": self.message,
            "blackhole": self.blackhole,
            "refuse": self.refuse,
            "freeze": self.freeze,
            "times": self.times,
            "hits": self.hits,
        }

    def matches(self, method: str, path: str) -> bool:
        if self.refuse or self.freeze:
            return False  # handled at the listener and in the store path, not per request
        if self.methods and method.upper() not in self.methods:
            return False
        return self._re is None or self._re.search(path) is not None


def freezes(rule: FaultRule, group: str, plural: str) -> bool:
    if not rule.freeze:
        return False
    want_group, _, want_plural = rule.freeze.rpartition("/")
    return want_plural == plural and (not want_group or want_group == group)


class FaultSet:
    def __init__(self) -> None:
        self.rules: list[FaultRule] = []

    def add(self, rule: FaultRule) -> FaultRule:
        self.rules.append(rule)
        return rule

    def clear(self) -> None:
        self.rules.clear()

    def remove(self, rule_id: int) -> bool:
        before = len(self.rules)
        self.rules = [r for r in self.rules if r.id != rule_id]
        return len(self.rules) != before

    def active(self, rule: FaultRule) -> bool:
        return any(r is rule for r in self.rules)

    def match(self, method: str, path: str) -> list[FaultRule]:
        """Matching rules, counting a hit on each and retiring those used up."""
        out = []
        for rule in list(self.rules):
            if rule.matches(method, path):
                rule.hits += 1
                out.append(rule)
                if rule.times and rule.hits >= rule.times:
                    self.rules.remove(rule)
        return out

    def holds(self, method: str, path: str) -> bool:
        """Whether a black-hole rule covers this request (without counting a hit)."""
        return any(r.blackhole and r.matches(method, path) for r in self.rules)

    @property
    def refusing(self) -> bool:
        return any(r.refuse for r in self.rules)

    def frozen(self, group: str, plural: str) -> bool:
        return any(freezes(r, group, plural) for r in self.rules)

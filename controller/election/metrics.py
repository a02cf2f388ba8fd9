"""Prometheus metrics of the election (names fixed by the spec and the seed)."""

from __future__ import annotations

import threading

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge


class ElectionMetrics:
    def __init__(self, registry: CollectorRegistry = REGISTRY):
        self.is_leader = Gauge(
            "haptic_leader_election_is_leader",
            "1 while this replica holds the leader Lease, else 0.",
            registry=registry,
        )
        self.transitions = Counter(
            "haptic_leader_election_transitions_total",
            "Leadership terms this replica started or ended.",
            registry=registry,
        )
        self.time_as_leader = Counter(
            "haptic_leader_election_time_as_leader_seconds_total",
            "Seconds this replica spent as leader.",
            registry=registry,
        )


_default: ElectionMetrics | None = None
_default_lock = threading.Lock()


def default_metrics() -> ElectionMetrics:
    """One set on the process-wide registry (metrics register once per registry)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = ElectionMetrics()
        return _default

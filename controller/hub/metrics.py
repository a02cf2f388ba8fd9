"""Prometheus metrics of the hub: failovers and refused promotion attempts, by reason."""

from __future__ import annotations

from prometheus_client import REGISTRY, CollectorRegistry, Counter


class HubMetrics:
    def __init__(self, registry: CollectorRegistry | None = REGISTRY) -> None:
        self.failover = Counter(
            "ha_failover", "Promotions of this Standby to Active.", registry=registry
        )
        self.aborted = Counter(
            "ha_promotions_aborted",
            "Promotion attempts refused by a guard or a failed step.",
            ["reason"],
            registry=registry,
        )

    def failovers(self) -> float:
        return self.failover._value.get()

    def aborts(self, reason: str) -> float:
        return self.aborted.labels(reason=reason)._value.get()


_default: HubMetrics | None = None


def default_metrics() -> HubMetrics:
    """The process-wide metrics, registered once on the default registry."""
    global _default
    if _default is None:
        _default = HubMetrics()
    return _default

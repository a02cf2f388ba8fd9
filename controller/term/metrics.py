"""Metrics of the leader term (ADR-0033)."""

from __future__ import annotations

from prometheus_client import Gauge

RETAINED_CONFIG_ACTIVE = Gauge(
    "haptic_retained_config_active",
    "1 while validated recovery from a retained checkpoint is scheduled (ADR-0033)",
)

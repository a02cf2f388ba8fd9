"""Election timings: defaults, parsing of `spec.controller.leaderElection`, validation."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DEFAULT_LEASE_NAME = "haptic-leader"

_DURATION = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)\Z")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """Seconds of a CRD duration such as "30s", "1.5s", "500ms", "2m" (the CRD's pattern)."""
    match = _DURATION.match(text.strip())
    if not match:
        raise ValueError(f"invalid duration {text!r}: expected a number with ms, s, m or h")
    return float(match.group(1)) * _UNIT_SECONDS[match.group(2)]


@dataclass(frozen=True)
class ElectionTiming:
    """How long a lease lasts, how long the leader keeps trying to renew, how often to retry.

    The defaults are twice kube-controller-manager's (seed 003): the renew deadline is the
    leader's budget for riding out API server outages or CPU starvation, and the ratio
    lease/renew (1.5) is the tolerated clock-rate skew between replicas.
    """

    lease_duration: float = 30.0
    renew_deadline: float = 20.0
    retry_period: float = 5.0

    def __post_init__(self) -> None:
        # The renew deadline must end before the lease could expire in a follower's eyes,
        # otherwise a leader could still act when another replica has taken over.
        if not self.lease_duration > self.renew_deadline:
            raise ValueError("leaseDuration must be greater than renewDeadline")
        if not self.renew_deadline > self.retry_period:
            raise ValueError("renewDeadline must be greater than retryPeriod")
        if not self.retry_period > 0:
            raise ValueError("retryPeriod must be positive")

    @property
    def lease_duration_seconds(self) -> int:
        """The integer the Lease API stores; rounded up so followers never wait too little."""
        whole = int(self.lease_duration)
        return max(1, whole if whole == self.lease_duration else whole + 1)


@dataclass(frozen=True)
class ElectionSettings:
    """The `spec.controller.leaderElection` block of the HAProxyTemplateConfig, with defaults."""

    enabled: bool = True
    lease_name: str = DEFAULT_LEASE_NAME
    timing: ElectionTiming = ElectionTiming()


def settings_from_spec(spec: Mapping[str, Any] | None) -> ElectionSettings:
    """Read the election settings from a HAProxyTemplateConfig spec (missing keys: defaults)."""
    block = ((spec or {}).get("controller") or {}).get("leaderElection") or {}
    defaults = ElectionTiming()
    timing = ElectionTiming(
        lease_duration=_duration(block, "leaseDuration", defaults.lease_duration),
        renew_deadline=_duration(block, "renewDeadline", defaults.renew_deadline),
        retry_period=_duration(block, "retryPeriod", defaults.retry_period),
    )
    return ElectionSettings(
        enabled=bool(block.get("enabled", True)),
        lease_name=block.get("leaseName") or DEFAULT_LEASE_NAME,
        timing=timing,
    )


def _duration(block: Mapping[str, Any], key: str, default: float) -> float:
    value = block.get(key)
    return default if value in (None, "") else parse_duration(str(value))

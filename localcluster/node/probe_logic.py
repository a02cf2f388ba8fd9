"""Probe result bookkeeping with the kubelet's thresholds. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ProbeSpec:
    initial_delay: float = 0.0
    period: float = 10.0
    timeout: float = 1.0
    success_threshold: int = 1
    failure_threshold: int = 3

    @classmethod
    def from_dict(cls, probe: dict[str, Any]) -> ProbeSpec:
        return cls(
            initial_delay=float(probe.get("initialDelaySeconds", 0) or 0),
            period=float(probe.get("periodSeconds", 10) or 10),
            timeout=float(probe.get("timeoutSeconds", 1) or 1),
            success_threshold=int(probe.get("successThreshold", 1) or 1),
            failure_threshold=int(probe.get("failureThreshold", 3) or 3),
        )


@dataclass(frozen=True)
class ProbeState:
    """`result` is what the kubelet reports; it flips only after a run of equal outcomes as
    long as the threshold. Readiness starts as failure until the first success run."""

    result: bool = False
    last: bool | None = None
    run: int = 0


def record(state: ProbeState, spec: ProbeSpec, ok: bool) -> ProbeState:
    run = state.run + 1 if state.last == ok else 1
    threshold = spec.success_threshold if ok else spec.failure_threshold
    result = ok if run >= threshold else state.result
    return ProbeState(result=result, last=ok, run=run)


def restart_backoff(previous: float, base: float = 0.5, cap: float = 10.0) -> float:
    """Crash-loop backoff: doubling from a small base up to a cap (the kubelet uses 10 s to
    5 min; a local node keeps it short so crash loops stay visible in tests)."""
    return base if previous <= 0 else min(previous * 2, cap)

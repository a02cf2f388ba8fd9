"""Guards before promotion (seed 004): is the observation really evidence about the Active?

Self-health separates "this hub lost its own networking" from "the Active is gone", which
look byte-identical from the remote reads. The final dial closes the polling race against a
reachable Active that renewed just after our last poll. Neither is a split-brain guard: in
a real partition the final dial fails like every other read and we promote anyway; safety
there comes from the duration and the arming rule.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from kubernetes.client.exceptions import ApiException

from controller.hub.detection import is_lease_stale
from controller.hub.leases import LeaseNotFound, LeaseView


def self_healthy(error: BaseException | None) -> bool:
    """Did our own API server answer? NotFound is an answer, hence healthy.

    Getting this backwards would block every real first failover: on a first promotion no
    Lease exists here yet. Only transport errors, timeouts and server errors (5xx) count.
    """
    if error is None or isinstance(error, LeaseNotFound):
        return True
    if isinstance(error, ApiException):
        status = error.status or 0
        return 0 < status < 500
    return False


class DialVerdict(enum.Enum):
    LIVE = "live"  # read succeeded and the Lease is fresh: abort
    STALE = "stale"  # read succeeded and the Lease is still stale: proceed
    UNREACHABLE = "unreachable"  # read failed: the retained view stands, proceed


@dataclass(frozen=True)
class DialResult:
    verdict: DialVerdict
    view: LeaseView | None  # the fresh view when the read succeeded


def final_dial_verdict(
    view: LeaseView | None, error: BaseException | None, now: datetime, padding_seconds: float
) -> DialResult:
    if error is not None or view is None:
        return DialResult(DialVerdict.UNREACHABLE, None)
    if is_lease_stale(view, now, padding_seconds):
        return DialResult(DialVerdict.STALE, view)
    return DialResult(DialVerdict.LIVE, view)


def attempt(read: Callable[[], LeaseView]) -> tuple[LeaseView | None, BaseException | None]:
    """Run one read, returning its value or the exception it raised."""
    try:
        return read(), None
    except Exception as exc:
        return None, exc

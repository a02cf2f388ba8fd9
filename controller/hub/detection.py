"""Detection: is the Active's newest proof of life too old? (seed 004)

A dead controller pod (reads succeed, renewTime frozen) and a dead API server (reads fail,
so the newest renewTime we ever saw is frozen) are the same event. So we retain the newest
successfully read Lease and age it against a moving clock: one threshold covers both.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime, timedelta

from controller.hub.leases import LeaseView


def is_lease_stale(view: LeaseView | None, now: datetime, padding_seconds: float) -> bool:
    """Stale when renewTime + the Lease's own leaseDurationSeconds + padding has passed.

    The one place haptic compares another machine's renewTime with its own wall clock, and
    the right one there: the Standby judges the Active's hub Lease across clusters, and its
    promotion budget (seed 004) runs from the Active's last renewal, the only event both
    sides can name, not from when this Standby first read the Lease (a Standby restarted
    after the Active died would otherwise wait a whole extra lease duration). The same anchor
    ages a Lease that can no longer be read at all. Within one cluster the hub elector uses
    the monotonic "first seen unchanged" rule of `controller.election.decisions` instead.
    Clock skew between the clusters is what `padding_seconds` absorbs.

    A missing Lease or renewTime is stale, which is right for "should I create it" callers
    and exactly wrong for a Standby that never read the Active: see `is_candidate`.
    """
    if view is None or view.renew_time is None:
        return True
    deadline = view.renew_time + timedelta(seconds=view.lease_duration_seconds + padding_seconds)
    return now > deadline


def is_armed(retained: LeaseView | None) -> bool:
    """The arming rule: never promote without having once proved the Active's Lease readable.

    Kept as its own statement, never folded into `is_lease_stale` (which says True for None):
    merged, a broken kubeconfig or mistyped namespace would promote on the first tick.
    """
    return retained is not None


def is_candidate(retained: LeaseView | None, now: datetime, padding_seconds: float) -> bool:
    if not is_armed(retained):
        return False
    return is_lease_stale(retained, now, padding_seconds)


@dataclass(frozen=True)
class Snapshot:
    retained: LeaseView | None
    last_good_read: float | None  # monotonic; carried for a future local-only floor
    consecutive_failures: int
    last_epoch: int  # highest fencing epoch ever read from the Active's leader Lease


class RemoteLeaseTracker:
    """The retained view. A successful read replaces it; a failed read leaves it to age."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._retained: LeaseView | None = None
        self._last_good_read: float | None = None
        self._failures = 0
        self._last_epoch = 0

    def record_success(self, view: LeaseView, monotonic_now: float) -> None:
        with self._lock:
            self._retained = view
            self._last_good_read = monotonic_now
            self._failures = 0

    def record_failure(self) -> None:
        with self._lock:
            self._failures += 1

    def record_epoch(self, epoch: int) -> None:
        # Epochs only grow: an older or unreadable value never lowers what we saw.
        with self._lock:
            self._last_epoch = max(self._last_epoch, epoch)

    def snapshot(self) -> Snapshot:
        with self._lock:
            return Snapshot(self._retained, self._last_good_read, self._failures, self._last_epoch)

    def is_candidate(self, now: datetime, padding_seconds: float) -> bool:
        return is_candidate(self.snapshot().retained, now, padding_seconds)

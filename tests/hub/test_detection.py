"""Detection (seed 004): the retained view, staleness, and the arming rule."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from controller.hub.detection import (
    RemoteLeaseTracker,
    is_armed,
    is_candidate,
    is_lease_stale,
)
from controller.hub.leases import LeaseView

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def view(renewed: datetime, duration: int = 30, holder: str = "active") -> LeaseView:
    return LeaseView(holder=holder, renew_time=renewed, lease_duration_seconds=duration)


def test_never_armed_never_becomes_candidate() -> None:
    # is_lease_stale(None) is True by design; a Standby that never read the Active must
    # still never be a candidate. Fails if the arming check is folded into the verdict.
    far_future = T0 + timedelta(days=365)
    assert is_lease_stale(None, far_future, 0)
    assert not is_armed(None)
    assert not is_candidate(None, far_future, 0)
    tracker = RemoteLeaseTracker()
    for _ in range(5):
        tracker.record_failure()
    assert not tracker.is_candidate(far_future, 0)


def test_unreadable_lease_keeps_cache_and_goes_stale() -> None:
    tracker = RemoteLeaseTracker()
    tracker.record_success(view(T0), monotonic_now=1.0)
    # Reads now fail: the retained view is kept and ages against the clock.
    for _ in range(3):
        tracker.record_failure()
    snap = tracker.snapshot()
    assert snap.retained == view(T0)
    assert snap.last_good_read == 1.0
    assert snap.consecutive_failures == 3
    assert not tracker.is_candidate(T0 + timedelta(seconds=30 + 10), padding_seconds=10)
    assert tracker.is_candidate(T0 + timedelta(seconds=30 + 10, milliseconds=1), 10)


def test_successful_read_replaces_cache() -> None:
    tracker = RemoteLeaseTracker()
    tracker.record_success(view(T0), 1.0)
    tracker.record_failure()
    newer = view(T0 + timedelta(seconds=25))
    tracker.record_success(newer, 2.0)
    snap = tracker.snapshot()
    assert snap.retained == newer
    assert snap.consecutive_failures == 0
    # The fresher renewTime moves the deadline: stale at T0+41 before, live now.
    assert not tracker.is_candidate(T0 + timedelta(seconds=41), 10)


def test_staleness_uses_the_leases_own_duration() -> None:
    short = view(T0, duration=2)
    assert is_lease_stale(short, T0 + timedelta(seconds=3.5), 1)
    assert not is_lease_stale(view(T0, duration=30), T0 + timedelta(seconds=3.5), 1)


def test_epoch_only_grows() -> None:
    tracker = RemoteLeaseTracker()
    tracker.record_epoch(7)
    tracker.record_epoch(3)
    tracker.record_epoch(0)
    assert tracker.snapshot().last_epoch == 7


@given(
    duration=st.integers(min_value=1, max_value=3600),
    padding=st.floats(min_value=0, max_value=600, allow_nan=False),
    elapsed=st.floats(min_value=-100, max_value=10_000, allow_nan=False),
)
def test_stale_exactly_after_renew_plus_duration_plus_padding(
    duration: int, padding: float, elapsed: float
) -> None:
    now = T0 + timedelta(seconds=elapsed)
    deadline = T0 + timedelta(seconds=duration + padding)
    assert is_lease_stale(view(T0, duration), now, padding) == (now > deadline)
    # Armed candidacy is exactly staleness; unarmed is never a candidate.
    assert is_candidate(view(T0, duration), now, padding) == (now > deadline)
    assert not is_candidate(None, now, padding)


@given(reads=st.lists(st.one_of(st.none(), st.integers(min_value=0, max_value=10_000))))
def test_retained_view_is_the_last_successful_read(reads: list[int | None]) -> None:
    tracker = RemoteLeaseTracker()
    expected = None
    for i, r in enumerate(reads):
        if r is None:
            tracker.record_failure()
        else:
            expected = view(T0 + timedelta(seconds=r))
            tracker.record_success(expected, float(i))
    assert tracker.snapshot().retained == expected

"""The promotion sequence with recording hooks (seed 004's promote tests).

Collaborators are fakes here (a recording hook set, a fake clock, fake reads); the same
sequence runs against real API servers in test_e2e.py.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kubernetes.client.exceptions import ApiException
from prometheus_client import CollectorRegistry, generate_latest

from controller.hub.detection import RemoteLeaseTracker
from controller.hub.fence import WriteFence
from controller.hub.leases import LeaseNotFound, LeaseView
from controller.hub.metrics import HubMetrics
from controller.hub.promotion import (
    EVENT_ABORTED,
    EVENT_PROMOTED,
    AbortReason,
    Promoter,
    PromotionHooks,
    next_epoch,
)

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
STALE = LeaseView("active", NOW - timedelta(seconds=60), 30, epoch=0)
LIVE = LeaseView("active", NOW - timedelta(seconds=1), 30)


class Recorder:
    """Hooks that record their order and the fence/latch state they saw."""

    def __init__(self, fence: WriteFence) -> None:
        self.fence = fence
        self.calls: list[str] = []
        self.fence_seen: dict[str, bool] = {}
        self.promoting_seen: dict[str, bool] = {}
        self.events: list[tuple[str, str, str]] = []
        self.fail: set[str] = set()
        self.block: set[str] = set()
        self.release = threading.Event()
        self.promoter: Promoter | None = None

    def _step(self, name: str) -> None:
        self.calls.append(name)
        self.fence_seen[name] = self.fence.is_open()
        if self.promoter is not None:
            self.promoting_seen[name] = self.promoter.promoting
        if name in self.block:
            self.release.wait(30)
        if name in self.fail:
            raise RuntimeError(f"{name} failed")

    def hooks(self) -> PromotionHooks:
        def stop_mirror(timeout: float) -> bool:
            self._step("stop_mirror")
            return "stop_mirror_false" not in self.fail

        def claim(floor: int) -> int:
            self._step("claim_epoch")
            return floor

        def emit(kind: str, reason: str, message: str) -> None:
            self.events.append((kind, reason, message))
            self._step("event")

        return PromotionHooks(
            stop_mirror=stop_mirror,
            resume_mirror=lambda: self._step("resume_mirror"),
            acquire_lease=lambda: self._step("acquire_lease"),
            release_lease=lambda: self._step("release_lease"),
            claim_epoch=claim,
            publish=lambda: self._step("publish"),
            kick=lambda: self._step("kick"),
            emit_event=emit,
        )


def make(
    *,
    read_remote: Callable[[], LeaseView] | None = lambda: STALE,
    check_self: Callable[[], object] = lambda: None,
    grace: float = 5.0,
    last_epoch: int = 0,
) -> tuple[Promoter, Recorder, HubMetrics, RemoteLeaseTracker]:
    fence = WriteFence(open_=False)
    rec = Recorder(fence)
    metrics = HubMetrics(CollectorRegistry())
    tracker = RemoteLeaseTracker()
    tracker.record_success(STALE, 0.0)
    tracker.record_epoch(last_epoch)
    promoter = Promoter(
        fence=fence,
        hooks=rec.hooks(),
        tracker=tracker,
        check_self=check_self,
        read_remote=read_remote,
        padding_seconds=10,
        dial_timeout=1.0,
        grace_period=grace,
        metrics=metrics,
        clock=lambda: NOW,
        monotonic=lambda: 100.0,
    )
    rec.promoter = promoter
    return promoter, rec, metrics, tracker


def test_promote_happy_path_exact_hook_order_fence_shut_throughout() -> None:
    promoter, rec, metrics, _ = make(last_epoch=41)
    result = promoter.promote()
    assert result.promoted and result.reason is None and result.failed_steps == ()
    assert rec.calls == [
        "stop_mirror", "acquire_lease", "claim_epoch", "publish", "kick", "event",
    ]  # fmt: skip
    # Shut for every step before the fence opens; open for the kick (a shut fence drops it).
    for step in ("stop_mirror", "acquire_lease", "claim_epoch", "publish"):
        assert rec.fence_seen[step] is False, step
    assert rec.fence_seen["kick"] is True
    # The latch is held for the whole sequence, so the hub reports not-leader throughout.
    assert all(rec.promoting_seen.values())
    assert not promoter.promoting
    assert promoter.fence.is_open()
    assert result.epoch == 42
    assert metrics.failovers() == 1
    assert rec.events[-1][:2] == ("Normal", EVENT_PROMOTED)


class TestGuardsAbort_DoesNotDisarm:
    """Seed 004: a guard refusal changes nothing but the attempt; the Standby stays armed and a
    later tick promotes."""

    def test_self_unhealthy_and_live_lease_keep_the_standby_armed(self) -> None:
        # Self unhealthy: a 503 from our own API server.
        promoter, rec, metrics, tracker = make(check_self=_raises(ApiException(status=503)))
        result = promoter.promote()
        assert result.reason is AbortReason.SELF_UNHEALTHY
        assert rec.calls == ["event"] and rec.events[0][:2] == ("Warning", EVENT_ABORTED)
        assert tracker.snapshot().retained == STALE  # still armed
        assert tracker.is_candidate(NOW, 10)
        assert metrics.aborts("self_unhealthy") == 1
        assert not promoter.fence.is_open()

        # Live at the final dial: the fresh read refreshes the retained view; still armed.
        promoter, rec, metrics, tracker = make(read_remote=lambda: LIVE)
        result = promoter.promote()
        assert result.reason is AbortReason.LEASE_LIVE
        assert tracker.snapshot().retained == LIVE
        assert metrics.aborts("lease_live") == 1
        assert "stop_mirror" not in rec.calls
        assert not promoter.fence.is_open()
        # A later attempt with the Active gone again promotes: nothing was disarmed.
        promoter.read_remote = lambda: STALE
        assert promoter.promote().promoted


class TestSelfHealthy_NotFoundCountsAsHealthy:
    """Seed 004, at the promotion: a NotFound self check promotes; transport errors abort."""

    def test_promotion_proceeds_on_not_found(self) -> None:
        promoter, _rec, metrics, _ = make(check_self=_raises(LeaseNotFound("haptic/haptic-hub")))
        assert promoter.promote().promoted
        promoter, *_ = make(check_self=_raises(ApiException(status=403)))
        assert promoter.promote().promoted
        for error in (
            TimeoutError("timed out"),
            ConnectionRefusedError(),
            ApiException(status=500),
        ):
            promoter, _, metrics, _ = make(check_self=_raises(error))
            assert promoter.promote().reason is AbortReason.SELF_UNHEALTHY
            assert metrics.aborts("self_unhealthy") == 1


def test_final_dial_failure_keeps_retained_view_and_proceeds() -> None:
    promoter, _rec, _, tracker = make(read_remote=_raises(TimeoutError("black hole")))
    assert promoter.promote().promoted
    assert tracker.snapshot().retained == STALE
    assert tracker.snapshot().consecutive_failures == 1


def test_mirror_stop_failure_aborts() -> None:
    for failure in ("stop_mirror", "stop_mirror_false"):
        promoter, rec, metrics, tracker = make()
        rec.fail.add(failure)
        result = promoter.promote()
        assert result.reason is AbortReason.MIRROR_NOT_STOPPED
        assert "acquire_lease" not in rec.calls
        assert "resume_mirror" in rec.calls  # a Standby that stays a Standby keeps mirroring
        assert not promoter.fence.is_open()
        assert metrics.aborts("mirror_not_stopped") == 1
        assert tracker.is_candidate(NOW, 10)


def test_lease_failure_aborts() -> None:
    promoter, rec, metrics, _ = make()
    rec.fail.add("acquire_lease")
    result = promoter.promote()
    assert result.reason is AbortReason.LEASE_ACQUIRE_FAILED
    assert rec.calls[:3] == ["stop_mirror", "acquire_lease", "resume_mirror"]
    assert "publish" not in rec.calls and "kick" not in rec.calls
    assert not promoter.fence.is_open()
    assert metrics.aborts("lease_acquire_failed") == 1
    assert metrics.failovers() == 0


def test_epoch_failure_aborts_and_gives_the_lease_back() -> None:
    promoter, rec, _metrics, _ = make()
    rec.fail.add("claim_epoch")
    result = promoter.promote()
    assert result.reason is AbortReason.EPOCH_NOT_SET
    assert "release_lease" in rec.calls and "resume_mirror" in rec.calls
    assert not promoter.fence.is_open()


@pytest.mark.parametrize("step", ["publish", "kick", "event"])
def test_publish_kick_event_failures_still_promote(step: str) -> None:
    promoter, rec, metrics, _ = make()
    rec.fail.add(step)
    result = promoter.promote()
    assert result.promoted
    assert result.failed_steps == (step,)
    assert promoter.fence.is_open()
    assert metrics.failovers() == 1


class TestPromote_IsOnceOnly:
    """Seed 004: promotion runs once; a second run would race the renewal loop the first one
    started, so no hook may run twice."""

    def test_second_call_runs_no_hook(self) -> None:
        promoter, rec, metrics, _ = make()
        first = promoter.promote()
        calls = list(rec.calls)
        second = promoter.promote()
        assert first.promoted and second.promoted and second.already_active
        assert rec.calls == calls  # no hook ran twice
        assert metrics.failovers() == 1

    def test_under_concurrent_callers(self) -> None:
        promoter, rec, metrics, _ = make()
        rec.block.add("acquire_lease")  # hold the first caller inside the sequence
        results = []
        first = threading.Thread(target=lambda: results.append(promoter.promote()))
        first.start()
        try:
            _wait_until(lambda: "acquire_lease" in rec.calls)
            others = [
                threading.Thread(target=lambda: results.append(promoter.promote()))
                for _ in range(4)
            ]
            for t in others:
                t.start()
            for t in others:
                t.join(10)
            assert [r.reason for r in results] == [AbortReason.ALREADY_PROMOTING] * 4
            assert not promoter.fence.is_open()  # the latch keeps it shut
        finally:
            rec.release.set()
            first.join(10)
        assert results[-1].promoted
        assert rec.calls.count("stop_mirror") == 1 and rec.calls.count("publish") == 1
        assert metrics.failovers() == 1
        assert metrics.aborts("already_promoting") == 4


def test_bounded_mirror_stop() -> None:
    promoter, rec, _metrics, tracker = make(grace=0.3)
    rec.block.add("stop_mirror")  # a mirror that never confirms it stopped
    try:
        result = promoter.promote()
        assert result.reason is AbortReason.MIRROR_NOT_STOPPED
        assert not promoter.fence.is_open()
        assert not promoter.promoting  # the latch was released: the next tick may retry
        assert tracker.is_candidate(NOW, 10)
    finally:
        rec.release.set()


@pytest.mark.parametrize("step", ["publish", "kick", "event"])
def test_bounded_post_fence_hooks(step: str) -> None:
    promoter, rec, _metrics, _ = make(grace=0.3)
    rec.block.add(step)  # a hook that never returns
    try:
        result = promoter.promote()
        assert result.promoted and step in result.failed_steps
        assert promoter.fence.is_open()
        assert not promoter.promoting
    finally:
        rec.release.set()


def test_refuses_without_a_remote_client() -> None:
    promoter, rec, metrics, _ = make(read_remote=None)
    result = promoter.promote()
    assert result.reason is AbortReason.NO_REMOTE_CLIENT
    assert rec.calls == ["event"]
    assert not promoter.fence.is_open()
    assert metrics.aborts("no_remote_client") == 1


def test_metric_names_as_exposed() -> None:
    registry = CollectorRegistry()
    promoter, *_ = make()
    promoter.metrics = HubMetrics(registry)
    promoter.read_remote = lambda: LIVE
    promoter.promote()
    promoter.read_remote = lambda: STALE
    promoter.promote()
    text = generate_latest(registry).decode()
    assert "ha_failover_total 1.0" in text
    assert 'ha_promotions_aborted_total{reason="lease_live"} 1.0' in text


def test_next_epoch_exceeds_both_sides() -> None:
    assert next_epoch(0) == 1
    assert next_epoch(41, 7) == 42
    assert next_epoch(3, 9) == 10


def _raises(error: BaseException) -> Callable[[], object]:
    def fail() -> object:
        raise error

    return fail


def _wait_until(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    done = threading.Event()
    for _ in range(int(timeout / 0.01)):
        if predicate():
            return
        done.wait(0.01)
    raise AssertionError("condition not reached")


STEPS = ("stop_mirror", "acquire_lease", "claim_epoch", "publish", "kick", "event")
FATAL = {"stop_mirror": AbortReason.MIRROR_NOT_STOPPED,
         "acquire_lease": AbortReason.LEASE_ACQUIRE_FAILED,
         "claim_epoch": AbortReason.EPOCH_NOT_SET}  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(
    failing=st.sets(st.sampled_from(STEPS)),
    self_error=st.sampled_from([None, 404, 403, 500, 503]),
    remote=st.sampled_from(["stale", "live", "unreachable"]),
)
def test_sequence_invariants(failing: set[str], self_error: int | None, remote: str) -> None:
    reads = {"stale": lambda: STALE, "live": lambda: LIVE,
             "unreachable": _raises(TimeoutError("no answer"))}  # fmt: skip
    check = (lambda: None) if self_error is None else _raises(ApiException(status=self_error))
    promoter, rec, metrics, tracker = make(read_remote=reads[remote], check_self=check)
    rec.fail.update(failing)
    result = promoter.promote()

    guards_pass = (self_error is None or self_error < 500) and remote != "live"
    first_fatal = next((s for s in STEPS if s in failing and s in FATAL), None)
    assert result.promoted == (guards_pass and first_fatal is None)
    # The fence is open exactly when promotion succeeded.
    assert promoter.fence.is_open() == result.promoted
    assert metrics.failovers() == (1 if result.promoted else 0)
    # Steps only ever run in the canonical order, each at most once.
    ran = [c for c in rec.calls if c in STEPS and c != "event"]
    assert ran == [s for s in STEPS if s in ran]
    # Nothing that needs an open fence ran before it, and a shut fence saw no kick.
    assert ("kick" in rec.calls) == result.promoted
    if result.promoted:
        assert rec.fence_seen["kick"] and not rec.fence_seen["publish"]
        assert set(result.failed_steps) == failing & {"publish", "kick", "event"}
    elif guards_pass:
        assert result.reason is FATAL[first_fatal]
        assert "resume_mirror" in rec.calls  # the Standby keeps mirroring
        assert ("release_lease" in rec.calls) == (first_fatal == "claim_epoch")
    else:
        assert not any(s in rec.calls for s in STEPS[:-1])
    # An abort never disarms.
    assert tracker.snapshot().retained is not None

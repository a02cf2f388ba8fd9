"""The elector against collaborator fakes (manual clock, in-memory Lease with CAS).

The same behaviours run against the local API server in test_replicas.py; here a manual
clock lets a hypothesis search interleavings, slow and lost requests for a safety breach.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from controller.election.elector import (
    EPOCH_RAISED,
    GRACEFUL_SHUTDOWN,
    LEASE_TAKEN,
    RECHECK_POLL_SECONDS,
    RENEW_DEADLINE,
    Attempt,
    ElectionCallbacks,
    LeaderElector,
)
from controller.election.term import Term
from controller.election.timing import ElectionTiming
from tests.election.fakes import FakeClock, FakeLeaseStore

pytestmark = pytest.mark.timeout(60)

TIMING = ElectionTiming(lease_duration=2.0, renew_deadline=1.5, retry_period=0.3)


class Recorder:
    def __init__(self) -> None:
        self.started: list[Term] = []
        self.stopped: list[tuple[Term, str, float]] = []
        self.leaders: list[str] = []

    def callbacks(self, clock: FakeClock) -> ElectionCallbacks:
        return ElectionCallbacks(
            on_started_leading=self.started.append,
            on_stopped_leading=lambda t, r: self.stopped.append((t, r, clock.now)),
            on_new_leader=self.leaders.append,
        )


def elector(store: FakeLeaseStore, clock: FakeClock, name: str, rec: Recorder) -> LeaderElector:
    return LeaderElector(
        store, name, TIMING, clock=clock, callbacks=rec.callbacks(clock), jitter=0.0
    )


def test_acquire_renew_and_graceful_release() -> None:
    clock = FakeClock()
    store = FakeLeaseStore(clock)
    rec = Recorder()
    a = elector(store, clock, "a", rec)
    stop = threading.Event()
    calls = itertools.count()

    def fates() -> tuple[float, float, str]:
        if next(calls) == 8:
            stop.set()  # graceful stop after a few renewals
        return (0.01, 0.01, "ok")

    store.fates = fates
    assert a.run(stop) == GRACEFUL_SHUTDOWN
    assert [t.token.epoch for t in rec.started] == [1]
    assert rec.stopped[0][1] == GRACEFUL_SHUTDOWN
    assert store.record is not None
    assert store.record.released and store.record.epoch == 1  # released, epoch kept
    renewals = [r for _, r in store.writes if r.holder == "a"]
    assert len(renewals) >= 3
    assert {r.epoch for r in renewals} == {1}  # renewals never bump the epoch


def test_follower_waits_for_the_full_duration_from_its_own_observation() -> None:
    clock = FakeClock()
    store = FakeLeaseStore(clock)
    rec_a, rec_b = Recorder(), Recorder()
    a, b = elector(store, clock, "a", rec_a), elector(store, clock, "b", rec_b)
    assert a.try_acquire_or_renew() is Attempt.ACQUIRED
    # a dies here. b first sees the record 1 s later, and must wait 2 s from then.
    clock.advance(1.0)
    first_seen = clock.now
    assert b.try_acquire_or_renew() is Attempt.HELD
    clock.advance(1.99)
    assert b.try_acquire_or_renew() is Attempt.HELD
    clock.advance(0.01)
    assert clock.now >= first_seen + 2.0
    assert b.try_acquire_or_renew() is Attempt.ACQUIRED
    assert b.term is not None and b.term.token.epoch == 2
    assert rec_b.leaders == ["a", "b"]


def test_lost_lease_ends_work_at_the_renew_deadline_and_reelects_with_a_new_epoch() -> None:
    clock = FakeClock()
    store = FakeLeaseStore(clock)
    rec = Recorder()
    a = elector(store, clock, "a", rec)
    assert a.try_acquire_or_renew() is Attempt.ACQUIRED
    term = a.term
    assert term is not None
    last_write_sent = clock.now
    store.fates = lambda: (0.0, 0.0, "down")  # API server black-holed
    assert a.run(threading.Event()) == RENEW_DEADLINE
    _, reason, ended_at = rec.stopped[-1]
    assert reason == RENEW_DEADLINE
    assert not term.is_valid()
    # Work stopped before the lease could expire in anyone else's eyes.
    assert ended_at < last_write_sent + TIMING.lease_duration
    # The API comes back: the same identity takes the lease again as a new term.
    store.fates = lambda: (0.0, 0.0, "ok")
    assert a.try_acquire_or_renew() is Attempt.ACQUIRED
    assert a.term is not None and a.term.token.epoch == 2


def test_the_earliest_takeover_comes_after_the_crashed_leaders_deadline() -> None:
    clock = FakeClock()
    store = FakeLeaseStore(clock)
    a, b = elector(store, clock, "a", Recorder()), elector(store, clock, "b", Recorder())
    assert a.try_acquire_or_renew() is Attempt.ACQUIRED
    assert b.try_acquire_or_renew() is Attempt.HELD  # b sees a's write at once
    a_term = a.term
    assert a_term is not None
    # a crashes; b polls in small steps and takes over as soon as it may.
    while b.try_acquire_or_renew() is not Attempt.ACQUIRED:
        clock.advance(0.01)
    assert b.term is not None
    assert b.term.started_at >= a_term.valid_until
    assert b.term.started_at <= a_term.started_at + TIMING.lease_duration + 0.02


def test_leader_notices_a_takeover_at_its_next_renewal() -> None:
    clock = FakeClock()
    store = FakeLeaseStore(clock)
    rec = Recorder()
    a, b = elector(store, clock, "a", rec), elector(store, clock, "b", rec)
    assert a.try_acquire_or_renew() is Attempt.ACQUIRED
    clock.advance(3.0)  # a starved longer than the lease; b takes over
    assert b.try_acquire_or_renew() is Attempt.HELD
    clock.advance(2.0)
    assert b.try_acquire_or_renew() is Attempt.ACQUIRED
    assert a.term is not None and not a.term.is_valid()  # a's own clock already says so
    assert a.try_acquire_or_renew() is Attempt.FAILED


def test_a_raised_epoch_ends_the_term_at_once_on_recheck() -> None:
    """The hub's promotion raises the epoch on our own Lease and asks for a recheck: the
    term ends within one recheck poll (not a retry period later), as EPOCH_RAISED, and the
    next term starts above the raised epoch."""
    clock = FakeClock()
    store = FakeLeaseStore(clock)
    rec = Recorder()
    timing = ElectionTiming(lease_duration=30.0, renew_deadline=20.0, retry_period=5.0)
    a = LeaderElector(store, "a", timing, clock=clock, callbacks=rec.callbacks(clock), jitter=0)
    assert a.try_acquire_or_renew() is Attempt.ACQUIRED
    claimed_at: list[float] = []

    def fates() -> tuple[float, float, str]:
        if not claimed_at and clock.now > 1012.0:  # between two renewals
            assert store.record is not None
            store._store(replace(store.record, epoch=41))  # what EpochClaim writes
            claimed_at.append(clock.now)
            a.recheck()
        return (0.01, 0.01, "ok")

    store.fates = fates
    assert a.run(threading.Event()) == EPOCH_RAISED
    _, reason, ended_at = rec.stopped[-1]
    assert reason == EPOCH_RAISED
    # The renewal in flight conflicts; the recheck skips the retry wait.
    assert ended_at - claimed_at[0] < RECHECK_POLL_SECONDS + 0.1
    assert a.try_acquire_or_renew() is Attempt.ACQUIRED
    assert a.term is not None and a.term.token.epoch == 42


def test_without_recheck_the_pause_is_a_full_retry_period() -> None:
    clock = FakeClock()
    a = LeaderElector(FakeLeaseStore(clock), "a", TIMING, clock=clock, jitter=0)
    started = clock.now
    assert a._pause(threading.Event(), 0.3) is False
    assert clock.now - started == pytest.approx(0.3)
    a.recheck()
    started = clock.now
    assert a._pause(threading.Event(), 0.3) is False
    assert clock.now == started  # a pending recheck returns at once, and is consumed
    assert a._pause(threading.Event(), 0.3) is False
    assert clock.now - started == pytest.approx(0.3)


# Delays and clock steps favour zero and small values, where the margins are tightest.
delays = st.one_of(st.just(0.0), st.sampled_from([0.01, 0.1, 0.3]), st.floats(0.0, 0.4))
fates = st.tuples(
    delays,
    delays,
    st.sampled_from(["ok"] * 8 + ["lost", "down"]),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(2, 3),
    call_fates=st.lists(fates, min_size=1, max_size=40),
    steps=st.lists(
        st.tuples(
            st.sampled_from(["attempt"] * 8 + ["stop", "crash"]),
            st.integers(0, 2),
            st.one_of(st.just(0.0), st.sampled_from([0.05, 0.1, 0.3]), st.floats(0.0, 0.7)),
        ),
        min_size=30,
        max_size=200,
    ),
)
def test_no_two_terms_overlap_and_epochs_increase(
    n: int, call_fates: list[tuple[float, float, str]], steps: list[tuple[str, int, float]]
) -> None:
    """Random schedules of n replicas (attempts, graceful stops, crashes, clock advances,
    slow, lost and failed requests): whenever a term starts, every earlier term can no
    longer act by its holder's own clock, and epochs strictly increase.

    (Deleting the Lease is outside this model: a replica that never saw it cannot know
    its epoch; replicas that saw it keep a floor and wait it out, see test_decisions.)"""
    clock = FakeClock()
    store = FakeLeaseStore(clock)
    cycle = itertools.cycle(call_fates)
    store.fates = lambda: next(cycle)
    electors = [elector(store, clock, f"r{i}", Recorder()) for i in range(n)]
    alive = [True] * n
    seen: list[Term] = []
    for action, index, dt in steps:
        i = index % n
        e = electors[i]
        if alive[i] and action == "crash":
            alive[i] = False  # stops acting without releasing
        elif alive[i] and action == "stop":
            e.end_term(GRACEFUL_SHUTDOWN)
        elif alive[i]:
            term = e.term
            if term is not None and not term.is_valid():
                e.end_term(RENEW_DEADLINE)
            elif e.try_acquire_or_renew() is Attempt.HELD and e.term is not None:
                e.end_term(LEASE_TAKEN)
            if e.term is not None and all(e.term is not t for t in seen):
                seen.append(e.term)
        clock.advance(dt)

    terms = sorted(seen, key=lambda t: t.started_at)
    epochs = [t.token.epoch for t in terms]
    event(f"terms: {min(len(terms), 4)}")
    assert epochs == sorted(set(epochs)), "every term has a new, higher epoch"
    for earlier, later in itertools.pairwise(terms):
        # When could `earlier` still act? Until its renew deadline, or until it ended.
        end = earlier.valid_until
        if earlier.ended_at is not None:
            end = min(end, earlier.ended_at)
        assert later.started_at >= end, f"{earlier} could act while {later} started"


@given(
    st.lists(
        st.tuples(st.integers(0, 12), st.sampled_from([(2.0, 1.5, 0.3), (12.0, 9.0, 1.0)])),
        min_size=1,
        max_size=4,
    )
)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_timings_changed_at_any_moment_never_outlast_the_written_lease(
    changes: list[tuple[int, tuple[float, float, float]]],
) -> None:
    """Issue 15, 2.12: timings follow the template config while the elector runs. Whatever
    request a change lands in, a term's validity never outlasts the leaseDuration written
    by the write that extended it (followers judge by that duration)."""
    clock = FakeClock()
    store = FakeLeaseStore(clock)
    a = elector(store, clock, "a", Recorder())
    at = {call: ElectionTiming(*timing) for call, timing in changes}
    calls = itertools.count()

    def fates() -> tuple[float, float, str]:
        timing = at.get(next(calls))
        if timing is not None:
            a.set_timing(timing)  # lands while the request is in flight
        return (0.01, 0.01, "ok")

    store.fates = fates
    for _ in range(14):
        a.try_acquire_or_renew()
        term = a.term
        if term is not None and store.writes:
            applied_at, record = store.writes[-1]
            assert term.valid_until < applied_at + record.lease_duration_seconds
        clock.advance(0.2)

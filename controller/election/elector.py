"""The elector: one election round (acquire, lead and renew, end) on a Lease.

Modelled on client-go's LeaderElector, with what it lacks here: a fencing epoch bumped once
per term, monotonic deadlines throughout, release on graceful stop, and a Term handle whose
validity ends by the clock at the renew deadline.
"""

from __future__ import annotations

import enum
import logging
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from controller.election import decisions
from controller.election.clock import SYSTEM_CLOCK, Clock
from controller.election.decisions import Action, Observation
from controller.election.events import (
    BECAME_LEADER,
    LEADER_ELECTION_STARTED,
    LOST_LEADERSHIP,
    NEW_LEADER_OBSERVED,
)
from controller.election.lease_store import LeaseConflict, LeaseStore, LeaseUnavailable
from controller.election.metrics import ElectionMetrics
from controller.election.record import InvalidEpoch, LeaseRecord
from controller.election.term import FencingToken, Term
from controller.election.timing import ElectionTiming

log = logging.getLogger(__name__)

# Reasons a term ends (LostLeadership event, on_stopped_leading).
GRACEFUL_SHUTDOWN = "graceful_shutdown"
RENEW_DEADLINE = "renew_deadline_exceeded"
LEASE_TAKEN = "lease_taken"
# The Lease still names us, at a higher epoch than our term's: the epoch floor was raised
# (a promoted cross-cluster Standby does so). Our term is over; a new one may start at once.
EPOCH_RAISED = "epoch_raised"
ELECTOR_ERROR = "elector_error"
# How often a wait between attempts looks for a `recheck()` request.
RECHECK_POLL_SECONDS = 0.1


class EventSink(Protocol):
    def record(self, reason: str, message: str, type_: str = "Normal") -> None: ...


@dataclass
class ElectionCallbacks:
    """In-process hooks. They run on the elector thread and must return promptly: a slow
    hook delays renewals. on_stopped_leading must stop leader work before it returns."""

    on_started_leading: Callable[[Term], None] | None = None
    on_stopped_leading: Callable[[Term, str], None] | None = None
    on_new_leader: Callable[[str], None] | None = None


class Attempt(enum.Enum):
    ACQUIRED = "acquired"
    RENEWED = "renewed"
    HELD = "held"  # someone else holds it (for a leader: our term is over)
    FAILED = "failed"  # conflict, timeout or unreadable lease: try again


class LeaderElector:
    def __init__(
        self,
        store: LeaseStore,
        identity: str,
        timing: ElectionTiming = ElectionTiming(),
        *,
        callbacks: ElectionCallbacks | None = None,
        clock: Clock = SYSTEM_CLOCK,
        metrics: ElectionMetrics | None = None,
        events: EventSink | None = None,
        jitter: float = 0.2,
        release_timeout: float = 2.0,
    ):
        self.store = store
        self.identity = identity
        self.timing = timing
        self.callbacks = callbacks or ElectionCallbacks()
        self.clock = clock
        self.metrics = metrics
        self.events = events
        # client-go jitters followers' retries by up to 120 %; a smaller jitter keeps the
        # crash failover bound close to leaseDuration + retryPeriod.
        self.jitter = jitter
        self.release_timeout = release_timeout
        self._observation: Observation | None = None
        self._term: Term | None = None
        self._leader_seen: str | None = None
        self._accounted_at: float | None = None
        self._must_read = True
        self._highest_epoch = 0
        self._recheck = threading.Event()

    # -- state -------------------------------------------------------------------------

    @property
    def term(self) -> Term | None:
        """The term this replica holds, if any (check `is_valid()` before acting on it)."""
        return self._term

    def is_leader(self) -> bool:
        term = self._term
        return term is not None and term.is_valid()

    @property
    def observed_leader(self) -> str | None:
        return self._leader_seen

    def recheck(self) -> None:
        """Read the Lease and act on it now instead of at the next retry period: something
        outside the elector changed it (the hub's epoch claim at promotion)."""
        self._must_read = True
        self._recheck.set()

    def notice_lease(self, watched: LeaseRecord | None) -> None:
        """The Lease as its watch just saw it (None: deleted), from the watch's thread. Acts
        at once when the term on it changed (decisions.wakes_elector): a follower takes a
        released Lease without waiting out its retry period."""
        term = self._term
        my_epoch = term.token.epoch if term is not None else None
        if decisions.wakes_elector(self.identity, my_epoch, self._observation, watched):
            self.recheck()

    def _pause(self, stop: threading.Event, timeout: float) -> bool:
        """Wait up to `timeout` between attempts; end early on `recheck()`. True if stopped."""
        deadline = self.clock.monotonic() + timeout
        while not self._recheck.is_set():
            left = deadline - self.clock.monotonic()
            if left <= 0:
                return stop.is_set()
            if self.clock.wait(stop, min(left, RECHECK_POLL_SECONDS)):
                return True
        self._recheck.clear()
        return stop.is_set()

    # -- one attempt (client-go's tryAcquireOrRenew) -----------------------------------

    def set_timing(self, timing: ElectionTiming) -> None:
        """Follow new timings (the template config changed) without a restart. Safe at any
        moment: each attempt works from one snapshot, so the leaseDuration a write records
        and the renew deadline that write extends the term by always belong together, and
        followers judge a Lease by the duration its holder recorded."""
        if timing != self.timing:
            log.info("%s: election timings now %s", self.identity, timing)
            self.timing = timing

    def try_acquire_or_renew(self) -> Attempt:
        timing = self.timing  # one snapshot per attempt (see set_timing)
        term = self._term
        now = self.clock.monotonic()
        if term is not None:
            budget = term.valid_until - now
            if budget <= 0:
                return Attempt.FAILED
        else:
            budget = timing.renew_deadline
        deadline = now + budget

        record = self._renewable_record(term)
        if record is None:
            try:
                read = self.store.get(timeout=deadline - self.clock.monotonic())
            except (LeaseUnavailable, InvalidEpoch) as exc:
                log.warning("%s: cannot read lease: %s", self.identity, exc)
                return Attempt.FAILED
            self._observe(read, self.clock.monotonic())
        observation = self._observation
        assert observation is not None
        decision = decisions.decide(
            self.identity,
            term.token.epoch if term is not None else None,
            observation,
            self.clock.monotonic(),
            self.clock.wall(),
            timing.lease_duration_seconds,
            epoch_floor=self._highest_epoch,
        )
        if decision.action is Action.WAIT:
            return Attempt.HELD
        if term is not None and decision.action is not Action.RENEW:
            return Attempt.HELD  # the Lease moved on to another holder or epoch
        assert decision.record is not None

        sent_at = self.clock.monotonic()
        try:
            if decision.action is Action.CREATE:
                written = self.store.create(decision.record, timeout=deadline - sent_at)
            else:
                written = self.store.update(decision.record, timeout=deadline - sent_at)
        except LeaseConflict as exc:
            log.info("%s: lost the race to write the lease: %s", self.identity, exc)
            self._stale()
            return Attempt.FAILED
        except (LeaseUnavailable, InvalidEpoch) as exc:
            log.warning("%s: cannot write lease: %s", self.identity, exc)
            self._stale()
            return Attempt.FAILED
        self._observe(written, self.clock.monotonic())
        valid_until = decisions.term_valid_until(sent_at, timing.renew_deadline)
        if decision.action is Action.RENEW:
            assert term is not None
            term.extend(valid_until)
            return Attempt.RENEWED
        token = FencingToken.of(self.identity, written.epoch, self.store.name, self.store.namespace)
        self._term = Term(token, valid_until, self.clock)
        return Attempt.ACQUIRED

    def _renewable_record(self, term: Term | None) -> LeaseRecord | None:
        # A leader renews from the record it last wrote and skips the read; if anything
        # else wrote the Lease since, the compare-and-swap fails and the next attempt reads.
        observation = self._observation
        if term is None or self._must_read or observation is None or observation.record is None:
            return None
        record = observation.record
        if record.holder == self.identity and record.epoch == term.token.epoch:
            return record
        return None

    def _stale(self) -> None:
        # After a failed write our copy may be outdated: read before the next write (the
        # observation, and so the expiry clock of the record, is kept).
        self._must_read = True

    def _observe(self, record: LeaseRecord | None, now: float) -> None:
        self._must_read = False
        self._observation = decisions.observe(self._observation, record, now)
        if record is not None:
            self._highest_epoch = max(self._highest_epoch, record.epoch)
        holder = record.holder if record is not None else ""
        if holder and holder != self._leader_seen:
            self._leader_seen = holder
            log.info("%s: observed leader %s", self.identity, holder)
            if self.callbacks.on_new_leader is not None:
                self._safely(self.callbacks.on_new_leader, holder)
            if holder != self.identity and self.events is not None:
                self.events.record(
                    NEW_LEADER_OBSERVED, f"{self.identity} observed new leader {holder}"
                )

    # -- a round: acquire, lead, end -------------------------------------------------

    def election_started(self) -> None:
        """Report that this replica begins to compete (seed 003's LeaderElectionStarted:
        identity, Lease name and namespace), once per process, before the first round."""
        where = f"{self.store.namespace}/{self.store.name}"
        log.info("%s: leader election started on lease %s", self.identity, where)
        if self.events is not None:
            self.events.record(
                LEADER_ELECTION_STARTED, f"{self.identity} started leader election on {where}"
            )

    def run(self, stop: threading.Event) -> str:
        """Run one election round; returns why it ended ("stopped" if never leader)."""
        while self._term is None:
            if stop.is_set():
                return "stopped"
            if self.try_acquire_or_renew() is Attempt.ACQUIRED:
                break
            self._pause(stop, self._jittered(self.timing.retry_period))
        term = self._term
        assert term is not None
        reason = ELECTOR_ERROR
        try:
            self._became_leader(term)
            reason = self._renew_until_lost(stop, term)
        finally:
            self._end_term(term, reason)
        return reason

    def _renew_until_lost(self, stop: threading.Event, term: Term) -> str:
        while True:
            if self._pause(stop, self.timing.retry_period):
                return GRACEFUL_SHUTDOWN
            while True:
                if stop.is_set():
                    return GRACEFUL_SHUTDOWN
                left = term.valid_until - self.clock.monotonic()
                if left <= 0:
                    return RENEW_DEADLINE
                result = self.try_acquire_or_renew()
                if result is Attempt.RENEWED:
                    self._account_time()
                    break
                if result is Attempt.HELD:
                    return EPOCH_RAISED if self._names_me() else LEASE_TAKEN
                left = term.valid_until - self.clock.monotonic()
                if left > 0 and self._pause(stop, min(self.timing.retry_period, left)):
                    return GRACEFUL_SHUTDOWN

    def _names_me(self) -> bool:
        observation = self._observation
        record = observation.record if observation is not None else None
        return record is not None and record.holder == self.identity

    def _became_leader(self, term: Term) -> None:
        log.info("%s: became leader (epoch %d)", self.identity, term.token.epoch)
        self._accounted_at = self.clock.monotonic()
        if self.metrics is not None:
            self.metrics.is_leader.set(1)
            self.metrics.transitions.inc()
        if self.events is not None:
            self.events.record(
                BECAME_LEADER, f"{self.identity} became leader (epoch {term.token.epoch})"
            )
        if self.callbacks.on_started_leading is not None:
            self._safely(self.callbacks.on_started_leading, term)

    def end_term(self, reason: str) -> None:
        """End the term this replica holds, if any (its work stops; released if graceful).
        Call it from the thread that runs the rounds (or when no round runs)."""
        term = self._term
        if term is not None:
            self._end_term(term, reason)

    def _end_term(self, term: Term, reason: str) -> None:
        # Stop the work first (under the term), then give the lease up: the next leader
        # must not start while this one still acts.
        if not term.end(reason):
            return  # already ended (end_term() raced the round)
        log.warning("%s: leadership ended (epoch %d): %s", self.identity, term.token.epoch, reason)
        if self.callbacks.on_stopped_leading is not None:
            self._safely(self.callbacks.on_stopped_leading, term, reason)
        self._account_time()
        self._accounted_at = None
        if self.metrics is not None:
            self.metrics.is_leader.set(0)
            self.metrics.transitions.inc()
        if reason == GRACEFUL_SHUTDOWN:
            self._release(term)
        self._term = None
        if self.events is not None:
            self.events.record(
                LOST_LEADERSHIP,
                f"{self.identity} stopped leading (epoch {term.token.epoch}): {reason}",
                "Normal" if reason == GRACEFUL_SHUTDOWN else "Warning",
            )

    def _release(self, term: Term) -> None:
        """Clear the holder so others acquire at once; keep the epoch (it only grows)."""
        deadline = self.clock.monotonic() + self.release_timeout
        for _ in range(2):
            record = self._observation.record if self._observation is not None else None
            if record is None or self._must_read:
                try:
                    record = self.store.get(timeout=deadline - self.clock.monotonic())
                except (LeaseUnavailable, InvalidEpoch) as exc:
                    log.warning("%s: cannot release lease: %s", self.identity, exc)
                    return
                self._observe(record, self.clock.monotonic())
            if record is None or record.holder != self.identity:
                return
            if record.epoch != term.token.epoch:
                return
            released = decisions.release_record(record, self.clock.wall())
            try:
                written = self.store.update(released, timeout=deadline - self.clock.monotonic())
            except LeaseConflict:
                self._must_read = True
                continue
            except LeaseUnavailable as exc:
                log.warning("%s: cannot release lease: %s", self.identity, exc)
                return
            self._observe(written, self.clock.monotonic())
            log.info("%s: released lease (epoch %d)", self.identity, term.token.epoch)
            return

    def _account_time(self) -> None:
        now = self.clock.monotonic()
        if self._accounted_at is not None and self.metrics is not None:
            self.metrics.time_as_leader.inc(max(0.0, now - self._accounted_at))
        if self._accounted_at is not None:
            self._accounted_at = now

    def _jittered(self, period: float) -> float:
        return period * (1.0 + self.jitter * random.random())

    def _safely(self, fn: Callable[..., object], *args: object) -> None:
        try:
            fn(*args)
        except Exception:
            log.exception("%s: election callback %r failed", self.identity, fn)

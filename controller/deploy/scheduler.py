"""The deployment scheduler as a pure state machine (no threads, no clock of its own).

Back-to-back renders coalesce: while a deployment is in flight, only the newest waiting
output is kept. Dispatches are spaced by a minimum interval. During a graceful drain
(ADR-0033, "Graceful leader stop") nothing but the last dispatched plan is dispatched again.
The driver thread calls `next_action(now)` with a monotonic time and sleeps as told.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Dispatch(Generic[T]):
    plan_id: str
    output: T


@dataclass(frozen=True)
class WaitUntil:
    at: float


@dataclass(frozen=True)
class Idle:
    pass


class DeploymentScheduler(Generic[T]):
    def __init__(self, min_interval: float) -> None:
        if min_interval < 0:
            raise ValueError("min_interval must be >= 0")
        self.min_interval = min_interval
        self._waiting: Dispatch[T] | None = None
        self._in_flight: Dispatch[T] | None = None
        self._last_dispatched: Dispatch[T] | None = None
        self._last_dispatch_at: float | None = None
        self._draining = False
        self.coalesced = 0  # outputs replaced by a newer one before dispatch

    @property
    def in_flight(self) -> Dispatch[T] | None:
        return self._in_flight

    @property
    def last_dispatched(self) -> Dispatch[T] | None:
        return self._last_dispatched

    @property
    def draining(self) -> bool:
        return self._draining

    def submit(self, plan_id: str, output: T) -> bool:
        """Offer a newly validated output. Returns False when the drain refuses it."""
        if self._draining and (
            self._last_dispatched is None or plan_id != self._last_dispatched.plan_id
        ):
            return False
        if self._waiting is not None:
            self.coalesced += 1
        self._waiting = Dispatch(plan_id, output)
        return True

    def next_action(self, now: float) -> Dispatch[T] | WaitUntil | Idle:
        """What to do at monotonic time `now`. A returned Dispatch is now in flight."""
        if self._in_flight is not None or self._waiting is None:
            return Idle()
        if self._last_dispatch_at is not None:
            due = self._last_dispatch_at + self.min_interval
            if now < due:
                return WaitUntil(due)
        dispatch, self._waiting = self._waiting, None
        self._in_flight = dispatch
        self._last_dispatched = dispatch
        self._last_dispatch_at = now
        return dispatch

    def completed(self, plan_id: str) -> None:
        """The in-flight deployment finished (succeeded, failed or timed out)."""
        if self._in_flight is not None and self._in_flight.plan_id == plan_id:
            self._in_flight = None

    def withdraw(self, plan_id: str) -> None:
        """Forget a waiting output (the render gate refused it after it was submitted)."""
        if self._waiting is not None and self._waiting.plan_id == plan_id:
            self._waiting = None

    def begin_drain(self) -> None:
        """From now on dispatch no plan other than the last one dispatched."""
        self._draining = True
        if self._waiting is not None and (
            self._last_dispatched is None or self._waiting.plan_id != self._last_dispatched.plan_id
        ):
            self._waiting = None

    def reset(self) -> None:
        """A new term starts with no candidates (ADR-0033, freshness across terms)."""
        self._waiting = None
        self._in_flight = None
        self._last_dispatched = None
        self._last_dispatch_at = None
        self._draining = False

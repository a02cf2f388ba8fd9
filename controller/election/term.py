"""A leadership term: the fencing token it hands to work, and its live, local validity."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from controller.election.clock import SYSTEM_CLOCK, Clock
from controller.retained import intent


@dataclass(frozen=True)
class FencingToken:
    """Names one term: who holds the Lease and at which epoch (`term`, the one (holder,
    epoch) value type, controller.retained.intent.Term) and which Lease. Tasks carry it as
    a dict."""

    term: intent.Term
    lease_name: str
    namespace: str

    @classmethod
    def of(cls, holder: str, epoch: int, lease_name: str, namespace: str) -> FencingToken:
        return cls(intent.Term(holder, epoch), lease_name, namespace)

    @property
    def holder(self) -> str:
        return self.term.holder

    @property
    def epoch(self) -> int:
        return self.term.epoch

    def to_dict(self) -> dict[str, Any]:
        return {
            "holder": self.holder,
            "epoch": self.epoch,
            "lease_name": self.lease_name,
            "namespace": self.namespace,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FencingToken:
        return cls.of(
            str(data["holder"]), int(data["epoch"]), str(data["lease_name"]), str(data["namespace"])
        )


class Term:
    """The in-process side of a term.

    `is_valid()` is the cheap local check for leader work: the term has not ended and our
    monotonic clock is before the renew deadline of the last successful write. It turns
    false on time alone, even if the elector thread is starved and has not noticed yet.
    """

    def __init__(self, token: FencingToken, valid_until: float, clock: Clock = SYSTEM_CLOCK):
        self.token = token
        self._clock = clock
        self._valid_until = valid_until
        self._ended = threading.Event()
        self._lock = threading.Lock()
        self.end_reason: str | None = None
        self.started_at = clock.monotonic()
        self.ended_at: float | None = None

    @property
    def valid_until(self) -> float:
        return self._valid_until

    def extend(self, valid_until: float) -> None:
        """The validity the latest renewal gives. It replaces the earlier one, even when it
        is shorter: after the timings shrank, the latest write recorded a shorter lease,
        and followers may take over by that one."""
        with self._lock:
            if not self._ended.is_set():
                self._valid_until = valid_until

    def is_valid(self) -> bool:
        return not self._ended.is_set() and self._clock.monotonic() < self._valid_until

    @property
    def ended(self) -> bool:
        return self._ended.is_set()

    def end(self, reason: str) -> bool:
        """Mark the term over; True only for the call that ended it."""
        with self._lock:
            if self._ended.is_set():
                return False
            self.end_reason = reason
            self.ended_at = self._clock.monotonic()
            self._ended.set()
            return True

    def wait_ended(self, timeout: float | None = None) -> bool:
        return self._ended.wait(timeout)

    def __repr__(self) -> str:
        state = f"ended: {self.end_reason}" if self.ended else "live"
        return f"<Term {self.token.holder}@{self.token.epoch} {state}>"

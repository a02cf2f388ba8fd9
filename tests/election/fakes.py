"""Collaborator fakes for the pure/elector unit tests: a manual clock and an in-memory Lease
with compare-and-swap. Every behaviour they stand in for is also tested against the local
API server (test_lease_api.py, test_replicas.py)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from controller.election.lease_store import LeaseConflict, LeaseUnavailable
from controller.election.record import LeaseRecord


class FakeClock:
    def __init__(self, start: float = 1000.0):
        self.now = start
        self.epoch_wall = datetime(2026, 1, 1, tzinfo=UTC)

    def monotonic(self) -> float:
        return self.now

    def wall(self) -> datetime:
        return self.epoch_wall + timedelta(seconds=self.now)

    def wait(self, event: threading.Event, timeout: float) -> bool:
        if event.is_set():
            return True
        self.now += max(0.0, timeout)
        return event.is_set()

    def advance(self, seconds: float) -> None:
        self.now += seconds


# A call's fate: (seconds before the server applies it, seconds until the caller hears,
# "ok" | "lost" (applied, response lost) | "down" (never reaches the server)).
Fate = tuple[float, float, str]


class FakeLeaseStore:
    def __init__(self, clock: FakeClock, name: str = "haptic-leader", namespace: str = "haptic"):
        self.clock = clock
        self.name = name
        self.namespace = namespace
        self.record: LeaseRecord | None = None
        self.version = 0
        self.fates: Callable[[], Fate] = lambda: (0.0, 0.0, "ok")
        self.writes: list[tuple[float, LeaseRecord]] = []  # (applied at, record)

    def _call(self, timeout: float, apply: Callable[[], LeaseRecord | None]) -> LeaseRecord | None:
        before, after, outcome = self.fates()
        if outcome == "down" or before >= timeout:
            self.clock.advance(timeout)
            raise LeaseUnavailable("timed out")
        self.clock.advance(before)
        result = apply()
        if outcome == "lost" or before + after >= timeout:
            self.clock.advance(max(0.0, timeout - before))
            raise LeaseUnavailable("response lost")
        self.clock.advance(after)
        return result

    def get(self, timeout: float) -> LeaseRecord | None:
        return self._call(timeout, lambda: self.record)

    def create(self, record: LeaseRecord, timeout: float) -> LeaseRecord:
        def apply() -> LeaseRecord:
            if self.record is not None:
                raise LeaseConflict("exists")
            return self._store(record)

        return self._call(timeout, apply)  # type: ignore[return-value]

    def update(self, record: LeaseRecord, timeout: float) -> LeaseRecord:
        def apply() -> LeaseRecord:
            if self.record is None or self.record.resource_version != record.resource_version:
                raise LeaseConflict("stale resourceVersion")
            return self._store(record)

        return self._call(timeout, apply)  # type: ignore[return-value]

    def _store(self, record: LeaseRecord) -> LeaseRecord:
        self.version += 1
        self.record = replace(record, resource_version=str(self.version))
        self.writes.append((self.clock.now, self.record))
        return self.record

"""Runs election rounds in a thread, one after another, until stopped.

client-go's LeaderElector.Run returns for good once a lease is lost; the controller
supervises it and starts a fresh round in the same process, so the rest of the replica
(watch caches, health endpoints) keeps serving as a follower.
"""

from __future__ import annotations

import logging
import threading
from typing import Protocol

from controller.election.elector import EPOCH_RAISED, GRACEFUL_SHUTDOWN, LeaderElector

log = logging.getLogger(__name__)


class Watch(Protocol):
    """What wakes the elector between retries (controller.election.lease_watch.LeaseWatch)."""

    def start(self) -> object: ...

    def stop(self, timeout: float = 5.0) -> None: ...


class ElectionSupervisor:
    def __init__(self, elector: LeaderElector, name: str | None = None, watch: Watch | None = None):
        self.elector = elector
        self.watch = watch
        self.rounds = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=name or f"elector-{elector.identity}", daemon=True
        )

    def start(self) -> ElectionSupervisor:
        if self.watch is not None:
            self.watch.start()
        self._thread.start()
        return self

    def stop(self, timeout: float | None = None) -> bool:
        """Graceful stop: end the term (stopping leader work), release the Lease, return
        True once the election thread has finished."""
        self._stop.set()
        self._thread.join(timeout)
        if self.watch is not None:
            self.watch.stop()
        return not self._thread.is_alive()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def _run(self) -> None:
        self.elector.election_started()
        while not self._stop.is_set():
            self.rounds += 1
            try:
                reason = self.elector.run(self._stop)
            except Exception:
                # A bug in a round must not end elections in this replica for good.
                log.exception("%s: election round failed", self.elector.identity)
                reason = "error"
            if reason not in ("stopped", GRACEFUL_SHUTDOWN):
                log.info("%s: re-entering election after %s", self.elector.identity, reason)
                # Back off one retry period before competing again, except for a Lease that
                # still names us: there is no one to compete with.
                if reason != EPOCH_RAISED:
                    self._stop.wait(self.elector.timing.retry_period)

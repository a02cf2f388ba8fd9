"""The hub Lease: one per control plane, held by the hub that is Active.

Built from the election package's parts (docs/design/ leader election): the record and its
I/O (`lease_store`), the pure decisions (`decisions`: expiry by this replica's monotonic
clock from when it first saw a record, never by comparing another machine's renewTime with
our wall clock) and the clocks (`clock`). What the hub adds is its loop: an Active acquires
and renews every retry period; when it cannot renew for the renew deadline it stops leading
without exiting and keeps trying. A Standby never runs the loop before promotion: promotion
takes the Lease with `acquire_once` and then starts renewing.

The Standby on the other cluster judges this Lease differently, by its renewTime across
clusters: that one wall-clock rule is `controller.hub.detection.is_lease_stale`.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import replace
from datetime import datetime

from kubernetes import client

from controller.election import decisions
from controller.election.clock import SYSTEM_CLOCK, Clock
from controller.election.decisions import Action, Observation
from controller.election.lease_store import KubeLeaseStore, LeaseConflict, LeaseStore
from controller.election.record import LeaseRecord
from controller.hub.loop import LoopThread

log = logging.getLogger(__name__)


class LeaseHeld(Exception):
    """Another identity holds an unexpired hub Lease."""


class HubElector:
    def __init__(
        self,
        api_client: client.ApiClient,
        *,
        namespace: str,
        name: str,
        identity: str,
        lease_duration: float,
        renew_deadline: float,
        retry_period: float,
        request_timeout: float,
        clock: Clock = SYSTEM_CLOCK,
        store: LeaseStore | None = None,
    ) -> None:
        self.store = store or KubeLeaseStore(api_client, namespace, name)
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_duration_seconds = max(1, int(-(-lease_duration // 1)))
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.request_timeout = request_timeout
        self.clock = clock
        self._observation: Observation | None = None
        self._epoch: int | None = None  # the epoch of the term we hold on the hub Lease
        self._valid_until = 0.0  # monotonic: when that term lapses unless renewed
        self._highest_epoch = 0
        self._loop_thread = LoopThread("hub-elector", self._loop)
        self._lock = threading.Lock()
        self.last_renew_wall: datetime | None = None

    @property
    def uid(self) -> str | None:
        return getattr(self.store, "uid", None)

    def is_leader(self) -> bool:
        # Judged at call time so a renewal blocked on a dead API server cannot extend it.
        return self._epoch is not None and self.clock.monotonic() < self._valid_until

    def try_acquire_or_renew(self) -> bool:
        """One attempt; True when this identity holds the Lease afterwards."""
        with self._lock:
            self._observe(self.store.get(timeout=self.request_timeout))
            observation = self._observation
            assert observation is not None
            wall = self.clock.wall()
            decision = decisions.decide(
                self.identity,
                self._epoch if self.is_leader() else None,
                observation,
                self.clock.monotonic(),
                wall,
                self.lease_duration_seconds,
                epoch_floor=self._highest_epoch,
            )
            if decision.action is Action.WAIT:
                return False
            assert decision.record is not None
            sent_at = self.clock.monotonic()
            try:
                if decision.action is Action.CREATE:
                    written = self.store.create(decision.record, timeout=self.request_timeout)
                else:
                    written = self.store.update(decision.record, timeout=self.request_timeout)
            except LeaseConflict as exc:
                log.info("hub elector: lost the race to write the hub Lease: %s", exc)
                return False
            self._observe(written)
            self._epoch = written.epoch
            self._valid_until = decisions.term_valid_until(sent_at, self.renew_deadline)
            self.last_renew_wall = wall
            return True

    def _observe(self, record: LeaseRecord | None) -> None:
        self._observation = decisions.observe(self._observation, record, self.clock.monotonic())
        if record is not None:
            self._highest_epoch = max(self._highest_epoch, record.epoch)

    def acquire_once(self) -> None:
        """Promotion's step: take the Lease now or raise."""
        if not self.try_acquire_or_renew():
            raise LeaseHeld(f"{self.namespace}/{self.name} is held by another hub")

    def tick(self) -> None:
        try:
            if self.try_acquire_or_renew():
                return
        except Exception as exc:
            log.info("hub elector: renewal failed: %s", exc)
        # Lose leadership after the renew deadline, never exit: the loop keeps trying.
        if self._epoch is not None and not self.is_leader():
            self._epoch = None
            log.warning("hub elector: lost the hub Lease (renew deadline passed)")

    @property
    def running(self) -> bool:
        return self._loop_thread.running

    def start(self) -> None:
        self._loop_thread.start()

    def _loop(self, stop: threading.Event) -> None:
        while not stop.is_set():
            self.tick()
            self.clock.wait(stop, self.retry_period)

    def stop(self, release: bool = True, timeout: float = 10.0) -> None:
        """Stop renewing. `release=False` simulates a killed process (the Lease just ages)."""
        self._loop_thread.stop(timeout)
        was_leading, self._epoch = self._epoch is not None, None
        if release and was_leading:
            try:
                self._release()
            except Exception as exc:
                log.info("hub elector: release failed: %s", exc)

    def _release(self) -> None:
        with self._lock:
            record = self.store.get(timeout=self.request_timeout)
            if record is None or record.holder != self.identity:
                return
            # Only the holder is cleared, unlike `decisions.release_record`: the Standby on
            # the other cluster judges this Lease by renewTime + leaseDurationSeconds, and a
            # graceful stop must not shorten what it sees. Here a released record is free at
            # once anyway (decisions.expires_at).
            self._observe(self.store.update(replace(record, holder=""), self.request_timeout))

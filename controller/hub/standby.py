"""The Standby's poll: read the Active's Lease, let detection judge, hand over to promotion.

The poll itself never changes leadership: it reports candidacy and calls the promoter, whose
guards and latch decide. Every read is bounded, so a black-holed Active costs one dial
timeout per poll and staleness keeps being evaluated on a regular cadence.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

from controller.hub.detection import RemoteLeaseTracker
from controller.hub.guards import attempt
from controller.hub.leases import LeaseView
from controller.hub.loop import LoopThread
from controller.hub.promotion import Promoter, PromotionResult

log = logging.getLogger(__name__)


class StandbyWatcher:
    def __init__(
        self,
        *,
        read_remote: Callable[[], LeaseView],
        read_remote_epoch: Callable[[], int] | None,
        tracker: RemoteLeaseTracker,
        promoter: Promoter,
        poll_interval: float,
        padding_seconds: float,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.read_remote = read_remote
        self.read_remote_epoch = read_remote_epoch
        self.tracker = tracker
        self.promoter = promoter
        self.poll_interval = poll_interval
        self.padding_seconds = padding_seconds
        self.clock = clock
        self.monotonic = monotonic
        self._loop_thread = LoopThread("hub-standby", self._loop)
        self.polls = 0

    def poll_once(self) -> PromotionResult | None:
        view, error = attempt(self.read_remote)
        if view is not None:
            self.tracker.record_success(view, self.monotonic())
            if self.read_remote_epoch is not None:
                # Only after a good read: a dead server would cost a second dial timeout.
                epoch, _ = attempt(self.read_remote_epoch)
                if epoch is not None:
                    self.tracker.record_epoch(epoch)
        else:
            # A failed read keeps the retained view, which keeps aging.
            self.tracker.record_failure()
            log.info("hub standby: Active's Lease unreadable: %s", error)
        self.polls += 1
        if self.tracker.is_candidate(self.clock(), self.padding_seconds):
            return self.promoter.promote()
        return None

    def start(self) -> None:
        self._loop_thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._loop_thread.stop(timeout)

    def _loop(self, stop: threading.Event) -> None:
        while not stop.is_set():
            started = self.monotonic()
            try:
                result = self.poll_once()
            except Exception as exc:  # the loop must outlive any single bad tick
                log.warning("hub standby: poll failed: %s", exc)
                result = None
            if result is not None and result.promoted:
                return
            # Fixed rate: a read that timed out does not push the next poll a whole interval
            # further out, so detection stays within one poll of staleness.
            elapsed = self.monotonic() - started
            stop.wait(max(0.0, self.poll_interval - elapsed))

"""The promotion sequence a Standby runs once detection says the Active is gone (seed 004).

Order is load-bearing:
- the mirror is stopped and confirmed stopped before anything else, so it cannot overwrite
  what the new Active writes (nor prune resurrect what it deletes);
- the fencing epoch is claimed above the Active's last epoch before the fence opens, so
  agents refuse a recovered old Active instead of accepting two writers;
- the reconcile kick comes after the fence opens, because a shut fence drops work.
A latch brackets the whole sequence; while it is held `promoting` is True and the fence is
shut whatever the leadership flag says. Effects are injected as PromotionHooks so this
module depends on none of the mirror, the publisher or the reconcilers.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from controller.hub.bounded import call_bounded
from controller.hub.detection import RemoteLeaseTracker
from controller.hub.fence import WriteFence
from controller.hub.guards import DialVerdict, attempt, final_dial_verdict, self_healthy
from controller.hub.leases import LeaseView
from controller.hub.metrics import HubMetrics

log = logging.getLogger(__name__)

EVENT_PROMOTED = "PromotedToActive"
EVENT_ABORTED = "PromotionAborted"


class AbortReason(enum.Enum):
    SELF_UNHEALTHY = "self_unhealthy"
    LEASE_LIVE = "lease_live"
    ALREADY_PROMOTING = "already_promoting"
    MIRROR_NOT_STOPPED = "mirror_not_stopped"
    LEASE_ACQUIRE_FAILED = "lease_acquire_failed"
    NO_REMOTE_CLIENT = "no_remote_client"
    # Beyond the seed: without an epoch above the Active's, agents would accept both writers.
    EPOCH_NOT_SET = "epoch_not_set"


@dataclass(frozen=True)
class PromotionHooks:
    """Effects outside the promoter. A None hook is skipped (promotion still takes the lead,
    just without the part that hook makes safe or complete)."""

    stop_mirror: Callable[[float], bool] | None = None  # (timeout) -> confirmed stopped
    resume_mirror: Callable[[], None] | None = None  # after an abort that stopped it
    acquire_lease: Callable[[], None] | None = None  # raises when the Lease is not ours
    release_lease: Callable[[], None] | None = None  # after an abort that took it
    claim_epoch: Callable[[int], int] | None = None  # (floor) -> the epoch now claimed
    publish: Callable[[], None] | None = None  # one synchronous status.activeController pass
    kick: Callable[[], None] | None = None  # re-enqueue reconciliation
    emit_event: Callable[[str, str, str], None] | None = None  # (type, reason, message)


@dataclass(frozen=True)
class PromotionResult:
    promoted: bool
    reason: AbortReason | None = None
    already_active: bool = False
    epoch: int | None = None
    failed_steps: tuple[str, ...] = ()  # non-fatal steps that failed (publish, kick, event)
    started_at: datetime | None = None  # the successful attempt began (detection)
    promoted_at: datetime | None = None  # the fence opened


def next_epoch(active_epoch: int, local_epoch: int = 0) -> int:
    """The epoch the promoted side claims: above everything either side has used."""
    return max(active_epoch, local_epoch) + 1


class Promoter:
    def __init__(
        self,
        *,
        fence: WriteFence,
        hooks: PromotionHooks,
        tracker: RemoteLeaseTracker,
        check_self: Callable[[], object],
        read_remote: Callable[[], LeaseView] | None,
        padding_seconds: float,
        dial_timeout: float,
        grace_period: float,
        metrics: HubMetrics,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.fence = fence
        self.hooks = hooks
        self.tracker = tracker
        self.check_self = check_self
        self.read_remote = read_remote
        self.padding_seconds = padding_seconds
        self.dial_timeout = dial_timeout
        self.grace_period = grace_period
        self.metrics = metrics
        self.clock = clock
        self.monotonic = monotonic
        self._latch = threading.Lock()
        self._promoted = False
        self.result: PromotionResult | None = None

    @property
    def promoted(self) -> bool:
        return self._promoted

    @property
    def promoting(self) -> bool:
        return self._latch.locked()

    def promote(self) -> PromotionResult:
        """Run the sequence once. Aborts leave a fenced, still-armed Standby."""
        if self._promoted:
            return PromotionResult(promoted=True, already_active=True, epoch=self._epoch())
        if not self._latch.acquire(blocking=False):
            return self._abort(AbortReason.ALREADY_PROMOTING, "another promotion is running")
        try:
            # Re-check under the latch: two callers may both have passed the first check.
            if self._promoted:
                return PromotionResult(promoted=True, already_active=True, epoch=self._epoch())
            return self._run()
        finally:
            self._latch.release()

    def _epoch(self) -> int | None:
        return self.result.epoch if self.result else None

    def _run(self) -> PromotionResult:
        started_at = self.clock()
        refusal = self._guards()
        if refusal is not None:
            return refusal
        log.warning("hub: promotion sequence starting")
        taken = self._take_over()
        if isinstance(taken, PromotionResult):
            return taken
        return self._complete(taken, started_at)

    def _guards(self) -> PromotionResult | None:
        """Preconditions and guards; an abort result, or None to proceed."""
        read_remote = self.read_remote
        if read_remote is None:
            # No client to the Active: nothing could ever have shown it alive, so nothing
            # can justify concluding it is gone.
            return self._abort(AbortReason.NO_REMOTE_CLIENT, "no client to the Active's cluster")
        # Both reads are bounded by the dial timeout: by the client's own request timeout,
        # and here again so that no client can hold the decision longer.
        _, error = attempt(lambda: call_bounded(self.check_self, self.dial_timeout, "self"))
        if not self_healthy(error):
            return self._abort(AbortReason.SELF_UNHEALTHY, f"own API server: {error}")
        view, error = attempt(lambda: call_bounded(read_remote, self.dial_timeout, "dial"))
        dial = final_dial_verdict(view, error, self.clock(), self.padding_seconds)
        if dial.view is not None:
            self.tracker.record_success(dial.view, self.monotonic())
        else:
            self.tracker.record_failure()
        if dial.verdict is DialVerdict.LIVE:
            return self._abort(AbortReason.LEASE_LIVE, "the Active renewed its Lease")
        return None

    def _take_over(self) -> int | PromotionResult:
        """Steps whose failure aborts: stop the mirror, take the Lease, claim the epoch.
        The claimed epoch, or the abort result (after undoing what was done)."""
        hooks = self.hooks
        if hooks.stop_mirror is not None:
            try:
                stopped = call_bounded(
                    lambda: hooks.stop_mirror(self.grace_period), self.grace_period, "stop-mirror"
                )
                error = None
            except Exception as exc:
                stopped, error = False, exc
            if not stopped:
                # Half-stopped is the very state this step exists to prevent. Resume it: a
                # Standby that stays a Standby must keep mirroring.
                self._best_effort(hooks.resume_mirror, "resume-mirror")
                return self._abort(AbortReason.MIRROR_NOT_STOPPED, f"mirror: {error}")
        if hooks.acquire_lease is not None:
            try:
                call_bounded(hooks.acquire_lease, self.grace_period, "acquire-lease")
            except Exception as exc:
                self._best_effort(hooks.resume_mirror, "resume-mirror")
                return self._abort(AbortReason.LEASE_ACQUIRE_FAILED, f"local Lease: {exc}")
        floor = next_epoch(self.tracker.snapshot().last_epoch)
        if hooks.claim_epoch is None:
            return floor
        try:
            return call_bounded(lambda: hooks.claim_epoch(floor), self.grace_period, "epoch")
        except Exception as exc:
            self._best_effort(hooks.release_lease, "release-lease")
            self._best_effort(hooks.resume_mirror, "resume-mirror")
            return self._abort(AbortReason.EPOCH_NOT_SET, f"epoch {floor}: {exc}")

    def _complete(self, epoch: int, started_at: datetime) -> PromotionResult:
        """Steps whose failure still promotes, each bounded by the grace period."""
        hooks = self.hooks
        failed: list[str] = []
        # A hub that cannot describe itself is a better Active than no Active: the
        # publisher's own loop keeps retrying.
        if not self._best_effort(hooks.publish, "publish"):
            failed.append("publish")
        self.fence.open()
        opened_at = self.clock()
        if not self._best_effort(hooks.kick, "kick"):
            failed.append("kick")
        self.metrics.failover.inc()
        last = self.tracker.snapshot().last_epoch
        message = f"promoted to Active with fencing epoch {epoch} (the Active's last was {last})"
        emit = hooks.emit_event
        if not self._best_effort(
            emit and (lambda: emit("Normal", EVENT_PROMOTED, message)), "event"
        ):
            failed.append("event")
        self.result = PromotionResult(
            promoted=True,
            epoch=epoch,
            failed_steps=tuple(failed),
            started_at=started_at,
            promoted_at=opened_at,
        )
        # Last, so whoever sees `promoted` also sees the result; the latch still excludes
        # every other caller until we return.
        self._promoted = True
        log.warning("hub: %s", message)
        return self.result

    def _best_effort(self, hook: Callable[..., object] | None, name: str) -> bool:
        """Run a bounded step whose failure does not stop promotion. True if it succeeded."""
        if hook is None:
            return True
        try:
            call_bounded(hook, self.grace_period, name)
            return True
        except Exception as exc:
            log.warning("hub: promotion step %s failed: %s", name, exc)
            return False

    def _abort(self, reason: AbortReason, detail: str) -> PromotionResult:
        # A refusal is a correct outcome, not an error: the retained view is kept and the
        # elector stays armed, so the next tick re-evaluates from scratch.
        self.metrics.aborted.labels(reason=reason.value).inc()
        log.warning("hub: promotion aborted (%s): %s", reason.value, detail)
        hook = self.hooks.emit_event
        if hook is not None:
            message = f"promotion aborted: {reason.value}: {detail}"
            self._best_effort(lambda: hook("Warning", EVENT_ABORTED, message), "event")
        return PromotionResult(promoted=False, reason=reason)

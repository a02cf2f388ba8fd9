"""Publisher: the throttled ordinary publication (HAProxyCfg, its children, per-pod status)
and the checkpoints (seed 003's ConfigPublisher; ADR-0033 "Publication", "Graceful leader
stop"; docs/term.md "Receipts are taken, never cleared").

Publication is bounded by the term: before every request the bound re-checks the term
(each write) and the drain's deadline, and caps the request's timeout by what is left, on a
client that never retries, so a hanging API server cannot keep a drain past its bound and
nothing is written once the term has stopped.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, datetime
from typing import Any

from controller.kubeclient import bounded_copy
from controller.publish.checkpoints import CheckpointPublisher, PublicationFailed
from controller.publish.kube import Objects
from controller.publish.ordinary import OrdinaryPublisher
from controller.render import RenderOutput
from controller.retained.receipts import PodReceipt
from controller.term.context import TermContext

log = logging.getLogger(__name__)


class PublicationStopped(Exception):
    """The term stopped or its deadline passed: no further request."""


class Publisher:
    def __init__(self, ctx: TermContext) -> None:
        self.ctx = ctx
        self._client = bounded_copy(ctx.api_client)
        self.objects = Objects(self._client, ctx.template.namespace, bound=self._bound)
        self.ordinary = OrdinaryPublisher(self.objects, ctx.template)
        self.checkpoints = CheckpointPublisher(self.objects, ctx.template, ctx.template.name)
        self.last_publish = 0.0
        self._deadline: float | None = None
        self._closed = False
        self._running = threading.Lock()  # one publication at a time; close() waits on it

    # -- the bound -------------------------------------------------------------------------

    def _bound(self, write: bool) -> float:
        if self._closed:
            raise PublicationStopped("the term has stopped publishing")
        left = float("inf")
        if self._deadline is not None:
            left = self._deadline - time.monotonic()
            if left <= 0:
                raise PublicationStopped("the drain's deadline passed")
        if write:
            self.ctx.check_term()  # raises StaleTerm: a term that lost its Lease writes nothing
        return left

    def set_deadline(self, deadline: float) -> None:
        self._deadline = deadline

    def close(self, deadline: float) -> None:
        """No request starts from now on; wait (until `deadline`) for one in progress."""
        self._closed = True
        if self._running.acquire(timeout=max(0.0, deadline - time.monotonic())):
            self._running.release()
            self._client.close()  # this term's own client; nothing uses it any more

    # -- the loop --------------------------------------------------------------------------

    def run(self, run_publication) -> None:  # type: ignore[no-untyped-def]
        ctx = self.ctx
        ctx.claimed.wait(timeout=30)
        interval = ctx.settings.publish_interval
        while ctx.alive():
            due = self.last_publish + interval
            # The throttle counts from the last publication, so a first receipt goes out
            # at once and later ones at most once per interval.
            if time.monotonic() >= due and ctx.state.has_unpublished():
                self.last_publish = time.monotonic()
                try:
                    run_publication()
                except Exception:
                    log.exception("publication failed")
            ctx.pause(min(1.0, max(0.05, due - time.monotonic())))

    def publish(self, output: RenderOutput | None = None) -> None:
        """Publish the output, the receipts and a checkpoint for every acknowledged output
        with unsaved receipts, `output` last (the newest pointer).

        Held while reconciliation is failing (the publication latch); unsaved receipts stay
        queued and go out once rendering recovers.
        """
        self.last_publish = time.monotonic()
        state = self.ctx.state
        if not state.has_unpublished():
            return
        # The output the intent names (the last one dispatched), never a newer render still
        # waiting for dispatch: the published output must be one the fleet was given
        # (found by the term model, tests/term; docs/term.md).
        output = output or self._intended_output()
        if output is None:
            return  # nothing of this term's was dispatched yet; receipts stay queued
        with self._running:
            self._bound(write=False)
            self.ctx.check_term()
            self._publish_status(self.ordinary.publish_output(output))
            for checksum in sorted(state.unsaved_checksums() - {output.checksum}):
                self._publish_checkpoint(self._output_of(checksum), checksum)
            self._publish_checkpoint(output, output.checksum)

    def _publish_status(self, cfg: dict[str, Any] | None) -> None:
        """Every queued entry, in rounds: a pod with several outcomes since the last
        publication gets one status write per outcome, in order, so the mirror's history
        sees each (status holds one entry per pod). What a failure left unwritten goes
        back. Each round writes on the HAProxyCfg as the last write answered, the first on
        `cfg`, as publish_output left it (Objects.update_status: no read first)."""
        state = self.ctx.state
        status = state.take_status()
        present = [p.name for p in self.ctx.targets()]
        written = 0
        try:
            for written in range(max((len(q) for q in status.values()), default=1)):
                cfg = self.ordinary.publish_receipts(
                    {pod: q[written] for pod, q in status.items() if len(q) > written},
                    present_pods=present,
                    known=cfg,
                )
        except BaseException:
            state.put_back_status({pod: q[written:] for pod, q in status.items()})
            raise

    def _intended_output(self) -> RenderOutput | None:
        state = self.ctx.state
        with state.lock:
            intended = state.intended
        if intended is None:
            return None
        output = self.ctx.plans.get(intended[0])
        if output is None or output.checksum != intended[1] or not state.usable(output):
            return None
        return output

    def _output_of(self, checksum: str) -> RenderOutput | None:
        with self.ctx.state.lock:
            receipts = [r for r in self.ctx.state.unsaved.values() if r.checksum == checksum]
        output = self.ctx.plans.get(receipts[0].applied_plan_id) if receipts else None
        return output if output is not None and output.checksum == checksum else None

    def _publish_checkpoint(self, output: RenderOutput | None, checksum: str) -> None:
        """Checkpoint one acknowledged output with exactly the receipts taken for it; they
        go back if the publication fails."""
        state = self.ctx.state
        receipts: list[PodReceipt] = state.take_unsaved(checksum)
        if not receipts:
            return
        if output is None or not state.usable(output):
            # Neither bytes to checkpoint nor a use for them (forgotten or refused output).
            log.info("receipts for %s dropped: no usable output to checkpoint", checksum)
            return
        try:
            self.checkpoints.publish(
                output.files,
                receipts[0],
                datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                output.plan_id,
            )
        except BaseException as exc:
            state.put_back_unsaved(receipts)
            if not isinstance(exc, PublicationFailed):
                raise
            log.warning("checkpoint publication failed: %s", exc)

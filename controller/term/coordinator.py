"""Coordinator: claim the retained-state Lease, then render and gate (seed 003's leader-only
Coordinator and RenderGate; ADR-0033 "Render gate" and "Freshness across terms";
docs/term.md "The render gate after dispatch", "Reclaim").

The first render of a term waits for the gate's verdict; later ones are dispatched at once
while the gate is optimistic, and a refusal that arrives afterwards (`on_verdict`) withdraws
the output from every use, latches publication, sets the /healthz error, emits an Event and
has the dispatcher revert the pods that took it to their last-known-good.

An EndpointSlice change is patched into the last output instead of rendered in full, with
no gate run, and a periodic full render on a thread of its own checks that both paths give
the same bytes (controller/term/consistency.py; docs/design/incremental.md).
"""

from __future__ import annotations

import logging
import time

from controller.health import RECONCILIATION_COORDINATOR
from controller.metrics import RENDER_DURATION, RENDERS
from controller.publish.ordinary import OrdinaryPublisher
from controller.recovery import attempt_recovery
from controller.render import RenderError, RenderInput, RenderOutput, incremental
from controller.render.engine import render_with_basis
from controller.rendergate import GateVerdict
from controller.term.consistency import ConsistencyChecker, check_interval
from controller.term.context import TermContext
from controller.term.dispatcher import LockedScheduler
from controller.term.host import RecoveryHost

log = logging.getLogger(__name__)

RENDER_FAILED = "RenderFailed"
# The incremental path's chain of updates is checked against a full render this often (or
# less often when a full render is costly: consistency.check_interval), and after this many
# updates at the latest (docs/design/incremental.md).
CONSISTENCY_INTERVAL = 30.0
CONSISTENCY_UPDATES = 1000
ACCEPTED_STRUCTURES = 8


class Coordinator:
    def __init__(
        self,
        ctx: TermContext,
        scheduler: LockedScheduler,
        ordinary: OrdinaryPublisher,
        host: RecoveryHost,
    ) -> None:
        self.ctx = ctx
        self.scheduler = scheduler
        self.ordinary = ordinary
        self.host = host
        self._render_requested = False
        self._requested_at: float | None = None  # earliest request no render served yet
        self._first_render_done = False
        self._optimistic: set[str] = set()  # checksums dispatched before their verdict
        self._recovering = False
        self._recover_again: str | None = None
        # The incremental path (docs/design/incremental.md): the basis of the last output,
        # and the checksum of the last full render the render gate accepted; an update may
        # skip the gate only when its basis descends from that render.
        self._basis: incremental.RenderBasis | None = None
        self._accepted_root: str | None = None
        # Structures (incremental.structure_key) the gate accepted this term: a full render
        # with one of them differs from an accepted output only in server slots' runtime
        # attributes, so that verdict stands and `haproxy -c` does not run again.
        self._accepted_structures: dict[tuple, None] = {}
        self._full_at = time.monotonic()  # the last full render or consistency check
        self._full_cpu = 0.0  # CPU seconds of the last full render on this thread
        self._check_requested = False
        self._checked_updates = 0  # basis.updates at the last consistency check
        self._mismatch = False  # the check found the chain wrong: render in full next
        self.checker = ConsistencyChecker(ctx.alive, self._mismatched)

    @property
    def recovering(self) -> bool:
        """A recovery attempt (with its bounded retries) is running."""
        with self.ctx.wake:
            return self._recovering

    def request_render(self) -> None:
        with self.ctx.wake:
            self._render_requested = True
            if self._requested_at is None:
                self._requested_at = time.monotonic()
            self.ctx.wake.notify_all()

    def run(self) -> None:
        ctx = self.ctx
        try:
            claimed = ctx.store.claim(ctx.term)
        except Exception as exc:  # without a claim this term may not record intents
            log.error("term %s could not claim the retained-state Lease: %s", ctx.term, exc)
            ctx.health.set_error(RECONCILIATION_COORDINATOR, f"claim failed: {exc}")
            return
        # A Reclaim lifted the epoch: act under it at once (issue 15, hole 8).
        ctx.adopt(claimed.term)
        ctx.claimed.set()
        self._seed_from_publication()
        while True:
            with ctx.wake:
                while not (self._render_requested or ctx.stopping):
                    ctx.wake.wait(timeout=1.0)
                    self._render_requested = self._render_requested or self._check_due()
                if ctx.stopping:
                    return
                self._render_requested = False
            if not ctx.term_valid():
                return
            if not ctx.write_fence():
                continue
            self.render_once()

    def _seed_from_publication(self) -> None:
        """Remember the published output: the pods most likely run it, and rendering with it
        as the previous plan keeps endpoints in their server slots, so a leader change alone
        changes (and reloads) nothing; and the published receipts, so a pod proving one of
        them again records no deployment of this term (docs/term.md)."""
        try:
            published = self.ordinary.read_output()
        except Exception as exc:
            log.info("published output not readable (%s); starting without it", exc)
            return
        if published is not None:
            self.ctx.plans.remember(published)
            self.ctx.state.seeded(published)
        try:
            self.ctx.state.seed_proven(self.ordinary.read_receipts())
        except Exception as exc:  # then a re-proof records a deployment: harmless
            log.info("published receipts not readable (%s)", exc)

    def _check_due(self) -> bool:
        """Time for the consistency check: incremental updates were made since the last
        full render, and CONSISTENCY_INTERVAL passed (called with ctx.wake held)."""
        basis = self._basis
        if basis is None or basis.updates == self._checked_updates:
            return False
        due = basis.updates - self._checked_updates >= CONSISTENCY_UPDATES
        cost = max(self._full_cpu, self.checker.render_cpu)
        due = due or time.monotonic() - self._full_at >= check_interval(CONSISTENCY_INTERVAL, cost)
        self._check_requested = self._check_requested or due
        return due

    def render_once(self) -> None:
        ctx, state = self.ctx, self.ctx.state
        kwargs = ctx.snapshot()
        if not kwargs.get("template_config"):
            ctx.health.set_error(RECONCILIATION_COORDINATOR, "HAProxyTemplateConfig not found")
            return
        basis = state.last_good or state.seed
        previous = basis.plan if basis else None
        with ctx.wake:
            requested_at, self._requested_at = self._requested_at, None
            check, self._check_requested = self._check_requested, False
        started = time.monotonic()
        inp = RenderInput(**kwargs, previous_plan=previous)
        step = self._incremental(inp, basis)
        if step is not None:
            self._dispatch_update(step, requested_at or started)
            if check:  # the full render of this very input, on the checker's thread
                with ctx.wake:
                    self._checked_updates = step.basis.updates
                    self._full_at = time.monotonic()
                self.checker.submit(inp, step.output)
            return
        cpu_started = time.thread_time()
        try:
            with RENDER_DURATION.time():
                output, self._basis = render_with_basis(inp)
        except RenderError as exc:
            self._basis = None
            self.render_failed(str(exc))
            return
        RENDERS.labels("full").inc()
        with ctx.wake:
            self._full_cpu = time.thread_time() - cpu_started
            self._full_at = time.monotonic()
            self._checked_updates = 0
        self._gate_and_dispatch(output, requested_at or started)

    def _incremental(
        self, inp: RenderInput, basis_output: RenderOutput | None
    ) -> incremental.Update | None:
        """The incremental step to `inp`, when its basis is the output the term dispatches
        and descends from a render the gate accepted; None: the full render runs."""
        with self.ctx.wake:
            if self._mismatch:  # the consistency check: the chain is wrong, drop it
                self._mismatch, self._basis = False, None
            basis = self._basis
            accepted = basis is not None and basis.root_checksum == self._accepted_root
        if basis is None or not accepted or basis.output is not basis_output:
            return None
        if not self.ctx.state.usable(basis.output):
            return None
        try:
            return incremental.update(basis, inp)
        except Exception:  # a bug here must cost a full render, never the render
            log.exception("incremental update failed; rendering in full")
            return None

    def _mismatched(self) -> None:
        """The consistency check found an incremental output other than its full render's:
        the next render is full, and goes through the gate like any other."""
        with self.ctx.wake:
            self._mismatch = True
        self.request_render()

    def _dispatch_update(self, step: incremental.Update, requested_at: float) -> None:
        """An incremental output: only server slots changed, so the structure (and every
        other file) is the one the gate accepted; no gate run (docs/design/incremental.md)."""
        ctx, previous = self.ctx, self._basis
        self._basis = step.basis
        RENDERS.labels("incremental").inc()
        if previous is not None and step.output is previous.output:
            return  # nothing this output renders changed
        if ctx.report_warnings is not None and step.output.warnings != previous.output.warnings:
            ctx.report_warnings(step.output)
        self._accept_and_dispatch(step.output, requested_at)

    def _gate_and_dispatch(self, output: RenderOutput, requested_at: float) -> None:
        ctx = self.ctx
        if ctx.report_warnings is not None:
            ctx.report_warnings(output)
        key = incremental.structure_key(output)
        with ctx.wake:
            known = key in self._accepted_structures
            if known:
                self._accepted_root = output.checksum
        if known:  # the verdict on this structure stands (never a term's first render)
            self._accept_and_dispatch(output, requested_at)
            return
        first = not self._first_render_done
        verdict = ctx.gate.check_before_dispatch(output, term_first_render=first)
        self._first_render_done = True
        if verdict is not None and not verdict.accepted:
            self.render_failed(f"render gate refused the configuration: {verdict.output}")
            return
        with ctx.wake:
            if verdict is None:
                self._optimistic.add(output.checksum)
            else:
                self._accepted(output)
        self._accept_and_dispatch(output, requested_at)

    def _accepted(self, output: RenderOutput) -> None:
        """The gate accepted `output` (called with ctx.wake held)."""
        self._accepted_root = output.checksum
        self._accepted_structures[incremental.structure_key(output)] = None
        while len(self._accepted_structures) > ACCEPTED_STRUCTURES:
            del self._accepted_structures[next(iter(self._accepted_structures))]

    def _accept_and_dispatch(self, output: RenderOutput, requested_at: float) -> None:
        ctx = self.ctx
        if not ctx.state.accept(output):
            self.render_failed(f"render gate refused the configuration of {output.plan_id}")
            return
        ctx.health.set_error(RECONCILIATION_COORDINATOR, None)
        ctx.plans.remember(output)
        # haptic_convergence_seconds runs from the request this render served.
        ctx.state.converging(output.checksum, requested_at)
        self.scheduler.submit(output.plan_id, output)
        ctx.notify()

    def on_verdict(self, output: RenderOutput, verdict: GateVerdict) -> None:
        """The gate's verdict on a render this term dispatched before knowing it."""
        with self.ctx.wake:
            if output.checksum not in self._optimistic:
                return  # waited for (handled in render_once), or another term's render
            self._optimistic.discard(output.checksum)
            if verdict.accepted:
                self._accepted(output)
        if verdict.accepted or not self.ctx.alive():
            return
        self.ctx.state.refuse(output)
        self.scheduler.withdraw(output.plan_id)
        self.render_failed(
            f"render gate refused the configuration {output.plan_id} after dispatch: "
            f"{verdict.output}"
        )
        self.ctx.notify()  # the dispatcher reverts the pods that took it

    def render_failed(self, message: str) -> None:
        ctx = self.ctx
        log.warning("render failed: %s", message)
        # /healthz keeps the last render error until rendering succeeds; recovery never
        # clears it (ADR-0033).
        ctx.health.set_error(RECONCILIATION_COORDINATOR, message)
        ctx.state.latch()
        ctx.notice("Warning", RENDER_FAILED, message)
        if ctx.state.last_good is None:
            self.recover(message)

    # -- recovery (ADR-0033; controller/recovery.py) -------------------------------------------

    def recover(self, render_error: str) -> None:
        with self.ctx.wake:
            if self._recovering:
                # One attempt (with its bounded retries) at a time; what changed meanwhile
                # (a pod discovered) gets a fresh attempt when this one ends.
                self._recover_again = render_error
                return
            self._recovering = True
        attempt_recovery(self.host, render_error, done=self._recovery_done)

    def _recovery_done(self) -> None:
        with self.ctx.wake:
            self._recovering = False
            again, self._recover_again = self._recover_again, None
        if again is not None and self.ctx.alive() and self.ctx.state.last_good is None:
            self.recover(again)

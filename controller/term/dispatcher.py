"""Dispatcher: the deployment scheduler's driver and everything that sends an output to
pods (seed 003's Deployer, DeploymentScheduler and DriftPreventionMonitor; ADR-0033
"Deployment intent" and "Graceful leader stop"; docs/term.md "The intent names the last
output dispatched").

Every apply goes through `deploy()`, which records the intent whenever the output about to
be applied is not the one the intent names now, then applies; one at a time, so the intent
always names the last output dispatched. Push to new pods, agent repair, drift prevention
and paced-reload follow-ups use `current()`: the accepted output, or during the drain only
the scheduler's last dispatched plan.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from contract import PodAction
from controller.deploy.deployer import PodOutcome
from controller.deploy.scheduler import DeploymentScheduler, Dispatch, Idle, WaitUntil
from controller.fencing import StaleTerm
from controller.metrics import CONVERGENCE, DEPLOY_DURATION, DISPATCH_STEP, count_outcome
from controller.render import RenderOutput
from controller.retained.fleet import PodReport
from controller.retained.receipts import PodReceipt, acknowledgement
from controller.retained.store import IntentRefused
from controller.term.context import TermContext
from controller.term.metrics import RETAINED_CONFIG_ACTIVE

log = logging.getLogger(__name__)

# Agents pace reloads about a second apart; look again a little after that.
RELOAD_FOLLOW_UP_DELAY = 1.2
PUSH_RETRY_DELAY = 0.5
AGENT_CHECK_INTERVAL = 5.0


def summarize_outcomes(outcomes: Sequence[PodOutcome]) -> dict[str, str]:
    """Pod -> what its agent did, `refused: <reason>: <why>` or `failed: <why>`."""
    return {o.pod.name: o.summary for o in outcomes}


def _is_error(summary: str) -> bool:
    """The push to that pod failed or was refused (read from the action its summary names)."""
    action = PodAction.of_summary(summary)
    return action is not None and action.is_error


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class LockedScheduler:
    """The pure DeploymentScheduler behind a lock: the coordinator submits, the dispatcher
    drives, the drain begins draining, each on its own thread."""

    def __init__(self, min_interval: float) -> None:
        self._scheduler: DeploymentScheduler[RenderOutput] = DeploymentScheduler(min_interval)
        self._lock = threading.Lock()
        self._submitted = False  # a submit since the last next_action

    def submit(self, plan_id: str, output: RenderOutput) -> bool:
        with self._lock:
            self._submitted = True
            return self._scheduler.submit(plan_id, output)

    @property
    def submitted(self) -> bool:
        """Something was submitted since the dispatcher last asked: it must not sleep (the
        submitter's wake-up may have come before the dispatcher started waiting)."""
        with self._lock:
            return self._submitted

    def withdraw(self, plan_id: str) -> None:
        with self._lock:
            self._scheduler.withdraw(plan_id)

    def next_action(self, now: float) -> Dispatch[RenderOutput] | WaitUntil | Idle:
        with self._lock:
            self._submitted = False
            return self._scheduler.next_action(now)

    def completed(self, plan_id: str) -> None:
        with self._lock:
            self._scheduler.completed(plan_id)

    def begin_drain(self) -> Dispatch[RenderOutput] | None:
        """Drain from now on; returns the last dispatched plan, the only one still allowed."""
        with self._lock:
            self._scheduler.begin_drain()
            return self._scheduler.last_dispatched

    def reset(self) -> None:
        with self._lock:
            self._scheduler.reset()

    @property
    def in_flight(self) -> Dispatch[RenderOutput] | None:
        with self._lock:
            return self._scheduler.in_flight

    @property
    def last_dispatched(self) -> Dispatch[RenderOutput] | None:
        with self._lock:
            return self._scheduler.last_dispatched

    @property
    def draining(self) -> bool:
        with self._lock:
            return self._scheduler.draining


class Dispatcher:
    def __init__(self, ctx: TermContext, scheduler: LockedScheduler) -> None:
        self.ctx = ctx
        self.scheduler = scheduler
        self._dispatch_lock = threading.Lock()  # an intent and the apply it names, together
        self._pods_changed = False
        self._known_pods: set[str] = set()
        self._follow_up_at: float | None = None
        self._retry_pods_at: float | None = None
        self.last_deploy_at = time.monotonic()
        self._last_agent_check = time.monotonic()

    def pods_changed(self) -> None:
        with self.ctx.wake:
            self._pods_changed = True
            self.ctx.wake.notify_all()

    def current(self) -> RenderOutput | None:
        """What repairs, pushes and follow-ups may send: the accepted output; while
        draining, only the scheduler's last dispatched plan (never a newer render it
        refused); never an output the render gate refused."""
        state = self.ctx.state
        if self.scheduler.draining:
            last = self.scheduler.last_dispatched
            output = last.output if last is not None else None
        else:
            output = state.last_good
        return output if state.usable(output) else None

    # -- the loop ------------------------------------------------------------------------

    def run(self) -> None:
        ctx = self.ctx
        ctx.claimed.wait(timeout=30)
        while ctx.alive():
            self._revert_refused()
            with ctx.wake:
                pods_changed, self._pods_changed = self._pods_changed, False
            now = time.monotonic()
            retry_due = self._retry_pods_at is not None and now >= self._retry_pods_at
            if retry_due:
                self._retry_pods_at = None
            if pods_changed or retry_due:
                self._push_to_new_pods()
            if self._agent_check_due():
                self._check_agents()
            action = self.scheduler.next_action(time.monotonic())
            if isinstance(action, Dispatch):
                self._dispatch(action)
            wait = 1.0
            if self._follow_up_at is not None and time.monotonic() >= self._follow_up_at:
                self._follow_up_paced_reloads()
            if self._follow_up_at is not None:
                wait = max(0.0, self._follow_up_at - time.monotonic())
            if isinstance(action, WaitUntil):
                wait = min(wait, max(0.0, action.at - time.monotonic()))
            elif self._drift_due():
                self._drift_prevention()
            with ctx.wake:
                if not (
                    self._pods_changed
                    or ctx.stopping
                    or ctx.state.reverts
                    or self.scheduler.submitted
                ):
                    ctx.wake.wait(timeout=min(wait, 1.0))

    def _dispatch(self, action: Dispatch[RenderOutput]) -> None:
        self.ctx.plans.dispatched(action.plan_id)  # pods will run it: keep it known
        try:
            assert self.ctx.run_deployment is not None
            results = self.ctx.run_deployment(action.output, None)
            if any(v == "reload_scheduled" for v in results.values()):
                self._follow_up_at = time.monotonic() + RELOAD_FOLLOW_UP_DELAY
        except Exception:
            log.exception("deployment of %s failed", action.plan_id)
        finally:
            self.scheduler.completed(action.plan_id)
            self.ctx.notify()  # a drain may be waiting for this

    # -- deploy: the one path of every apply ------------------------------------------------

    def deploy(
        self,
        output: RenderOutput,
        only: set[str] | None = None,
        verify: bool = False,
        bootstrap_only: bool = False,
    ) -> list[PodOutcome]:
        """Record the intent unless it names `output` already, then apply to every pod.

        `bootstrap_only` is recovery's apply: nothing once a render succeeded, an intent
        record only while the intent still names the output, and the agent refuses a pod
        that is no longer bootstrap. The dispatch lock holds record and apply together, so
        a recovery apply never lands between a render's intent record and its apply, nor
        records over it (ADR-0033). Raises StaleTerm, with nothing recorded or applied,
        when the term's fence refuses (`TermContext.check_term`)."""
        ctx = self.ctx
        if not ctx.write_fence():
            log.info("write fence shut: %s not deployed", output.plan_id)
            return []
        with self._dispatch_lock:
            # The term's fence, proven under the lock right before the side effect: the
            # local term holds and the leader Lease names it, else StaleTerm. An apply that
            # records an intent first has that proof from the record itself, which reads
            # the leader Lease before its write and again after it, right before the apply
            # (ADR-0033): a third read before those would prove nothing more (issue 19).
            records = bootstrap_only or not ctx.state.names(output)
            with DISPATCH_STEP.labels("fence").time():
                if records:
                    ctx.check_local_term()
                else:
                    ctx.check_term()
            if bootstrap_only and ctx.state.last_good is not None:
                log.info("recovery apply of %s dropped: a render succeeded", output.plan_id)
                return []
            if not self._may_dispatch(output):
                return []
            with DISPATCH_STEP.labels("intent").time():
                recorded = self._record_intent(output, only_if_named=bootstrap_only)
            if not recorded:
                return []
            self._known_pods |= {p.name for p in ctx.targets()}
            started = time.monotonic()
            outcomes = ctx.deployer.deploy(
                output,
                ctx.targets(only),
                ctx.term.holder,
                ctx.term.epoch,
                ctx.plans.plans(),
                verify=verify,
                bootstrap_only=bootstrap_only,
            )
            self.last_deploy_at = time.monotonic()
            DEPLOY_DURATION.observe(self.last_deploy_at - started)
            self._absorb(output, outcomes)
            self._retry_unreached(outcomes)
        if output is ctx.state.last_good:
            self.maybe_converged(output)
        return outcomes

    def close(self, deadline: float) -> None:
        """After the term stopped: wait (until `deadline`) for an apply in progress, so no
        intent or apply of this term lands after the Lease is released."""
        if self._dispatch_lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            self._dispatch_lock.release()

    def _may_dispatch(self, output: RenderOutput) -> bool:
        if self.ctx.stopping:
            log.info("term stopped: %s not deployed", output.plan_id)
            return False
        if not self.ctx.state.usable(output):
            log.warning("%s was refused by the render gate: not deployed", output.plan_id)
            return False
        last = self.scheduler.last_dispatched
        if self.scheduler.draining and (last is None or last.output.checksum != output.checksum):
            log.warning(
                "draining: %s is not the last dispatched plan; not deployed", output.plan_id
            )
            return False
        return True

    def _retry_unreached(self, outcomes: Sequence[PodOutcome]) -> None:
        """A pod whose agent could not be reached (not listening yet: a new pod shows its IP
        first) is no longer known, so the push to new pods retries it shortly, whichever
        path deployed (a dispatch, a push, a repair, drift prevention, recovery)."""
        unreached = {o.pod.name for o in outcomes if o.unreachable}
        if unreached:
            log.info("agents not reached, retrying shortly: %s", sorted(unreached))
            self._known_pods -= unreached
            self._retry_pods_at = time.monotonic() + PUSH_RETRY_DELAY

    def _record_intent(self, output: RenderOutput, only_if_named: bool = False) -> bool:
        """The intent must name the output about to be applied (ADR-0033, issue 15 hole 1).
        `only_if_named` (recovery) always asks the store, which only re-stamps an intent
        that names the output already and never replaces one."""
        ctx = self.ctx
        if ctx.state.names(output) and not only_if_named:
            return True
        try:
            intent = ctx.store.record_intent(
                ctx.term, output.plan_id, output.checksum, only_if_named=only_if_named
            )
        except IntentRefused as exc:
            log.warning("apply of %s refused: %s", output.plan_id, exc)
            return False
        ctx.state.recorded(intent.plan_id, intent.checksum)
        return True

    def deploy_in_place(
        self, output: RenderOutput, only: set[str] | None, bootstrap_only: bool = False
    ) -> dict[str, str]:
        """`deploy()` for the dispatcher's and recovery's callers: pod -> what its agent did;
        nothing when the fence refuses (the term ended), so the caller simply stops."""
        try:
            return summarize_outcomes(self.deploy(output, only, bootstrap_only=bootstrap_only))
        except StaleTerm as exc:
            log.warning("%s not deployed: %s", output.plan_id, exc)
            return {}

    def maybe_converged(self, output: RenderOutput) -> None:
        """Every current HAProxy pod acknowledged `output` (or a skipped deploy confirmed
        it): the deployed variant of status patches may be written, and a current render
        that converged ends the use of a retained checkpoint (ADR-0033's gauge)."""
        ctx = self.ctx
        pods = {p.name for p in ctx.targets()}
        if pods and pods <= ctx.state.acknowledged_by(output.checksum):
            RETAINED_CONFIG_ACTIVE.set(0)
            requested_at = ctx.state.converged(output.checksum)
            if requested_at is not None:
                CONVERGENCE.observe(time.monotonic() - requested_at)
            if ctx.on_converged is None:
                return
            try:
                ctx.on_converged(output)
            except Exception:
                log.exception("status applier failed for %s", output.plan_id)

    # -- what pods proved ----------------------------------------------------------------

    def _acknowledged(self, receipt: PodReceipt, entry: dict[str, Any]) -> None:
        entry.update(receipt.as_status(), lastError="", consecutiveErrors=0)
        self.ctx.state.acknowledged(receipt, entry)

    def _absorb(self, output: RenderOutput, outcomes: Sequence[PodOutcome]) -> None:
        now = _now()
        for outcome in outcomes:
            count_outcome(outcome.pod.name, outcome.action)
            entry: dict[str, Any] = {"podUID": outcome.pod.uid, "deployedAt": now}
            entry.update(self._address(outcome.pod.ip))
            receipt = outcome.receipt(output)
            if receipt is not None:
                self._acknowledged(receipt, entry)
                continue
            entry.update(
                checksum=output.checksum,
                lastError=outcome.error or f"not acknowledged ({outcome.action})",
                consecutiveErrors=self.ctx.state.consecutive_errors(outcome.pod.name) + 1,
            )
            self.ctx.state.not_acknowledged(outcome.pod.name, entry)

    def absorb_reports(self, output: RenderOutput, reports: Sequence[PodReport]) -> None:
        """Receipts a state read proves (a paced reload that has run): stamped with the
        time it was seen, like an apply's; a pod proving what it proved before is no new
        deployment (TermState.acknowledged)."""
        now = _now()
        ips = {pod.name: pod.ip for pod in self.ctx.targets()}
        for report in reports:
            receipt = acknowledgement(report, output.plan_id, output.checksum)
            if receipt is not None:
                entry = {"deployedAt": now, **self._address(ips.get(report.pod_name))}
                self._acknowledged(receipt, entry)

    def _address(self, ip: str | None) -> dict[str, Any]:
        """Where the pod's agent answers, so the web process can read its unauthenticated
        /healthz live (docs/dashboard.md); nothing when the IP is not known."""
        if not ip:
            return {}
        return {"podIP": ip, "agentPort": self.ctx.deployer.pool.port}

    def await_pending_reloads(self, output: RenderOutput, deadline: float) -> None:
        """Poll until no pod has a reload pending, absorbing what the follow-ups prove
        (bounded by `deadline`)."""
        ctx = self.ctx
        while time.monotonic() < deadline:
            # verify=1: a receipt needs re-verified worker evidence.
            reports = ctx.deployer.read_states(ctx.targets(), verify=True)
            self.absorb_reports(output, reports)
            if not any(r.reachable and r.pending_reload for r in reports):
                return
            time.sleep(0.1)

    # -- follow-ups, pushes, repairs, drift ----------------------------------------------

    def _follow_up_paced_reloads(self) -> None:
        """A paced reload confirms the worker receipt only when it has run: read the pods
        again, absorb what they now prove, and keep following up while any is pending."""
        self._follow_up_at = None
        output = self.current()
        if output is None:
            return
        reports = self.ctx.deployer.read_states(self.ctx.targets(), verify=True)
        self.absorb_reports(output, reports)
        if any(r.reachable and r.pending_reload for r in reports):
            self._follow_up_at = time.monotonic() + RELOAD_FOLLOW_UP_DELAY
        else:
            self.maybe_converged(output)

    def _push_to_new_pods(self) -> None:
        """A newly discovered pod gets the current output at once. Its agent may not listen
        yet when the pod first shows an IP: a failed push is retried shortly after."""
        targets = self.ctx.targets()
        current = {p.name for p in targets}
        new = current - self._known_pods
        self._known_pods = current
        # A pod gone from the fleet takes its kept agent connection with it.
        self.ctx.deployer.pool.forget(targets)
        if new:
            log.info("new HAProxy pods discovered: %s", sorted(new))
        output = self.current()
        if new and output is not None:
            assert self.ctx.run_deployment is not None
            results = self.ctx.run_deployment(output, new)
            failed = {p for p, what in results.items() if _is_error(what)}
            if failed:
                self._known_pods -= failed
                self._retry_pods_at = time.monotonic() + PUSH_RETRY_DELAY
        elif new and not self.scheduler.draining:
            self.ctx.request_render()

    def _agent_check_due(self) -> bool:
        return (
            self.current() is not None
            and self.scheduler.in_flight is None
            and time.monotonic() - self._last_agent_check >= AGENT_CHECK_INTERVAL
        )

    def _check_agents(self) -> None:
        """Between drift-prevention passes, a cheap look at every agent: a pod that reports
        an invariant violation (a killed worker, files changed behind its back) gets the
        current output again at once instead of at the next drift pass."""
        self._last_agent_check = time.monotonic()
        output = self.current()
        if output is None:
            return
        reports = self.ctx.deployer.read_states(self.ctx.targets(), verify=False)
        broken = {r.pod_name for r in reports if r.reachable and r.invariant_violation}
        if broken:
            log.info("repairing pods that report an invariant violation: %s", sorted(broken))
            assert self.ctx.run_deployment is not None
            self.ctx.run_deployment(output, broken)

    def _drift_due(self) -> bool:
        return (
            self.current() is not None
            and time.monotonic() - self.last_deploy_at >= self.ctx.settings.drift_interval
        )

    def _drift_prevention(self) -> None:
        # verify=1 makes each agent re-hash its tree: a drifted pod reports a violation and
        # gets the last-known-good set back through a full apply.
        output = self.current()
        if output is None:
            return
        try:
            self.deploy(output, verify=True)
        except StaleTerm as exc:  # the term ended meanwhile; the loop sees it next
            log.info("drift prevention: %s", exc)

    # -- outputs the render gate refused after dispatch ------------------------------------

    def _revert_refused(self) -> None:
        """Pods that took a refused output go back: to their agent's last-known-good when
        that is the output the term accepted before, else that output is deployed to them."""
        ctx = self.ctx
        for refused in ctx.state.take_reverts():
            target = ctx.state.last_good
            with self._dispatch_lock:
                try:
                    ctx.check_term()  # the term's fence, as in deploy()
                except StaleTerm as exc:
                    log.warning("pods that took %s not reverted: %s", refused.plan_id, exc)
                    return
                if target is not None and not self._record_intent(target):
                    continue
                states = {r.pod_name: r for r in ctx.deployer.read_states(ctx.targets(), False)}
                others: set[str] = set()
                outcomes = []
                for pod in ctx.targets():
                    report = states.get(pod.name)
                    if report is None or report.applied_plan_id != refused.plan_id:
                        continue
                    lkg = report.last_known_good_plan_id
                    if target is not None and lkg != target.plan_id:
                        others.add(pod.name)
                        continue
                    outcomes.append(self._revert_pod(pod, report))
                if target is not None:
                    self._absorb(target, [o for o in outcomes if o is not None])
            log.warning("reverted pods that took refused plan %s", refused.plan_id)
            if others and target is not None:
                assert ctx.run_deployment is not None
                ctx.run_deployment(target, others)

    def _revert_pod(self, pod: Any, report: PodReport) -> PodOutcome | None:
        ctx = self.ctx
        try:
            state = ctx.deployer.pool.client(pod).state()
        except Exception as exc:
            log.warning("revert of %s: agent unreadable: %s", pod.name, exc)
            return None
        return ctx.deployer.revert_to_last_known_good(pod, state, ctx.term.holder, ctx.term.epoch)

"""The leader-only pipeline of one term: render -> render gate -> deployment scheduler ->
deployer -> publisher, plus recovery (ADR-0033), the readiness gate status applier
(ADR-0034), drift prevention and the graceful drain.

One `LeaderPipeline` lives exactly as long as its term. Every term starts with no render or
deployment candidates (freshness across terms), claims the retained-state Lease and waits
for the render gate's verdict on its first render before dispatching it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kubernetes import client
from prometheus_client import Gauge

from controller.deploy.deployer import Deployer, HAProxyPod, PodOutcome
from controller.deploy.scheduler import DeploymentScheduler, Dispatch, WaitUntil
from controller.health import RECONCILIATION_COORDINATOR, ComponentHealth
from controller.publish.checkpoints import CheckpointPublisher, PublicationFailed
from controller.publish.kube import Objects
from controller.publish.ordinary import OrdinaryPublisher
from controller.render import RenderError, RenderInput, RenderOutput, render
from controller.rendergate import RenderGate
from controller.retained.checkpoint import TemplateRef
from controller.retained.fleet import PodReport
from controller.retained.intent import Term as IntentTerm
from controller.retained.receipts import PodReceipt, acknowledgement
from controller.retained.store import IntentRefused, RetainedStateStore
from controller.watch.discovery import DiscoveredPod

log = logging.getLogger(__name__)

RETAINED_CONFIG_ACTIVE = Gauge(
    "haptic_retained_config_active",
    "1 while validated recovery from a retained checkpoint is scheduled (ADR-0033)",
)
DRAIN_BOUND_SECONDS = 15.0
# Agents pace reloads about a second apart; look again a little after that.
RELOAD_FOLLOW_UP_DELAY = 1.2
PUSH_RETRY_DELAY = 0.5
AGENT_CHECK_INTERVAL = 5.0


def summarize_outcomes(outcomes: Sequence[PodOutcome]) -> dict[str, str]:
    """Pod -> what its agent did, or `failed: <why>`."""
    return {o.pod.name: o.action if not o.error else f"failed: {o.error}" for o in outcomes}


class PlanMemory:
    """Outputs by plan id, newest last, bounded: how the deployer knows a pod's current plan
    and computes runtime operations instead of reloading."""

    def __init__(self, limit: int = 16) -> None:
        self._outputs: OrderedDict[str, RenderOutput] = OrderedDict()
        self._limit = limit
        self._lock = threading.Lock()

    def remember(self, output: RenderOutput) -> None:
        with self._lock:
            self._outputs[output.plan_id] = output
            self._outputs.move_to_end(output.plan_id)
            while len(self._outputs) > self._limit:
                self._outputs.popitem(last=False)

    def get(self, plan_id: str) -> RenderOutput | None:
        with self._lock:
            return self._outputs.get(plan_id)

    def plans(self) -> dict[str, Mapping[str, Any]]:
        with self._lock:
            return {pid: out.plan for pid, out in self._outputs.items()}


@dataclass
class LeaderSettings:
    deployment_min_interval: float = 0.1
    publish_interval: float = 10.0
    drift_interval: float = 60.0


@dataclass
class TermState:
    """In-memory candidates of one term; a new term starts from nothing."""

    first_render_done: bool = False
    last_good: RenderOutput | None = None  # last output accepted for dispatch this term
    seed: RenderOutput | None = None  # the published output, read at the start of the term
    # (plan ID, checksum) the durable intent names, as the store last answered this term.
    intended: tuple[str, str] | None = None
    unsaved: dict[str, PodReceipt] = field(default_factory=dict)  # pod -> newest receipt
    pending_status: dict[str, dict[str, Any]] = field(default_factory=dict)
    publication_latched: bool = False  # a failed reconciliation holds publication
    fleet_checksums: dict[str, str] = field(default_factory=dict)  # pod -> acknowledged
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False, compare=False)

    def take_unsaved(self, checksum: str) -> list[PodReceipt]:
        """Remove and return exactly the unsaved receipts for `checksum`, oldest pod first."""
        with self.lock:
            taken = sorted(
                (r for r in self.unsaved.values() if r.checksum == checksum),
                key=lambda r: r.pod_name,
            )
            for receipt in taken:
                del self.unsaved[receipt.pod_name]
            return taken

    def put_back_unsaved(self, receipts: Sequence[PodReceipt]) -> None:
        """Return receipts a failed publication took; a newer receipt of a pod wins."""
        with self.lock:
            for receipt in receipts:
                self.unsaved.setdefault(receipt.pod_name, receipt)


class LeaderPipeline:
    def __init__(
        self,
        *,
        api_client: client.ApiClient,
        token: Any,  # controller.election.FencingToken
        template: TemplateRef,
        health: ComponentHealth,
        gate: RenderGate,
        plans: PlanMemory,
        snapshot: Callable[[], dict[str, Any]],
        haproxy_pods: Callable[[], Sequence[DiscoveredPod]],
        deployer: Deployer,
        settings: LeaderSettings,
        term_valid: Callable[[], bool],
        check_term: Callable[[], None],
        record_event: Callable[[str, str, str], None],
        run_deployment: Callable[[RenderOutput, set[str] | None], dict[str, str]] | None = None,
        run_publication: Callable[[], None] | None = None,
        write_fence: Callable[[], bool] = lambda: True,
        on_converged: Callable[[RenderOutput], None] | None = None,
    ) -> None:
        self.api_client = api_client
        self.token = token
        self.term = IntentTerm(token.holder, token.epoch)
        self.template = template
        self.health = health
        self.gate = gate
        self.plans = plans
        self.snapshot = snapshot
        self.haproxy_pods = haproxy_pods
        self.deployer = deployer
        self.settings = settings
        self.term_valid = term_valid
        self.check_term = check_term
        self.record_event = record_event
        # In a worker, deployments go through the fenced leader task (controller.deploy.tasks)
        # which calls back into `deploy`; tests may run them in place.
        self.run_deployment = run_deployment or self._deploy_in_place
        self.run_publication = run_publication or self.publish
        # A cross-cluster Standby keeps its fence shut: it renders nothing, deploys nothing.
        self.write_fence = write_fence
        # Called once every HAProxy pod runs an output (ADR-0034's status applier).
        self.on_converged = on_converged
        self.objects = Objects(api_client, template.namespace)
        self.store = RetainedStateStore(api_client, template, token.lease_name, token.namespace)
        self.ordinary = OrdinaryPublisher(self.objects, template)
        self.checkpoints = CheckpointPublisher(self.objects, template, template.name)
        self.scheduler: DeploymentScheduler[RenderOutput] = DeploymentScheduler(
            settings.deployment_min_interval
        )
        self.state = TermState()
        self._wake = threading.Condition()
        self._dispatch_lock = threading.Lock()
        self._render_requested = False
        self._pods_changed = False
        self._stopping = False
        self._draining = False
        self._threads: list[threading.Thread] = []
        self._claimed = threading.Event()
        self._last_publish = 0.0
        self._last_deploy_at = time.monotonic()
        self._notices: set[tuple[str, str]] = set()  # events deduplicated within the term
        self._known_pods: set[str] = set()
        self._recovering = False
        self._recover_again: str | None = None
        self._follow_up_at: float | None = None
        self._retry_pods_at: float | None = None
        self._last_agent_check = time.monotonic()

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        self.gate.new_term()
        self.scheduler.reset()
        for name, target in (
            ("coordinator", self._coordinator),
            ("dispatcher", self._dispatcher),
            ("publisher", self._publisher),
        ):
            thread = threading.Thread(target=target, name=f"{name}-{self.term.epoch}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def request_render(self) -> None:
        with self._wake:
            self._render_requested = True
            self._wake.notify_all()

    def pods_changed(self) -> None:
        with self._wake:
            self._pods_changed = True
            self._wake.notify_all()

    def stop(self, drain: bool, timeout: float = DRAIN_BOUND_SECONDS) -> None:
        """End the term; with `drain`, first the graceful drain (bounded to 15 s)."""
        if drain:
            try:
                self._drain(time.monotonic() + min(timeout, DRAIN_BOUND_SECONDS))
            except Exception:
                log.exception("drain failed; publishing nothing more")
        with self._wake:
            self._stopping = True
            self._wake.notify_all()
        for thread in self._threads:
            thread.join(timeout=5)
        RETAINED_CONFIG_ACTIVE.set(0)

    def _alive(self) -> bool:
        return not self._stopping and self.term_valid()

    # -- coordinator: render and gate ----------------------------------------------------------

    def _coordinator(self) -> None:
        try:
            self.store.claim(self.term)
        except Exception as exc:  # without a claim this term may not record intents
            log.error("term %s could not claim the retained-state Lease: %s", self.term, exc)
            self.health.set_error(RECONCILIATION_COORDINATOR, f"claim failed: {exc}")
            return
        self._claimed.set()
        self._seed_from_publication()
        while True:
            with self._wake:
                while not (self._render_requested or self._stopping):
                    self._wake.wait(timeout=1.0)
                if self._stopping:
                    return
                self._render_requested = False
            if not self.term_valid():
                return
            if not self.write_fence():
                continue
            self._render_once()

    def _seed_from_publication(self) -> None:
        """Remember the published output: the pods most likely run it, and rendering with it
        as the previous plan keeps endpoints in their server slots, so a leader change alone
        changes (and reloads) nothing."""
        try:
            published = self.ordinary.read_output()
        except Exception as exc:
            log.info("published output not readable (%s); starting without it", exc)
            return
        if published is not None:
            self.plans.remember(published)
            self.state.seed = published

    def _render_once(self) -> None:
        kwargs = self.snapshot()
        if not kwargs.get("template_config"):
            self.health.set_error(RECONCILIATION_COORDINATOR, "HAProxyTemplateConfig not found")
            return
        basis = self.state.last_good or self.state.seed
        previous = basis.plan if basis else None
        try:
            output = render(RenderInput(**kwargs, previous_plan=previous))
        except RenderError as exc:
            self._render_failed(str(exc))
            return
        first = not self.state.first_render_done
        verdict = self.gate.check_before_dispatch(output, term_first_render=first)
        self.state.first_render_done = True
        if verdict is not None and not verdict.accepted:
            self._render_failed(f"render gate refused the configuration: {verdict.output}")
            return
        self.health.set_error(RECONCILIATION_COORDINATOR, None)
        self.state.last_good = output
        self.state.publication_latched = False
        self.plans.remember(output)
        self.scheduler.submit(output.plan_id, output)
        with self._wake:
            self._wake.notify_all()

    def _render_failed(self, message: str) -> None:
        log.warning("render failed: %s", message)
        # /healthz keeps the last render error until rendering succeeds; recovery never
        # clears it (ADR-0033).
        self.health.set_error(RECONCILIATION_COORDINATOR, message)
        self.state.publication_latched = True
        self._notice("Warning", "RenderFailed", message)
        if self.state.last_good is None:
            self._recover(message)

    # -- dispatcher: scheduler driver and deployments ------------------------------------------

    def _dispatcher(self) -> None:
        self._claimed.wait(timeout=30)
        while self._alive():
            with self._wake:
                pods_changed, self._pods_changed = self._pods_changed, False
            retry_due = self._retry_pods_at is not None and time.monotonic() >= self._retry_pods_at
            if retry_due:
                self._retry_pods_at = None
            if pods_changed or retry_due:
                self._push_to_new_pods()
            if self._agent_check_due():
                self._check_agents()
            action = self.scheduler.next_action(time.monotonic())
            if isinstance(action, Dispatch):
                try:
                    results = self.run_deployment(action.output, None)
                    if any(v == "reload_scheduled" for v in results.values()):
                        self._follow_up_at = time.monotonic() + RELOAD_FOLLOW_UP_DELAY
                except Exception:
                    log.exception("deployment of %s failed", action.plan_id)
                finally:
                    self.scheduler.completed(action.plan_id)
                continue
            if self._follow_up_at is not None and time.monotonic() >= self._follow_up_at:
                self._follow_up_paced_reloads()
                continue
            wait = 1.0
            if self._follow_up_at is not None:
                wait = max(0.0, self._follow_up_at - time.monotonic())
            if isinstance(action, WaitUntil):
                wait = min(wait, max(0.0, action.at - time.monotonic()))
            elif self._drift_due():
                self._drift_prevention()
            with self._wake:
                if not (self._pods_changed or self._stopping):
                    self._wake.wait(timeout=min(wait, 1.0))

    def _follow_up_paced_reloads(self) -> None:
        """A paced reload confirms the worker receipt only when it has run: read the pods
        again, absorb what they now prove, and keep following up while any is pending."""
        self._follow_up_at = None
        output = self.state.last_good
        if output is None:
            return
        # verify=1: a receipt needs re-verified worker evidence.
        reports = self.deployer.read_states(self._targets(), verify=True)
        self._absorb_reports(output, reports)
        if any(r.reachable and r.pending_reload for r in reports):
            self._follow_up_at = time.monotonic() + RELOAD_FOLLOW_UP_DELAY
        elif self.on_converged is not None:
            self._maybe_converged(output)

    def _absorb_reports(self, output: RenderOutput, reports: Sequence[PodReport]) -> None:
        for report in reports:
            receipt = acknowledgement(report, output.plan_id, output.checksum)
            if receipt is None:
                continue
            self.state.unsaved[report.pod_name] = receipt
            self.state.fleet_checksums[report.pod_name] = receipt.checksum
            self.state.pending_status[report.pod_name] = {
                **receipt.as_status(),
                "lastError": "",
                "consecutiveErrors": 0,
            }

    def _targets(self, only: set[str] | None = None) -> list[HAProxyPod]:
        pods = []
        for pod in self.haproxy_pods():
            if pod.pod_ip and not pod.terminating and (only is None or pod.name in only):
                pods.append(HAProxyPod(pod.name, pod.uid, pod.pod_ip))
        return pods

    def deploy(
        self, output: RenderOutput, only: set[str] | None = None, verify: bool = False
    ) -> list[PodOutcome]:
        """Record the intent (once per output per term), then apply to every pod."""
        self.check_term()
        if not self.write_fence():
            log.info("write fence shut: %s not deployed", output.plan_id)
            return []
        with self._dispatch_lock:  # the intent and the apply it names, one at a time
            if self.state.intended != (output.plan_id, output.checksum):
                try:
                    intent = self.store.record_intent(self.term, output.plan_id, output.checksum)
                except IntentRefused as exc:
                    log.warning("apply of %s refused: %s", output.plan_id, exc)
                    return []
                self.state.intended = (intent.plan_id, intent.checksum)
            pods = self._targets(only)
            self._known_pods |= {p.name for p in self._targets()}
            outcomes = self.deployer.deploy(
                output, pods, self.term.holder, self.term.epoch, self.plans.plans(), verify=verify
            )
        self._last_deploy_at = time.monotonic()
        self._absorb(output, outcomes)
        if self.on_converged is not None and output is self.state.last_good:
            self._maybe_converged(output)
        return outcomes

    def _maybe_converged(self, output: RenderOutput) -> None:
        """Every current HAProxy pod acknowledged `output` (or a skipped deploy confirmed
        it): the deployed variant of status patches may be written."""
        pods = {p.name for p in self._targets()}
        acked = {n for n, c in self.state.fleet_checksums.items() if c == output.checksum}
        if pods and pods <= acked:
            assert self.on_converged is not None
            try:
                self.on_converged(output)
            except Exception:
                log.exception("status applier failed for %s", output.plan_id)

    def _deploy_in_place(self, output: RenderOutput, only: set[str] | None) -> dict[str, str]:
        return summarize_outcomes(self.deploy(output, only))

    def _absorb(self, output: RenderOutput, outcomes: Sequence[PodOutcome]) -> None:
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        for outcome in outcomes:
            entry: dict[str, Any] = {"podUID": outcome.pod.uid, "deployedAt": now}
            receipt = outcome.receipt(output)
            if receipt is not None:
                self.state.unsaved[outcome.pod.name] = receipt
                self.state.fleet_checksums[outcome.pod.name] = receipt.checksum
                entry.update(receipt.as_status(), lastError="", consecutiveErrors=0)
            else:
                self.state.fleet_checksums.pop(outcome.pod.name, None)
                previous = self.state.pending_status.get(outcome.pod.name, {})
                entry.update(
                    checksum=output.checksum,
                    lastError=outcome.error or f"not acknowledged ({outcome.action})",
                    consecutiveErrors=int(previous.get("consecutiveErrors", 0)) + 1,
                )
            self.state.pending_status[outcome.pod.name] = entry

    def _push_to_new_pods(self) -> None:
        """A newly discovered pod gets the current output at once. Its agent may not listen
        yet when the pod first shows an IP: a failed push is retried shortly after."""
        current = {p.name for p in self._targets()}
        new = current - self._known_pods
        self._known_pods = current
        if new:
            log.info("new HAProxy pods discovered: %s", sorted(new))
        if new and self.state.last_good is not None:
            results = self.run_deployment(self.state.last_good, new)
            failed = {pod for pod, what in results.items() if what.startswith("failed")}
            if failed:
                self._known_pods -= failed
                self._retry_pods_at = time.monotonic() + PUSH_RETRY_DELAY
        elif new:
            self.request_render()

    def _agent_check_due(self) -> bool:
        return (
            self.state.last_good is not None
            and self.scheduler.in_flight is None
            and time.monotonic() - self._last_agent_check >= AGENT_CHECK_INTERVAL
        )

    def _check_agents(self) -> None:
        """Between drift-prevention passes, a cheap look at every agent: a pod that reports
        an invariant violation (a killed worker, files changed behind its back) gets the
        current output again at once instead of at the next drift pass."""
        self._last_agent_check = time.monotonic()
        output = self.state.last_good
        if output is None:
            return
        reports = self.deployer.read_states(self._targets(), verify=False)
        broken = {r.pod_name for r in reports if r.reachable and r.invariant_violation}
        if broken:
            log.info("repairing pods that report an invariant violation: %s", sorted(broken))
            self.run_deployment(output, broken)

    def _drift_due(self) -> bool:
        return (
            self.state.last_good is not None
            and time.monotonic() - self._last_deploy_at >= self.settings.drift_interval
        )

    def _drift_prevention(self) -> None:
        # verify=1 makes each agent re-hash its tree: a drifted pod reports a violation and
        # gets the last-known-good set back through a full apply.
        assert self.state.last_good is not None
        self.deploy(self.state.last_good, verify=True)

    # -- publisher: throttled ordinary publication and checkpoints ---------------------------

    def _publisher(self) -> None:
        self._claimed.wait(timeout=30)
        while self._alive():
            due = self._last_publish + self.settings.publish_interval
            # The throttle counts from the last publication, so a first receipt goes out
            # at once and later ones at most once per interval.
            if time.monotonic() >= due and self._has_unpublished():
                self._last_publish = time.monotonic()
                try:
                    self.run_publication()
                except Exception:
                    log.exception("publication failed")
            with self._wake:
                if not self._stopping:
                    self._wake.wait(timeout=min(1.0, max(0.05, due - time.monotonic())))

    def publish(self, output: RenderOutput | None = None) -> None:
        """Publish the output, the receipts and the newest acknowledged checkpoint.

        Held while reconciliation is failing (the publication latch); unsaved receipts stay
        queued and go out once rendering recovers.
        """
        self._last_publish = time.monotonic()
        if not self._has_unpublished():
            return
        # The drain publishes the last dispatched output, not a newer undispatched render.
        output = output or self.state.last_good
        assert output is not None
        self.check_term()
        self.ordinary.publish_output(output)
        status, self.state.pending_status = self.state.pending_status, {}
        self.ordinary.publish_receipts(status, present_pods=[p.name for p in self._targets()])
        receipts = self.state.take_unsaved(output.checksum)
        if receipts:
            try:
                self.checkpoints.publish(
                    output.files, receipts[0], datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
                )
            except BaseException as exc:
                self.state.put_back_unsaved(receipts)
                if not isinstance(exc, PublicationFailed):
                    raise
                log.warning("checkpoint publication failed: %s", exc)

    def _has_unpublished(self) -> bool:
        return (
            self.state.last_good is not None
            and not self.state.publication_latched
            and bool(self.state.unsaved or self.state.pending_status)
        )

    # -- recovery (ADR-0033) ---------------------------------------------------------------------

    def _recover(self, render_error: str) -> None:
        from controller.recovery import attempt_recovery

        with self._wake:
            if self._recovering:
                # One attempt (with its bounded retries) at a time; what changed meanwhile
                # (a pod discovered) gets a fresh attempt when this one ends.
                self._recover_again = render_error
                return
            self._recovering = True
        attempt_recovery(self, render_error, done=self._recovery_done)

    def _recovery_done(self) -> None:
        with self._wake:
            self._recovering = False
            again, self._recover_again = self._recover_again, None
        if again is not None and self._alive() and self.state.last_good is None:
            self._recover(again)

    def _notice(self, type_: str, reason: str, message: str) -> None:
        key = (reason, message)
        if key in self._notices:
            return
        self._notices.add(key)
        self.record_event(type_, reason, message)

    # -- graceful drain ---------------------------------------------------------------------

    def _drain(self, deadline: float) -> None:
        """ADR-0033 "Graceful leader stop": dispatch nothing but the last dispatched plan,
        wait for it and its paced reload, re-check both Leases, then publish past the
        throttle. A term that lost its Lease publishes nothing."""
        self.scheduler.begin_drain()
        last = self.scheduler.last_dispatched
        while self.scheduler.in_flight is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        if last is not None:
            self._await_pending_reloads(last.output, deadline)
        if time.monotonic() >= deadline or not self.term_valid():
            log.warning("drain ran out of time or term; publishing nothing")
            return
        try:
            self.check_term()
            stored, _ = self.store.read_retained()
        except Exception as exc:
            log.warning("drain: lease check failed (%s); publishing nothing", exc)
            return
        if stored.claim is None or (stored.claim.holder, stored.claim.epoch) != (
            self.term.holder,
            self.term.epoch,
        ):
            log.warning("drain: another term claimed the retained state; publishing nothing")
            return
        self.publish(last.output if last is not None else None)

    def _await_pending_reloads(self, output: RenderOutput, deadline: float) -> None:
        """A paced reload confirms the worker receipt only on its follow-up: poll until no
        pod has a reload pending (bounded by the drain deadline)."""
        while time.monotonic() < deadline:
            # verify=1: a receipt needs re-verified worker evidence.
            reports = self.deployer.read_states(self._targets(), verify=True)
            self._absorb_reports(output, reports)
            if not any(r.reachable and r.pending_reload for r in reports):
                return
            time.sleep(0.1)

"""`LeaderPipeline`: one leader term, composed of its components (docs/term.md).

It wires the coordinator (claim, render, gate), the dispatcher (scheduler, deployments,
pushes, repairs, drift), the publisher (publication and checkpoints) and the drain around
one `TermState`, and is what recovery (controller/recovery.py) sees as its `RecoveryHost`.
One pipeline lives exactly as long as its term.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from kubernetes import client

from controller.deploy.deployer import Deployer, HAProxyPod, PodOutcome
from controller.health import ComponentHealth
from controller.render import RenderOutput
from controller.rendergate import RenderGate
from controller.retained.checkpoint import TemplateRef
from controller.term.context import TermContext
from controller.term.coordinator import Coordinator
from controller.term.dispatcher import Dispatcher, LockedScheduler
from controller.term.drain import DRAIN_BOUND_SECONDS, drain
from controller.term.host import RunDeployment
from controller.term.metrics import RETAINED_CONFIG_ACTIVE
from controller.term.plans import PlanMemory
from controller.term.publisher import Publisher
from controller.term.state import LeaderSettings, TermState
from controller.watch.discovery import DiscoveredPod

log = logging.getLogger(__name__)

THREAD_JOIN_SECONDS = 5.0


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
        run_deployment: RunDeployment | None = None,
        run_publication: Callable[[], None] | None = None,
        write_fence: Callable[[], bool] = lambda: True,
        on_converged: Callable[[RenderOutput], None] | None = None,
        recheck: Callable[[], None] | None = None,
        report_warnings: Callable[[RenderOutput], None] | None = None,
    ) -> None:
        self.ctx = TermContext(
            api_client=api_client,
            token=token,
            template=template,
            health=health,
            gate=gate,
            plans=plans,
            snapshot=snapshot,
            haproxy_pods=haproxy_pods,
            deployer=deployer,
            settings=settings,
            term_valid=term_valid,
            given_check_term=check_term,
            record_event=record_event,
            # A cross-cluster Standby keeps its fence shut: it renders nothing, deploys nothing.
            write_fence=write_fence,
            # Called once every HAProxy pod runs an output (ADR-0034's status applier).
            on_converged=on_converged,
            # The elector looks at the Lease now (after a Reclaim lifted the epoch).
            recheck=recheck,
            # Render warnings -> Events and metric (controller.render.warnings).
            report_warnings=report_warnings,
        )
        self.token = token
        self.template = template
        self.health = health
        self.term_valid = term_valid
        self.gate = gate
        self.plans = plans
        self.deployer = deployer
        self.store = self.ctx.store
        self.objects = self.ctx.objects
        self.scheduler = LockedScheduler(settings.deployment_min_interval)
        self.dispatcher = Dispatcher(self.ctx, self.scheduler)
        self.publisher = Publisher(self.ctx)
        self.coordinator = Coordinator(self.ctx, self.scheduler, self.publisher.ordinary, self)
        self.ctx.request_render = self.coordinator.request_render
        # Deployments and publications run in place, on the term's threads, under its fence
        # (Dispatcher.deploy). The term model (tests/term) passes its own to queue them and
        # explore late and stale interleavings.
        self.run_deployment = run_deployment or self.dispatcher.deploy_in_place
        self.ctx.run_deployment = self.run_deployment
        self.run_publication = run_publication or self.publish
        self._threads: list[threading.Thread] = []

    # -- what the rest of the controller uses -------------------------------------------------

    @property
    def state(self) -> TermState:
        return self.ctx.state

    @property
    def term(self) -> Any:
        return self.ctx.term

    @property
    def checkpoints(self) -> Any:
        return self.publisher.checkpoints

    @property
    def claimed(self) -> threading.Event:
        """Set once the term's claim on the retained-state Lease is made."""
        return self.ctx.claimed

    def start(self) -> None:
        self.gate.new_term()
        self.gate.on_term_verdict = self.coordinator.on_verdict
        self.scheduler.reset()
        for name, target in (
            ("coordinator", self.coordinator.run),
            ("dispatcher", self.dispatcher.run),
            ("publisher", lambda: self.publisher.run(self.run_publication)),
        ):
            thread = threading.Thread(target=target, name=f"{name}-{self.term.epoch}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def request_render(self) -> None:
        self.coordinator.request_render()

    def pods_changed(self) -> None:
        self.dispatcher.pods_changed()

    def deploy(
        self,
        output: RenderOutput,
        only: set[str] | None = None,
        verify: bool = False,
        bootstrap_only: bool = False,
    ) -> list[PodOutcome]:
        return self.dispatcher.deploy(output, only, verify, bootstrap_only=bootstrap_only)

    def publish(self, output: RenderOutput | None = None) -> None:
        self.publisher.publish(output)

    def stop(self, drain: bool, timeout: float = DRAIN_BOUND_SECONDS) -> None:
        """End the term; with `drain`, first the graceful drain. One deadline bounds it all
        (15 s at most): the drain, the end of any publication, the threads' ends."""
        deadline = time.monotonic() + min(timeout, DRAIN_BOUND_SECONDS)
        if drain:
            try:
                self._drain(deadline)
            except Exception:
                log.exception("drain failed; publishing nothing more")
        else:
            deadline = time.monotonic() + THREAD_JOIN_SECONDS
        self.ctx.stop()
        # No write starts from here on; wait only for one already in progress.
        self.publisher.close(deadline)
        self.dispatcher.close(deadline)
        if self.gate.on_term_verdict == self.coordinator.on_verdict:
            self.gate.on_term_verdict = None
        for thread in self._threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        RETAINED_CONFIG_ACTIVE.set(0)

    def _drain(self, deadline: float) -> None:
        drain(self.ctx, self.scheduler, self.dispatcher, self.publisher, deadline)

    # -- RecoveryHost (controller/term/host.py) ----------------------------------------------

    @property
    def last_good(self) -> RenderOutput | None:
        return self.ctx.state.last_good

    @property
    def check_term(self) -> Callable[[], None]:
        return self.ctx.check_term

    def targets(self, only: set[str] | None = None) -> list[HAProxyPod]:
        return self.ctx.targets(only)

    def alive(self) -> bool:
        return self.ctx.alive()

    def notice(self, type_: str, reason: str, message: str) -> None:
        self.ctx.notice(type_, reason, message)

    def wake(self, timeout: float) -> None:
        self.ctx.pause(timeout)

"""The wiring one term's components share: who the term is, what it talks to, and how its
threads wake and stop (docs/term.md).

The term's identity may change once: a claim that had to Reclaim (the leader-election
Lease was recreated) lifts the epoch, and the term adopts it at once (`adopt`) so its intent
records and applies carry the epoch the Leases now name.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from kubernetes import client

from controller.deploy.deployer import Deployer, HAProxyPod
from controller.fencing import StaleTerm
from controller.fencing import check_term as check_token
from controller.health import ComponentHealth
from controller.publish.kube import Objects
from controller.render import RenderOutput
from controller.rendergate import RenderGate
from controller.retained.checkpoint import TemplateRef
from controller.retained.intent import Term as IntentTerm
from controller.retained.store import RetainedStateStore
from controller.term.host import RunDeployment
from controller.term.plans import PlanMemory
from controller.term.state import LeaderSettings, TermState
from controller.watch.discovery import DiscoveredPod


@dataclass
class TermContext:
    api_client: client.ApiClient
    token: Any  # controller.election.FencingToken
    template: TemplateRef
    health: ComponentHealth
    gate: RenderGate
    plans: PlanMemory
    snapshot: Callable[[], dict[str, Any]]
    haproxy_pods: Callable[[], Sequence[DiscoveredPod]]
    deployer: Deployer
    settings: LeaderSettings
    term_valid: Callable[[], bool]
    given_check_term: Callable[[], None]
    record_event: Callable[[str, str, str], None]
    write_fence: Callable[[], bool]
    on_converged: Callable[[RenderOutput], None] | None
    recheck: Callable[[], None] | None
    # Render warnings -> Events and metric (controller.render.warnings); after each render.
    report_warnings: Callable[[RenderOutput], None] | None = None
    state: TermState = field(default_factory=TermState)
    wake: threading.Condition = field(default_factory=threading.Condition)
    claimed: threading.Event = field(default_factory=threading.Event)
    stopping: bool = False
    # Set by the pipeline: deploy in place (Dispatcher.deploy_in_place), or the model's.
    run_deployment: RunDeployment | None = None
    request_render: Callable[[], None] = lambda: None  # set to the coordinator's
    _notices: set[tuple[str, str]] = field(default_factory=set)
    _adopted: Any = None  # the token after a Reclaim lifted the epoch

    def __post_init__(self) -> None:
        self.term = self.token.term
        self.objects = Objects(self.api_client, self.template.namespace)
        self.store = RetainedStateStore(
            self.api_client, self.template, self.token.lease_name, self.token.namespace
        )

    # -- the term --------------------------------------------------------------------------

    def adopt(self, term: IntentTerm) -> None:
        """Take the epoch a Reclaim lifted; the elector is asked to look at the Lease now."""
        if term == self.term:
            return
        self.term = term
        self._adopted = replace(self.token, term=replace(self.token.term, epoch=term.epoch))
        if self.recheck is not None:
            self.recheck()

    def check_local_term(self) -> None:
        """The local half of the fence: raise StaleTerm once the elector ended the term."""
        if not self.term_valid():
            raise StaleTerm(self._adopted or self.token, "the local term ended")

    def check_term(self) -> None:
        """The term's fence before a side effect: raise StaleTerm unless this process still
        holds the term (the elector has not ended it) and the leader Lease still names it."""
        self.check_local_term()
        if self._adopted is not None:
            check_token(self.api_client, self._adopted)
        else:
            self.given_check_term()

    def alive(self) -> bool:
        return not self.stopping and self.term_valid()

    def targets(self, only: set[str] | None = None) -> list[HAProxyPod]:
        pods = []
        for pod in self.haproxy_pods():
            if pod.pod_ip and not pod.terminating and (only is None or pod.name in only):
                pods.append(HAProxyPod(pod.name, pod.uid, pod.pod_ip))
        return pods

    def notice(self, type_: str, reason: str, message: str) -> None:
        """An Event, once per (reason, message) within the term."""
        key = (reason, message)
        with self.wake:
            if key in self._notices:
                return
            self._notices.add(key)
        self.record_event(type_, reason, message)

    # -- waking and stopping -----------------------------------------------------------------

    def notify(self) -> None:
        with self.wake:
            self.wake.notify_all()

    def pause(self, timeout: float, until: Callable[[], bool] = lambda: False) -> None:
        """Wait up to `timeout` (at most 1 s at a time is the caller's business), ending early
        when the term stops or `until()` holds."""
        deadline = time.monotonic() + timeout
        with self.wake:
            while not (self.stopping or until()):
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self.wake.wait(timeout=left)

    def stop(self) -> None:
        with self.wake:
            self.stopping = True
            self.wake.notify_all()

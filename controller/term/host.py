"""What recovery (controller/recovery.py, ADR-0033 "Recovery and agreement") may use of a
term: a Protocol, so recovery depends on no component's internals and nothing imports back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from controller.deploy.deployer import Deployer, HAProxyPod
from controller.publish.kube import Objects
from controller.render import RenderOutput
from controller.rendergate import RenderGate
from controller.retained.checkpoint import TemplateRef
from controller.retained.store import RetainedStateStore
from controller.term.plans import PlanMemory


class RunDeployment(Protocol):
    """Apply `output` to the pods named in `only` (all when None) through the fenced
    deployment path; `bootstrap_only` is recovery's apply (Dispatcher.deploy)."""

    def __call__(
        self, output: RenderOutput, only: set[str] | None, bootstrap_only: bool = False
    ) -> dict[str, str]: ...


class RecoveryHost(Protocol):
    store: RetainedStateStore
    objects: Objects
    template: TemplateRef
    deployer: Deployer
    gate: RenderGate
    plans: PlanMemory
    run_deployment: RunDeployment
    check_term: Callable[[], None]

    @property
    def last_good(self) -> RenderOutput | None:
        """The output this term accepted for dispatch; recovery stops once there is one."""

    def targets(self, only: set[str] | None = None) -> list[HAProxyPod]:
        """The HAProxy pods to read or deploy to now (with an IP, not terminating)."""

    def alive(self) -> bool:
        """The term still holds and is not stopping."""

    def notice(self, type_: str, reason: str, message: str) -> None:
        """Record an Event once per (reason, message) within the term."""

    def wake(self, timeout: float) -> None:
        """Wait up to `timeout`; returns early when the term is woken (stop, render)."""

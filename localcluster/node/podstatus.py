"""Pod status computation the way the kubelet does it. Pure: no I/O, no clock reads."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Condition types the node owns; every other condition (readiness gates, ...) belongs to
# someone else and is carried over untouched.
NODE_CONDITION_TYPES = ("PodScheduled", "Initialized", "ContainersReady", "Ready")


@dataclass(frozen=True)
class Condition:
    type: str
    status: str  # "True" | "False" | "Unknown"
    reason: str = ""
    message: str = ""


@dataclass(frozen=True)
class ContainerView:
    """What the node knows about one container, enough to derive pod-level status."""

    name: str
    ready: bool
    state: str  # "waiting" | "running" | "terminated"
    exit_code: int | None = None
    will_restart: bool = False


def containers_ready_condition(containers: list[ContainerView], phase: str) -> Condition:
    """ContainersReady: every container is ready (a Succeeded pod is 'PodCompleted')."""
    if phase == "Succeeded":
        return Condition("ContainersReady", "False", "PodCompleted")
    unready = [c.name for c in containers if not c.ready]
    if unready:
        return Condition(
            "ContainersReady",
            "False",
            "ContainersNotReady",
            f"containers with unready status: [{' '.join(unready)}]",
        )
    return Condition("ContainersReady", "True")


def pod_ready_condition(
    containers_ready: Condition,
    readiness_gates: list[str],
    conditions: dict[str, str],
) -> Condition:
    """The kubelet rule: Ready = ContainersReady and every readiness gate condition is True.

    `conditions` maps condition type to status as currently recorded on the pod, so gates
    written by other managers (server-side apply, status patches) count.
    """
    if containers_ready.status != "True":
        return Condition("Ready", "False", containers_ready.reason, containers_ready.message)
    problems = []
    for gate in readiness_gates:
        status = conditions.get(gate)
        if status is None:
            problems.append(
                f"corresponding condition of pod readiness gate {gate!r} does not exist."
            )
        elif status != "True":
            problems.append(
                f'the status of pod readiness gate {gate!r} is not "True", but {status}'
            )
    if problems:
        return Condition("Ready", "False", "ReadinessGatesNotReady", ", ".join(problems))
    return Condition("Ready", "True")


def pod_phase(containers: list[ContainerView], restart_policy: str, initialized: bool) -> str:
    """Phase as the kubelet derives it from container states."""
    if not containers or not initialized:
        return "Pending"
    running = sum(1 for c in containers if c.state == "running")
    waiting = sum(1 for c in containers if c.state == "waiting" and not c.will_restart)
    restarting = sum(1 for c in containers if c.will_restart)
    terminated = [c for c in containers if c.state == "terminated" and not c.will_restart]
    if waiting and not running and not restarting:
        return "Pending"
    if running or restarting:
        return "Running"
    if len(terminated) == len(containers):
        if all(c.exit_code == 0 for c in terminated):
            return "Succeeded"
        return "Failed"
    return "Pending"


@dataclass(frozen=True)
class PodConditions:
    scheduled: Condition
    initialized: Condition
    containers_ready: Condition
    ready: Condition
    others: list[dict[str, Any]] = field(default_factory=list)

    def node_conditions(self) -> list[Condition]:
        return [self.scheduled, self.initialized, self.containers_ready, self.ready]


def compute_conditions(
    containers: list[ContainerView],
    phase: str,
    initialized: Condition,
    readiness_gates: list[str],
    existing: list[dict[str, Any]],
) -> PodConditions:
    """All four node conditions; `existing` (pod.status.conditions) provides gate statuses."""
    current = {c.get("type", ""): c.get("status", "") for c in existing}
    cr = containers_ready_condition(containers, phase)
    if initialized.status != "True":
        cr = Condition("ContainersReady", "False", "ContainersNotInitialized", initialized.message)
    ready = pod_ready_condition(cr, readiness_gates, current)
    others = [c for c in existing if c.get("type") not in NODE_CONDITION_TYPES]
    return PodConditions(Condition("PodScheduled", "True"), initialized, cr, ready, others)


def merge_conditions(
    existing: list[dict[str, Any]], mine: list[Condition], now: str
) -> list[dict[str, Any]]:
    """Replace only the node's own condition types, keeping transition times when unchanged.

    Conditions owned by other managers keep their position and content exactly.
    """
    by_type = {c.get("type"): c for c in existing}
    out: list[dict[str, Any]] = []
    for cond in mine:
        old = by_type.get(cond.type)
        changed = old is None or old.get("status") != cond.status
        entry: dict[str, Any] = {
            "type": cond.type,
            "status": cond.status,
            "lastProbeTime": None,
            "lastTransitionTime": now if changed else old.get("lastTransitionTime", now),
        }
        if cond.reason:
            entry["reason"] = cond.reason
        if cond.message:
            entry["message"] = cond.message
        out.append(entry)
    mine_types = {c.type for c in mine}
    out.extend(c for c in existing if c.get("type") not in mine_types)
    return out


def readiness_gate_types(pod: dict[str, Any]) -> list[str]:
    gates = (pod.get("spec") or {}).get("readinessGates") or []
    return [g["conditionType"] for g in gates if g.get("conditionType")]


def ready_since(pod: dict[str, Any]) -> str | None:
    """lastTransitionTime of a True Ready condition, for minReadySeconds."""
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready" and cond.get("status") == "True":
            return cond.get("lastTransitionTime")
    return None

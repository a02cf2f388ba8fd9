"""Deployment as a fenced leader task: the dispatcher of a term sends it to the leader queue
with the term's token; the task re-checks the token before the side effect, so a task that
outlived its term (delayed in the broker, redelivered) does nothing."""

from __future__ import annotations

from typing import Any

from controller.leader import summarize_outcomes
from controller.leader_tasks import Fence, leader_task


@leader_task("controller.leader.deploy")
def deploy(
    fence: Fence, plan_id: str, only: list[str] | None = None, bootstrap_only: bool = False
) -> dict[str, Any]:
    from controller.runtime import current_replica

    replica = current_replica()
    pipeline = replica.pipeline if replica is not None else None
    if pipeline is None or pipeline.token != fence.token:
        return {"status": "stale", "reason": "no pipeline for this term in this process"}
    output = replica.plans.get(plan_id)
    if output is None:
        return {"status": "unknown_plan", "plan_id": plan_id}
    fence.check()
    outcomes = pipeline.deploy(
        output, only=set(only) if only else None, bootstrap_only=bootstrap_only
    )
    return {"status": "done", "plan_id": plan_id, "pods": summarize_outcomes(outcomes)}


@leader_task("controller.leader.publish")
def publish(fence: Fence) -> dict[str, Any]:
    """The throttled publication of the term's output, receipts and checkpoint."""
    from controller.runtime import current_replica

    replica = current_replica()
    pipeline = replica.pipeline if replica is not None else None
    if pipeline is None or pipeline.token != fence.token:
        return {"status": "stale", "reason": "no pipeline for this term in this process"}
    fence.check()
    pipeline.publish()
    return {"status": "done"}

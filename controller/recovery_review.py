"""Manual recovery review (issue 9): the leader's dry run and the approved run.

The Django app's tasks (checkpoints.tasks) run on the leader queue, in the leader's process,
and call these. Both re-collect everything: approval re-checks every ADR-0033 condition and
dispatches through the same fenced path as automatic recovery.
"""

from __future__ import annotations

from typing import Any

from contract import PodAction
from controller import recovery


def _pipeline() -> Any:
    from controller.replica import current_replica

    replica = current_replica()
    pipeline = replica.pipeline if replica is not None else None
    if pipeline is None or not pipeline.term_valid():
        raise RuntimeError("this process holds no live leadership term")
    return pipeline


def evaluate(review_id: int) -> recovery.RecoveryEvaluation:
    """Every recovery check as a dry run, with the current HAProxy's validation output."""
    return recovery.evaluate(_pipeline())


def execute(review_id: int) -> dict[str, Any]:
    """Run recovery for an approved review, re-checking everything first."""
    pipeline = _pipeline()
    if pipeline.state.last_good is not None:
        return {
            "succeeded": False,
            "detail": "rendering works: new pods get the current render, not a checkpoint",
        }
    result = recovery.evaluate(pipeline)
    if not result.verdict.eligible or result.output is None:
        return {"succeeded": False, "detail": f"not eligible now: {result.verdict.reason}"}
    if not result.validated:
        return {"succeeded": False, "detail": f"current HAProxy refuses it: {result.validation}"}
    done = recovery.dispatch(pipeline, result)
    ok = bool(done) and all(_deployed(v) for v in done.values())
    detail = ", ".join(f"{pod}: {what}" for pod, what in sorted(done.items())) or "no target"
    return {"succeeded": ok, "detail": detail}


def _deployed(summary: str) -> bool:
    action = PodAction.of_summary(summary)
    return action is not None and action.deployed

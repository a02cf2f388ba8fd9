"""Celery tasks of the site: the mirror and the leader's side of a recovery review."""

from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings

from checkpoints import recovery
from controller import recovery_review

log = logging.getLogger(__name__)


@shared_task(name="checkpoints.evaluate_recovery_review")
def evaluate_recovery_review(review_id: int) -> str:
    """Dry-run every recovery check for a review (runs on the leader queue).

    Calls controller.recovery_review.evaluate(review_id), which returns the controller's
    RecoveryEvaluation (see checkpoints.recovery.as_result). A worker that holds no live
    leadership term, or any error, is recorded as a failed verdict, never a silent pass.
    """
    review = recovery.start_evaluation(review_id)
    if review is None:
        return "skipped"
    try:
        result = recovery.as_result(recovery_review.evaluate(review_id))
    except Exception as exc:  # a failed evaluation is a verdict, never a silent pass
        log.exception("recovery evaluation of review %s failed", review_id)
        result = {
            "eligible": False,
            "verdicts": [{"check": "controller-evaluation", "passed": False, "detail": str(exc)}],
            "summary": "evaluation raised an error",
        }
    return str(recovery.record_evaluation(review_id, result).status)


@shared_task(name="checkpoints.run_approved_recovery")
def run_approved_recovery(review_id: int) -> str:
    """Run recovery for an approved review through controller.recovery_review.execute.

    execute(review_id) re-checks everything on the fenced path and returns
    {"succeeded": bool, "detail": str}.
    """
    review = recovery.start_run(review_id)
    if review is None:
        return "skipped"
    try:
        result = recovery_review.execute(review_id) or {}
    except Exception as exc:
        log.exception("recovery of review %s failed", review_id)
        result = {"succeeded": False, "detail": str(exc)}
    outcome = recovery.record_outcome(
        review_id, bool(result.get("succeeded")), str(result.get("detail", ""))
    )
    return str(outcome.status)


@shared_task(name="checkpoints.expire_recovery_reviews")
def expire_recovery_reviews() -> int:
    return recovery.expire_stale()


@shared_task(name="checkpoints.run_mirror")
def run_mirror(
    namespace: str | None = None, kubeconfig: str | None = None, duration: float | None = None
) -> str:
    """Run the Kubernetes -> PostgreSQL mirror (for `duration` seconds, or until stopped)."""
    from checkpoints.mirror import run_forever

    run_forever(
        kubeconfig or settings.HAPTIC_KUBECONFIG or None,
        namespace or settings.HAPTIC_NAMESPACE,
        duration,
    )
    return "stopped"

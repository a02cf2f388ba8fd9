"""Celery tasks of the site: the mirror and the leader's side of a recovery review."""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from typing import Any

from celery import shared_task
from django.conf import settings

from checkpoints import recovery

log = logging.getLogger(__name__)

UNAVAILABLE = "controller recovery evaluation not available"


# Where the controller provides evaluate(review_id) and execute(review_id). The second name
# exists because controller/recovery.py is a module today, so "recovery.review" needs it to
# become a package first.
CONTROLLER_MODULES = ("controller.recovery.review", "controller.recovery_review")


def _controller_function(name: str) -> Callable[[int], Any] | None:
    """The controller's review function `name`, or None while it does not provide one."""
    for module_name in CONTROLLER_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        function = getattr(module, name, None)
        if function is not None:
            return function
    return None


@shared_task(name="checkpoints.evaluate_recovery_review")
def evaluate_recovery_review(review_id: int) -> str:
    """Dry-run every recovery check for a review (runs on the leader queue).

    Calls controller.recovery.review.evaluate(review_id), which returns the dict that
    checkpoints.recovery.record_evaluation documents or the controller's RecoveryEvaluation
    (see checkpoints.recovery.as_result). Without it the review is recorded ineligible with
    the verdict "controller recovery evaluation not available".
    """
    review = recovery.start_evaluation(review_id)
    if review is None:
        return "skipped"
    evaluate = _controller_function("evaluate")
    if evaluate is None:
        result: dict[str, Any] = {
            "eligible": False,
            "verdicts": [
                {"check": "controller-evaluation", "passed": False, "detail": UNAVAILABLE}
            ],
            "summary": UNAVAILABLE,
        }
    else:
        try:
            result = recovery.as_result(evaluate(review_id))
        except Exception as exc:  # a failed evaluation is a verdict, never a silent pass
            log.exception("recovery evaluation of review %s failed", review_id)
            result = {
                "eligible": False,
                "verdicts": [
                    {"check": "controller-evaluation", "passed": False, "detail": repr(exc)}
                ],
                "summary": "evaluation raised an error",
            }
    return str(recovery.record_evaluation(review_id, result).status)


@shared_task(name="checkpoints.run_approved_recovery")
def run_approved_recovery(review_id: int) -> str:
    """Run recovery for an approved review through controller.recovery.review.execute.

    execute(review_id) re-checks everything on the fenced path and returns
    {"succeeded": bool, "detail": str}.
    """
    review = recovery.start_run(review_id)
    if review is None:
        return "skipped"
    execute = _controller_function("execute")
    if execute is None:
        return str(
            recovery.record_outcome(
                review_id, False, "controller recovery execution not available"
            ).status
        )
    try:
        result = execute(review_id) or {}
    except Exception as exc:
        log.exception("recovery of review %s failed", review_id)
        result = {"succeeded": False, "detail": repr(exc)}
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

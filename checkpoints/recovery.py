"""The manual recovery review flow: request, evaluation, decision, expiry and outcome.

The site never evaluates or runs recovery itself. Evaluation and execution are Celery tasks
on the leader queue (checkpoints.tasks), where the current leader calls the controller's
recovery code; this module keeps the review's state machine and writes every step to the
audit log.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from checkpoints.audit import audit
from checkpoints.models import Checkpoint, RecoveryReview, RecoveryVerdict
from config import env

Status = RecoveryReview.Status
DECIDABLE = {Status.REQUESTED, Status.EVALUATING, Status.ELIGIBLE, Status.INELIGIBLE}
EXPIRABLE = DECIDABLE


class ReviewError(Exception):
    """A transition the review's current state does not allow."""


def review_ttl() -> timedelta:
    """How long an evaluation stays valid for approval (fleet state moves on)."""
    return timedelta(seconds=getattr(settings, "HAPTIC_REVIEW_TTL_SECONDS", 900))


def leader_queue() -> str:
    """The queue only the current leader consumes (the controller's HAPTIC_LEADER_QUEUE)."""
    return getattr(settings, "HAPTIC_LEADER_QUEUE", "") or env.leader_queue()


def as_result(evaluation: Any) -> dict[str, Any]:
    """The record_evaluation dict from what the controller's dry run returns.

    Accepts the dict itself, or the controller's RecoveryEvaluation shape: `.verdict` with
    `eligible`, `reason`, `checkpoint` (`.uid`) and `checks` (`name`, `passed`, `detail`,
    `pod`), plus `.validation` (the current haproxy's output) and `.validated`.
    """
    if isinstance(evaluation, dict):
        return evaluation
    verdict = evaluation.verdict
    checks = [
        {"check": c.name, "pod": getattr(c, "pod", ""), "passed": c.passed, "detail": c.detail}
        for c in verdict.checks
    ]
    validated = bool(getattr(evaluation, "validated", False))
    checks.append(
        {
            "check": "haproxy-validation",
            "pod": "",
            "passed": validated,
            "detail": "current binary accepted the recovered output"
            if validated
            else "not validated by the current binary",
        }
    )
    checkpoint = getattr(verdict, "checkpoint", None)
    return {
        "eligible": bool(verdict.eligible) and validated,
        "verdicts": checks,
        "haproxy_output": str(getattr(evaluation, "validation", "") or ""),
        "summary": str(getattr(verdict, "reason", "") or ""),
        "checkpoint_uid": getattr(checkpoint, "uid", None),
    }


def request_review(user: AbstractBaseUser, reason: str, template_name: str = "") -> RecoveryReview:
    """An operator asks the leader for a dry-run evaluation of recovery."""
    reason = (reason or "").strip()
    if not reason:
        raise ReviewError("a reason is required")
    with transaction.atomic():
        review = RecoveryReview.objects.create(
            requested_by=user,
            reason=reason,
            template_name=template_name,
            expires_at=timezone.now() + review_ttl(),
        )
        audit(user, "recovery_review.requested", review, reason=reason)
        transaction.on_commit(lambda: _send("checkpoints.evaluate_recovery_review", review.pk))
    return review


def _send(task_name: str, review_id: int) -> None:
    from haptic_site.celery import app

    app.send_task(task_name, args=[review_id], queue=leader_queue())


def start_evaluation(review_id: int) -> RecoveryReview | None:
    """Mark a review evaluating; None when it is gone or already decided."""
    with transaction.atomic():
        review = RecoveryReview.objects.select_for_update().filter(pk=review_id).first()
        if review is None or review.status not in (Status.REQUESTED, Status.EVALUATING):
            return None
        review.status = Status.EVALUATING
        review.save(update_fields=["status"])
        audit(None, "recovery_review.evaluating", review)
    return review


def record_evaluation(review_id: int, result: dict[str, Any]) -> RecoveryReview:
    """Store the leader's dry-run verdicts.

    `result`: {"eligible": bool, "verdicts": [{"check", "pod", "passed", "detail"}],
    "haproxy_output": str, "summary": str, "checkpoint_uid": str | None}. A review is
    eligible only if the evaluation says so and no verdict failed.
    """
    verdicts = list(result.get("verdicts") or [])
    eligible = bool(result.get("eligible")) and all(v.get("passed") for v in verdicts)
    with transaction.atomic():
        review = RecoveryReview.objects.select_for_update().get(pk=review_id)
        if review.status not in (Status.REQUESTED, Status.EVALUATING):
            raise ReviewError(f"review {review_id} is {review.status}, not awaiting evaluation")
        RecoveryVerdict.objects.bulk_create(
            RecoveryVerdict(
                review=review,
                check_name=str(v.get("check", ""))[:128],
                pod_name=str(v.get("pod") or "")[:253],
                passed=bool(v.get("passed")),
                detail=str(v.get("detail", "")),
            )
            for v in verdicts
        )
        uid = result.get("checkpoint_uid")
        if uid:
            review.checkpoint = Checkpoint.objects.filter(uid=uid).first()
        review.status = Status.ELIGIBLE if eligible else Status.INELIGIBLE
        review.haproxy_validation_output = str(result.get("haproxy_output") or "")
        review.summary = str(result.get("summary") or "")
        review.evaluated_at = timezone.now()
        review.expires_at = review.evaluated_at + review_ttl()
        review.save()
        audit(
            None,
            "recovery_review.evaluated",
            review,
            status=str(review.status),
            checkpoint=review.checkpoint.name if review.checkpoint else None,
            verdicts=[
                {
                    "check": str(v.get("check", "")),
                    "pod": str(v.get("pod") or ""),
                    "passed": bool(v.get("passed")),
                    "detail": str(v.get("detail", ""))[:500],
                }
                for v in verdicts
            ],
        )
    return review


def expire_stale(now: Any = None) -> int:
    """Expire reviews whose evaluation is too old to act on."""
    now = now or timezone.now()
    count = 0
    with transaction.atomic():
        stale = RecoveryReview.objects.select_for_update().filter(
            status__in=list(EXPIRABLE), expires_at__lt=now
        )
        for review in stale:
            review.status = Status.EXPIRED
            review.save(update_fields=["status"])
            audit(None, "recovery_review.expired", review)
            count += 1
    return count


def _decide(review_id: int, user: AbstractBaseUser, approve: bool, comment: str) -> RecoveryReview:
    # Expire first, in its own transaction, so a refused decision still records the expiry.
    expire_stale()
    with transaction.atomic():
        review = RecoveryReview.objects.select_for_update().get(pk=review_id)
        if approve and review.status != Status.ELIGIBLE:
            raise ReviewError(
                f"only an eligible review can be approved (this one is {review.status})"
            )
        if not approve and review.status not in DECIDABLE:
            raise ReviewError(f"a {review.status} review cannot be rejected")
        review.status = Status.APPROVED if approve else Status.REJECTED
        review.decided_by = user
        review.decided_at = timezone.now()
        review.decision_comment = comment
        review.save()
        audit(
            user,
            "recovery_review.approved" if approve else "recovery_review.rejected",
            review,
            comment=comment,
        )
        if approve:
            transaction.on_commit(lambda: _send("checkpoints.run_approved_recovery", review.pk))
    return review


def approve(review_id: int, user: AbstractBaseUser, comment: str = "") -> RecoveryReview:
    """Approve an eligible review: the leader runs recovery through the normal fenced path."""
    return _decide(review_id, user, True, comment)


def reject(review_id: int, user: AbstractBaseUser, comment: str = "") -> RecoveryReview:
    return _decide(review_id, user, False, comment)


def start_run(review_id: int) -> RecoveryReview | None:
    with transaction.atomic():
        review = RecoveryReview.objects.select_for_update().filter(pk=review_id).first()
        if review is None or review.status != Status.APPROVED:
            return None
        review.status = Status.RUNNING
        review.save(update_fields=["status"])
        audit(None, "recovery_review.running", review)
    return review


def record_outcome(review_id: int, succeeded: bool, detail: str) -> RecoveryReview:
    with transaction.atomic():
        review = RecoveryReview.objects.select_for_update().get(pk=review_id)
        review.status = Status.SUCCEEDED if succeeded else Status.FAILED
        review.outcome = detail
        review.finished_at = timezone.now()
        review.save()
        audit(None, f"recovery_review.{review.status}", review, detail=detail)
    return review

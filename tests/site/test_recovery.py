"""The recovery review flow: request, leader evaluation task, decisions, expiry, audit."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from typing import Any

import pytest
import redis
from django.utils import timezone

from checkpoints import recovery, tasks
from checkpoints.models import AuditLog, Checkpoint, RecoveryReview, TaskRun
from controller import recovery_review

pytestmark = pytest.mark.django_db


def _actions(review: RecoveryReview) -> list[str]:
    return list(
        AuditLog.objects.filter(object_type="recoveryreview", object_id=str(review.pk))
        .order_by("id")
        .values_list("action", flat=True)
    )


def test_reason_is_required(operator: Any) -> None:
    with pytest.raises(recovery.ReviewError):
        recovery.request_review(operator, "   ")
    assert RecoveryReview.objects.count() == 0


def test_request_sends_the_evaluation_to_the_leader_queue(
    operator: Any, settings: Any, redis_url: str, django_capture_on_commit_callbacks: Any
) -> None:
    queue = f"leader-test-{uuid.uuid4().hex[:8]}"
    settings.HAPTIC_LEADER_QUEUE = queue
    broker = redis.Redis.from_url(redis_url)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            review = recovery.request_review(operator, "replacement pods stay NotReady")
        messages = broker.lrange(queue, 0, -1)
        assert len(messages) == 1
        message = json.loads(messages[0])
        assert message["headers"]["task"] == "checkpoints.evaluate_recovery_review"
        assert str(review.pk) in message["headers"]["argsrepr"]
    finally:
        broker.delete(queue)
        broker.close()
    assert _actions(review) == ["recovery_review.requested"]
    entry = AuditLog.objects.get(action="recovery_review.requested")
    assert entry.actor == operator and entry.data["reason"] == "replacement pods stay NotReady"


def test_a_worker_without_a_live_term_records_an_ineligible_review(operator: Any) -> None:
    """The real controller evaluation runs only under a live leadership term; in a process
    that holds none, the review is recorded ineligible with that reason, never passed."""
    review = recovery.request_review(operator, "why not")
    assert tasks.evaluate_recovery_review(review.pk) == "ineligible"
    review.refresh_from_db()
    (verdict,) = review.verdicts.all()
    assert not verdict.passed
    assert verdict.detail == "this process holds no live leadership term"
    assert _actions(review) == [
        "recovery_review.requested",
        "recovery_review.evaluating",
        "recovery_review.evaluated",
    ]
    evaluated = AuditLog.objects.get(action="recovery_review.evaluated")
    assert evaluated.data["status"] == "ineligible"
    assert evaluated.data["verdicts"] == [
        {
            "check": "controller-evaluation",
            "pod": "",
            "passed": False,
            "detail": "this process holds no live leadership term",
        }
    ]
    # Evaluating twice does nothing.
    assert tasks.evaluate_recovery_review(review.pk) == "skipped"


@pytest.fixture
def fake_controller(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Stands in for the controller's evaluation (which needs a live term and a fleet; the
    end-to-end test tests/e2e/test_recovery_review.py runs the real one); the site depends
    only on the functions' contract (docs in checkpoints.recovery.record_evaluation)."""
    results: dict[str, Any] = {}
    monkeypatch.setattr(recovery_review, "evaluate", lambda review_id: results["evaluate"])
    monkeypatch.setattr(recovery_review, "execute", lambda review_id: results["execute"])
    return results


def test_eligible_evaluation_approved_and_run(
    operator: Any, fake_controller: dict, history: dict
) -> None:
    fake_controller["evaluate"] = {
        "eligible": True,
        "checkpoint_uid": history["new"]["metadata"]["uid"],
        "haproxy_output": "Configuration file is valid",
        "summary": "all checks passed",
        "verdicts": [
            {"check": "intent-matches", "passed": True, "detail": "plan p"},
            {"check": "bootstrap-pod", "pod": "haproxy-2", "passed": True, "detail": "no plan"},
        ],
    }
    fake_controller["execute"] = {"succeeded": True, "detail": "applied to haproxy-2"}
    review = recovery.request_review(operator, "scale-up")
    assert tasks.evaluate_recovery_review(review.pk) == "eligible"
    review.refresh_from_db()
    assert review.checkpoint == Checkpoint.objects.get(uid=history["new"]["metadata"]["uid"])
    assert review.haproxy_validation_output == "Configuration file is valid"
    assert [(v.check_name, v.pod_name) for v in review.verdicts.all()] == [
        ("intent-matches", ""),
        ("bootstrap-pod", "haproxy-2"),
    ]
    recovery.approve(review.pk, operator, "go")
    assert tasks.run_approved_recovery(review.pk) == "succeeded"
    review.refresh_from_db()
    assert review.outcome == "applied to haproxy-2"
    assert _actions(review) == [
        "recovery_review.requested",
        "recovery_review.evaluating",
        "recovery_review.evaluated",
        "recovery_review.approved",
        "recovery_review.running",
        "recovery_review.succeeded",
    ]


def test_any_failed_verdict_makes_it_ineligible(operator: Any, fake_controller: dict) -> None:
    fake_controller["evaluate"] = {
        "eligible": True,
        "verdicts": [
            {"check": "fleet-agreement", "pod": "haproxy-1", "passed": False, "detail": "mixed"}
        ],
    }
    review = recovery.request_review(operator, "x")
    assert tasks.evaluate_recovery_review(review.pk) == "ineligible"
    with pytest.raises(recovery.ReviewError):
        recovery.approve(review.pk, operator)


def test_evaluation_error_is_a_failed_verdict(
    operator: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(review_id: int) -> dict:
        raise RuntimeError("lease read timed out")

    monkeypatch.setattr(recovery_review, "evaluate", boom)
    review = recovery.request_review(operator, "x")
    assert tasks.evaluate_recovery_review(review.pk) == "ineligible"
    assert "lease read timed out" in review.verdicts.get().detail


def test_approved_run_without_a_live_term_fails_honestly(operator: Any) -> None:
    review = RecoveryReview.objects.create(
        requested_by=operator,
        reason="r",
        status="eligible",
        expires_at=timezone.now() + timedelta(minutes=5),
    )
    recovery.approve(review.pk, operator)
    assert tasks.run_approved_recovery(review.pk) == "failed"
    review.refresh_from_db()
    assert review.outcome == "this process holds no live leadership term"


def test_expired_review_cannot_be_approved(operator: Any) -> None:
    review = RecoveryReview.objects.create(
        requested_by=operator,
        reason="r",
        status="eligible",
        expires_at=timezone.now() - timedelta(seconds=1),
    )
    with pytest.raises(recovery.ReviewError, match="expired"):
        recovery.approve(review.pk, operator)
    review.refresh_from_db()
    assert review.status == "expired"
    assert "recovery_review.expired" in _actions(review)


def test_expire_stale_task(operator: Any) -> None:
    old = RecoveryReview.objects.create(
        requested_by=operator,
        reason="r",
        status="ineligible",
        expires_at=timezone.now() - timedelta(hours=1),
    )
    fresh = RecoveryReview.objects.create(
        requested_by=operator,
        reason="r",
        status="eligible",
        expires_at=timezone.now() + timedelta(hours=1),
    )
    done = RecoveryReview.objects.create(
        requested_by=operator,
        reason="r",
        status="succeeded",
        expires_at=timezone.now() - timedelta(hours=1),
    )
    assert tasks.expire_recovery_reviews() == 1
    assert [RecoveryReview.objects.get(pk=r.pk).status for r in (old, fresh, done)] == [
        "expired",
        "eligible",
        "succeeded",
    ]


def test_controller_evaluation_shape_is_converted() -> None:
    """The controller's dry run returns RecoveryEvaluation(verdict=RecoveryVerdict(...));
    the review records each of its checks, plus whether the current haproxy validated."""
    from types import SimpleNamespace as NS

    from checkpoints.recovery import as_result

    verdict = NS(
        eligible=True,
        reason="all pods are bootstrap pods",
        checkpoint=NS(uid="cp-uid"),
        checks=(
            NS(name="intent", passed=True, detail="plan p", pod=""),
            NS(name="bootstrap", passed=True, detail="no plan", pod="haproxy-3"),
        ),
    )
    ok = as_result(NS(verdict=verdict, validation="Configuration file is valid", validated=True))
    assert ok["eligible"] and ok["checkpoint_uid"] == "cp-uid"
    assert [(v["check"], v["pod"], v["passed"]) for v in ok["verdicts"]] == [
        ("intent", "", True),
        ("bootstrap", "haproxy-3", True),
        ("haproxy-validation", "", True),
    ]
    refused = as_result(NS(verdict=verdict, validation="[ALERT] nbproc", validated=False))
    assert not refused["eligible"] and refused["haproxy_output"] == "[ALERT] nbproc"


def test_task_runs_are_recorded_from_celery_signals(operator: Any) -> None:
    review = recovery.request_review(operator, "history")
    outcome = tasks.evaluate_recovery_review.apply(args=[review.pk])
    assert outcome.get() == "ineligible"
    run = TaskRun.objects.get(task_id=outcome.id)
    assert run.task_name == "checkpoints.evaluate_recovery_review"
    assert run.status == "success" and run.finished_at is not None
    assert run.result == "'ineligible'" and str(review.pk) in run.args

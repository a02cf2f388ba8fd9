"""Manual recovery review through the real leader: the dashboard's request goes to the
leader queue, the leader evaluates every ADR-0033 check as a dry run, verdicts land in
PostgreSQL per check and per pod, and every step is audited."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.contrib.auth import get_user_model
from django.db import connection

from checkpoints import recovery as reviews
from checkpoints.models import AuditLog, RecoveryReview
from devstack import stack
from devstack.stack import wait_for
from tests.e2e.harness import System, start_system
from tests.e2e.test_retained_configuration import break_rendering, checkpoint_for_intent

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def _database_url() -> str:
    s = connection.settings_dict
    host = s.get("HOST") or "127.0.0.1"
    port = s.get("PORT") or 5432
    user = s.get("USER") or "postgres"
    return f"postgres://{user}@{host}:{port}/{s['NAME']}"


@pytest.fixture
def system(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[System]:
    # The controllers write verdicts into this test's database.
    monkeypatch.setenv("DATABASE_URL", _database_url())
    system = start_system(request.node.name, haproxy_replicas=2)
    monkeypatch.setenv("HAPTIC_LEADER_QUEUE", f"leader-{system.queue_suffix}")
    try:
        system.apply(stack.backend("echo", replicas=1))
        system.apply([stack.ingress("echo", "x.example", "echo")])
        wait_for(lambda: system.serves("x.example", "echo-"), 120, what="x.example served")
        wait_for(lambda: checkpoint_for_intent(system), 60, what="checkpoint")
        yield system
    finally:
        system.stop()


def test_the_leader_evaluates_a_requested_review_and_records_each_verdict(
    system: System,
) -> None:
    operator = get_user_model().objects.create_user("op", password="x")
    break_rendering(system)
    review = reviews.request_review(operator, "rendering is blocked; can new pods start?")
    done = wait_for(
        lambda: RecoveryReview.objects.filter(
            pk=review.pk, status__in=["eligible", "ineligible"]
        ).first(),
        60,
        what="review evaluated by the leader",
    )
    verdicts = {(v.check_name, v.pod_name): v for v in done.verdicts.all()}
    pods = {p.metadata.name for p in system.haproxy_pods(ready_only=False)}
    assert verdicts[("deployment-intent", "")].passed
    assert verdicts[("checkpoint-matches-intent", "")].passed
    assert verdicts[("checkpoint-integrity", "")].passed
    for pod in pods:
        assert verdicts[("pod-reachable", pod)].passed
        assert verdicts[("pod-state", pod)].passed  # configured and agreeing
    # Every pod is configured: nothing to recover, so the review is not eligible.
    assert not verdicts[("bootstrap-targets", "")].passed
    assert done.status == "ineligible"
    assert "valid" in done.haproxy_validation_output.lower()
    actions = list(
        AuditLog.objects.filter(object_id=str(review.pk)).values_list("action", flat=True)
    )
    assert "recovery_review.requested" in actions
    assert "recovery_review.evaluated" in actions

"""A browser session in headless Chromium against the live site and a real Celery worker.

Needs Debian's chromium (/usr/bin/chromium, apt package `chromium`); Playwright drives it
through its Python package only, no browser download. Screenshots go to
test-artifacts/site/.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection
from playwright.sync_api import expect

from checkpoints.models import AuditLog, Checkpoint, RecoveryReview, TaskRun
from tests.conftest import celery_worker
from tests.site.conftest import ARTIFACTS, sign_in

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]


@pytest.fixture
def leader_worker(settings: Any, redis_url: str) -> Iterator[str]:
    """A Celery worker consuming a private leader queue, on the test database."""
    queue = f"leader-browser-{uuid.uuid4().hex[:8]}"
    settings.HAPTIC_LEADER_QUEUE = queue
    s = connection.settings_dict
    try:
        with celery_worker(
            queue,
            DATABASE_URL=f"postgres://{s['USER']}@{s['HOST']}:{s['PORT']}/{s['NAME']}",
            REDIS_URL=redis_url,
        ):
            yield queue
    finally:
        import redis

        broker = redis.Redis.from_url(redis_url)
        broker.delete(queue)
        broker.close()


def test_login_history_diff_and_recovery_review(
    live_server: Any,
    operator: Any,
    history: dict,
    leader_worker: str,
    browser_tab: Any,
) -> None:
    old = Checkpoint.objects.get(uid=history["old"]["metadata"]["uid"])
    new = Checkpoint.objects.get(uid=history["new"]["metadata"]["uid"])

    page = browser_tab
    # Anonymous: the history redirects to the login page.
    page.goto(f"{live_server.url}/checkpoints/")
    expect(page).to_have_url(f"{live_server.url}/accounts/login/?next=/checkpoints/")
    sign_in(page, operator)
    expect(page).to_have_url(f"{live_server.url}/checkpoints/")

    # Fleet: each pod with its plan and whether it matches the intent.
    page.click("text=Fleet")
    expect(page.locator("table.fleet")).to_contain_text("haproxy-0")
    page.screenshot(path=str(ARTIFACTS / "00-fleet.png"), full_page=True)
    page.click("nav >> text=Checkpoints")

    # History: newest first, the intended checkpoint marked.
    intended = page.locator("li.intended")
    expect(intended).to_have_count(1)
    expect(intended).to_contain_text(new.name)
    page.screenshot(path=str(ARTIFACTS / "01-checkpoint-history.png"), full_page=True)

    # Diff between the two.
    page.check(f"input[name=a][value='{old.pk}']")
    page.check(f"input[name=b][value='{new.pk}']")
    page.click("#diff-form button[type=submit]")
    expect(page).to_have_url(re.compile(r"/checkpoints/diff/\?"))
    assert f"a={old.pk}" in page.url and f"b={new.pk}" in page.url
    expect(page.locator("tr.replace td.l").first).to_contain_text("timeout client 5s")
    expect(page.locator("tr.replace td.r").first).to_contain_text("timeout client 30s")
    page.screenshot(path=str(ARTIFACTS / "02-diff.png"), full_page=True)

    # Recovery review: request it, then see the leader's verdicts arrive.
    page.click("text=Recovery reviews")
    page.fill("#reason", "replacement pods stay NotReady after render failure")
    page.click("text=Request recovery review")
    expect(page.locator("#review-status")).to_be_visible()
    page.screenshot(path=str(ARTIFACTS / "03-review-requested.png"), full_page=True)
    # refresh.js re-fetches the fragment until the worker has evaluated it.
    expect(page.locator("#review-status")).to_have_text("ineligible", timeout=90_000)
    verdict = page.locator("#verdicts tr.fail")
    expect(verdict).to_have_count(1)
    # This worker leads nothing, so the real evaluation refuses (the full leader path
    # is tests/e2e/test_recovery_review.py).
    expect(verdict).to_contain_text("holds no live leadership term")
    page.screenshot(path=str(ARTIFACTS / "04-review-verdicts.png"), full_page=True)

    review = RecoveryReview.objects.get()
    assert review.status == "ineligible" and review.requested_by == operator
    assert list(
        AuditLog.objects.filter(object_id=str(review.pk))
        .order_by("id")
        .values_list("action", flat=True)
    ) == ["recovery_review.requested", "recovery_review.evaluating", "recovery_review.evaluated"]
    run = TaskRun.objects.get(task_name="checkpoints.evaluate_recovery_review")
    assert run.status == "success" and leader_worker in run.worker
    for name in (
        "00-fleet",
        "01-checkpoint-history",
        "02-diff",
        "03-review-requested",
        "04-review-verdicts",
    ):
        assert (ARTIFACTS / f"{name}.png").stat().st_size > 1000

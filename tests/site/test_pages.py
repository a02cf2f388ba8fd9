"""Dashboard pages, login, CSRF and the admin."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from checkpoints.models import AuditLog, Checkpoint, RecoveryReview
from tests.site import factories as f

pytestmark = pytest.mark.django_db

PAGES = [
    "/",
    "/checkpoints/",
    "/terms/",
    "/events/",
    "/warnings/",
    "/hub/",
    "/reviews/",
    "/audit/",
    "/api/docs/",
    "/token/",
]


def login(user: Any, enforce_csrf: bool = False) -> Client:
    client = Client(enforce_csrf_checks=enforce_csrf)
    client.force_login(user)
    return client


@pytest.mark.parametrize("url", PAGES)
def test_anonymous_is_sent_to_login(url: str) -> None:
    response = Client().get(url)
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/?next=")


@pytest.mark.parametrize("url", PAGES)
def test_signed_in_without_role_is_forbidden(url: str, nobody: Any) -> None:
    assert login(nobody).get(url).status_code == 403


@pytest.mark.parametrize("url", PAGES)
def test_viewer_reads_every_page(url: str, viewer: Any, history: dict) -> None:
    response = login(viewer).get(url)
    assert response.status_code == 200
    assert b"<script" not in response.content.split(b"</head>")[1]  # content is plain HTML


def test_fleet_page_shows_pods_intent_and_leader(viewer: Any, history: dict) -> None:
    html = login(viewer).get("/").content.decode()
    assert "haproxy-0" in html and "haproxy-1" in html
    assert "controller-a" in html
    assert html.count(">matches<") == 1 and html.count(">differs<") == 1
    fragment = login(viewer).get("/?fragment=1").content.decode()
    assert "haproxy-0" in fragment and "<html" not in fragment


def test_history_marks_the_intended_checkpoint_and_diff_is_side_by_side(
    viewer: Any, history: dict
) -> None:
    client = login(viewer)
    html = client.get("/checkpoints/").content.decode()
    new = Checkpoint.objects.get(uid=history["new"]["metadata"]["uid"])
    old = Checkpoint.objects.get(uid=history["old"]["metadata"]["uid"])
    assert html.count('<li class="intended') == 1
    assert html.index(new.name) < html.index(old.name)
    detail = client.get(f"/checkpoints/{new.pk}/").content.decode()
    assert "timeout client 30s" in detail and "b.example backend_b" in detail
    diff = client.get(f"/checkpoints/diff/?a={old.pk}&b={new.pk}").content.decode()
    assert '<tr class="replace">' in diff
    assert "timeout client 5s" in diff and "timeout client 30s" in diff
    assert "Bytes not stored" in diff  # the certificate compares by checksum only
    assert client.get("/checkpoints/diff/?a=x&b=1").status_code == 400
    filtered = client.get(f"/checkpoints/?checksum={old.checksum}").content.decode()
    assert old.name in filtered and new.name not in filtered


def test_operator_requests_a_review_through_the_form(operator: Any) -> None:
    client = login(operator, enforce_csrf=True)
    page = client.get("/reviews/")
    assert b"Request recovery review" in page.content
    assert client.post("/reviews/", {"reason": "no csrf"}).status_code == 403
    token = page.context["csrf_token"]
    response = client.post(
        "/reviews/", {"reason": "pods NotReady", "csrfmiddlewaretoken": str(token)}
    )
    review = RecoveryReview.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/reviews/{review.pk}/"
    assert review.reason == "pods NotReady" and review.requested_by == operator
    detail = client.get(f"/reviews/{review.pk}/").content.decode()
    assert "No verdicts yet" in detail and "recovery_review.requested" in detail


def test_empty_reason_is_refused(operator: Any) -> None:
    response = login(operator).post("/reviews/", {"reason": " "}, follow=True)
    assert b"a reason is required" in response.content
    assert RecoveryReview.objects.count() == 0


def test_viewer_sees_no_buttons_and_cannot_post(viewer: Any, operator: Any) -> None:
    review = RecoveryReview.objects.create(requested_by=operator, reason="r", status="eligible")
    client = login(viewer)
    assert b"Request recovery review" not in client.get("/reviews/").content
    assert b"Approve" not in client.get(f"/reviews/{review.pk}/").content
    assert client.post("/reviews/", {"reason": "x"}).status_code == 403
    assert client.post(f"/reviews/{review.pk}/approve/").status_code == 403
    review.refresh_from_db()
    assert review.status == "eligible"


def test_operator_approves_and_rejects_from_the_page(operator: Any) -> None:
    eligible = RecoveryReview.objects.create(requested_by=operator, reason="r", status="eligible")
    other = RecoveryReview.objects.create(requested_by=operator, reason="r", status="ineligible")
    client = login(operator)
    assert b"Approve" in client.get(f"/reviews/{eligible.pk}/").content
    client.post(f"/reviews/{eligible.pk}/approve/", {"comment": "ok"})
    client.post(f"/reviews/{other.pk}/reject/")
    refused = client.post(f"/reviews/{other.pk}/approve/", follow=True)
    assert b"only an eligible review can be approved" in refused.content
    eligible.refresh_from_db()
    other.refresh_from_db()
    assert (eligible.status, other.status) == ("approved", "rejected")
    assert AuditLog.objects.filter(actor=operator).count() == 2


def test_login_and_logout_pages(viewer: Any) -> None:
    client = Client()
    assert client.get("/accounts/login/").status_code == 200
    response = client.post(
        "/accounts/login/", {"username": "vera", "password": "correct-horse-battery-staple"}
    )
    assert response.status_code == 302
    assert client.get("/").status_code == 200
    assert client.post("/accounts/logout/").status_code == 200
    assert client.get("/").status_code == 302


def test_admin_is_read_only_for_mirrored_data_and_audit(
    admin_client: Client, history: dict
) -> None:
    for model in ("checkpoint", "podreceipt", "deploymentintent", "auditlog", "recoveryreview"):
        assert admin_client.get(f"/admin/checkpoints/{model}/").status_code == 200
        assert admin_client.get(f"/admin/checkpoints/{model}/add/").status_code == 403
    cp = Checkpoint.objects.first()
    page = admin_client.get(f"/admin/checkpoints/checkpoint/{cp.pk}/change/")
    assert page.status_code == 200 and b'name="_save"' not in page.content
    assert admin_client.get(f"/admin/checkpoints/checkpoint/{cp.pk}/delete/").status_code == 403
    for model in (
        "auxiliaryobject",
        "checkpointfile",
        "leadershipterm",
        "kubeevent",
        "hubstatus",
        "mirrorstate",
        "recoveryverdict",
    ):
        assert admin_client.get(f"/admin/checkpoints/{model}/").status_code == 200
    assert admin_client.get("/admin/checkpoints/checkpoint/?q=" + cp.checksum).status_code == 200


def test_api_docs_page_lists_every_operation(viewer: Any) -> None:
    html = login(viewer).get("/api/docs/").content.decode()
    for path in (
        "/api/v1/checkpoints/diff/",
        "/api/v1/recovery-reviews/{id}/approve/",
        "/api/v1/fleet/",
    ):
        assert path in html
    assert "created_after" in html  # filter parameters are documented


def test_token_page_creates_and_rotates_a_working_token(viewer: Any) -> None:
    client = login(viewer)
    assert b"You have no API token yet" in client.get("/token/").content
    first = client.post("/token/").context["token"].key
    second = client.post("/token/").context["token"].key
    assert first != second
    assert AuditLog.objects.filter(action="api_token.rotated", actor=viewer).count() == 2
    api = Client(HTTP_AUTHORIZATION=f"Token {second}")
    assert api.get("/api/v1/checkpoints/").status_code == 200
    assert (
        Client(HTTP_AUTHORIZATION=f"Token {first}").get("/api/v1/checkpoints/").status_code == 401
    )


def test_obtain_token_with_credentials(viewer: Any) -> None:
    response = Client().post(
        "/api/auth/token/", {"username": "vera", "password": "correct-horse-battery-staple"}
    )
    assert response.status_code == 200
    token = response.json()["token"]
    assert Client(HTTP_AUTHORIZATION=f"Token {token}").get("/api/v1/fleet/").status_code == 200
    # Well-formed credentials that sign nobody in are an authentication failure.
    bad = Client().post("/api/auth/token/", {"username": "vera", "password": "wrong"})
    assert bad.status_code == 401 and bad.headers["WWW-Authenticate"] == "Token"
    assert Client().post("/api/auth/token/", {"username": "vera"}).status_code == 400


def test_warnings_page_shows_the_last_render_and_filters(viewer: Any) -> None:
    warnings = f.render_warnings()
    client = login(viewer)
    fleet = client.get("/").content.decode()
    assert 'id="render-warnings" href="/warnings/">2</a>' in fleet
    page = client.get("/warnings/").content.decode()
    assert warnings["missing"].message in page and warnings["conflict"].message in page
    assert warnings["stale"].message not in page  # an earlier render's Event is history
    assert "2026-11-30T08:00:00+00:00" in page  # last seen, from the Event
    by_reason = client.get("/warnings/?reason=RouteConflict").content.decode()
    assert warnings["conflict"].message in by_reason
    assert warnings["missing"].message not in by_reason
    by_namespace = client.get("/warnings/?namespace=shop&kind=Ingress").content.decode()
    assert warnings["missing"].message in by_namespace
    assert warnings["conflict"].message not in by_namespace


def test_fleet_page_shows_the_first_warning_rows_and_links_to_all(
    viewer: Any, monkeypatch: Any
) -> None:
    # Issue 18: each skipped or degraded object is a row on the fleet page (object, reason,
    # message); the first few are there, the warnings page has them all.
    monkeypatch.setattr("dashboard.views.FLEET_WARNING_ROWS", 1)
    warnings = f.render_warnings()
    fleet = login(viewer).get("/").content.decode()
    first = warnings["missing"]  # rows sort by reason: ServiceNotFound after RouteConflict
    shown = warnings["conflict"]
    assert f"<td>{shown.kind} {shown.namespace}/{shown.name}</td>" in fleet
    assert f"<td>{shown.reason}</td>" in fleet and shown.message in fleet
    assert first.message not in fleet and warnings["stale"].message not in fleet
    assert 'href="/warnings/">all 2 warnings</a>' in fleet


def test_warnings_pager_keeps_the_filters(viewer: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr("dashboard.views.PAGE_SIZE", 1)
    f.render_warnings()
    page = login(viewer).get("/warnings/?kind=Ingress").content.decode()
    assert 'href="?kind=Ingress&amp;page=2"' in page

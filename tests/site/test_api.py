"""REST API: every endpoint, filters, permissions and constant query counts."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from checkpoints import store
from checkpoints.models import Checkpoint, RecoveryReview, RecoveryVerdict
from controller.render.warnings import warnings_summary
from tests.site import factories as f
from tests.site.conftest import token_client

pytestmark = pytest.mark.django_db

LISTS = [
    "/api/v1/checkpoints/",
    "/api/v1/intents/",
    "/api/v1/receipts/",
    "/api/v1/fleet/",
    "/api/v1/terms/",
    "/api/v1/events/",
    "/api/v1/render-warnings/",
    "/api/v1/hub-status/",
    "/api/v1/mirror-state/",
    "/api/v1/recovery-reviews/",
    "/api/v1/audit-log/",
    "/api/v1/task-runs/",
]


@pytest.mark.parametrize(
    "url", [*LISTS, "/api/v1/", "/api/schema/", "/api/v1/checkpoints/diff/?a=1&b=2"]
)
def test_anonymous_gets_401(url: str, history: dict) -> None:
    response = APIClient().get(url)
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Token")


@pytest.mark.parametrize("url", [*LISTS, "/api/schema/", "/api/v1/"])
def test_user_without_role_gets_403(url: str, nobody: Any, history: dict) -> None:
    assert token_client(nobody).get(url).status_code == 403


@pytest.mark.parametrize("url", LISTS)
def test_viewer_lists_every_endpoint_paginated(
    url: str, viewer_api: APIClient, history: dict
) -> None:
    response = viewer_api.get(url)
    assert response.status_code == 200, response.content
    assert {"count", "results", "next", "previous"} <= set(response.json())


def test_checkpoint_list_and_detail(viewer_api: APIClient, history: dict) -> None:
    body = viewer_api.get("/api/v1/checkpoints/").json()
    assert body["count"] == 2
    newest = body["results"][0]
    assert newest["uid"] == history["new"]["metadata"]["uid"]  # newest first
    assert newest["promoted"] is True
    assert "files" not in newest and "content" not in newest
    detail = viewer_api.get(f"/api/v1/checkpoints/{newest['id']}/").json()
    files = {x["path"]: x for x in detail["files"]}
    assert files["haproxy.cfg"]["content"].count("30s") == 1  # decompressed
    assert files["maps/hosts.map"]["content"] == "a.example backend_a\nb.example backend_b\n"
    assert detail["worker_receipt"]["pod_name"] == "haproxy-0"
    assert detail["worker_receipt"]["applied_plan_id"] == history["plan"]
    old_id = body["results"][1]["id"]
    old = viewer_api.get(f"/api/v1/checkpoints/{old_id}/").json()
    cert = next(x for x in old["files"] if x["kind"] == "certificate")
    assert cert["content"] is None and cert["checksum"] == f.sha("PRIVATE")


def test_checkpoint_filters(viewer_api: APIClient, history: dict) -> None:
    def count(query: str) -> int:
        response = viewer_api.get("/api/v1/checkpoints/?" + query)
        assert response.status_code == 200, response.content
        return response.json()["count"]

    assert count(f"checksum={history['checksum']}") == 1
    assert count(f"plan_id={history['plan']}") == 1
    assert count("template=haptic") == 2
    assert count(f"template={f.TEMPLATE_UID}") == 2
    assert count("template=other") == 0
    assert count("created_after=2026-11-30T08:03:00Z") == 1
    assert count("created_before=2026-11-30T08:03:00Z") == 1
    assert count("collected=true") == 0
    store.delete_haproxycfg(history["old"])
    assert count("collected=true") == 1
    assert count("collected=false") == 1
    assert viewer_api.get("/api/v1/checkpoints/?created_after=yesterday").status_code == 400


def test_diff_endpoint(viewer_api: APIClient, history: dict) -> None:
    old = Checkpoint.objects.get(uid=history["old"]["metadata"]["uid"])
    new = Checkpoint.objects.get(uid=history["new"]["metadata"]["uid"])
    response = viewer_api.get(f"/api/v1/checkpoints/diff/?a={old.pk}&b={new.pk}")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["a"]["id"] == old.pk and body["b"]["checksum"] == new.checksum
    files = {x["path"]: x for x in body["files"]}
    assert files["haproxy.cfg"]["status"] == "changed"
    assert "-  timeout client 5s" in files["haproxy.cfg"]["diff"]
    assert "+  timeout client 30s" in files["haproxy.cfg"]["diff"]
    assert "+b.example backend_b" in files["maps/hosts.map"]["diff"]
    assert files["certs/a.pem"]["status"] == "removed"
    assert files["certs/a.pem"]["diff"] == ""
    assert viewer_api.get("/api/v1/checkpoints/diff/?a=1").status_code == 400
    assert viewer_api.get(f"/api/v1/checkpoints/diff/?a={old.pk}&b=999999").status_code == 404


def test_receipt_filters_and_fleet(viewer_api: APIClient, history: dict) -> None:
    assert viewer_api.get("/api/v1/receipts/?pod=haproxy-0").json()["count"] == 1
    assert viewer_api.get(f"/api/v1/receipts/?plan={history['plan']}").json()["count"] == 1
    assert viewer_api.get(f"/api/v1/receipts/?checksum={history['checksum']}").json()["count"] == 1
    assert viewer_api.get("/api/v1/receipts/?pod=missing").json()["count"] == 0
    fleet = viewer_api.get("/api/v1/fleet/").json()["results"]
    assert [(p["pod_name"], p["matches_intent"]) for p in fleet] == [
        ("haproxy-0", True),
        ("haproxy-1", False),
    ]


def test_the_fleet_api_shows_what_a_pod_still_serves_after_a_failed_apply(
    viewer_api: APIClient, history: dict
) -> None:
    """The leader's entry after a failed apply names only the output it tried and the
    error; the pod keeps serving what it acknowledged last. /api/v1/fleet/ says so, as the
    fleet and pod pages do (one function, checkpoints.queries.current_state).

    Bug (checkpoints/api/views.py, FleetViewSet): the API served the failed entry itself,
    so the pod had no plan, no mode, and a checksum it never ran."""
    old = history["old"]["spec"]
    store.apply_haproxycfg(
        f.published(
            [
                f.receipt(
                    "haproxy-0", history["plan"], history["checksum"], "2026-11-30T08:06:00Z"
                ),
                {
                    "podName": "haproxy-1",
                    "podUID": "pod-uid-haproxy-1",
                    "checksum": history["checksum"],
                    "lastError": "reload refused: bind :8080 in use",
                    "consecutiveErrors": 1,
                    "deployedAt": "2026-11-30T08:07:00Z",
                },
            ],
            retained=[history["new"]],
            rv="3",
        )
    )
    pods = {p["pod_name"]: p for p in viewer_api.get("/api/v1/fleet/").json()["results"]}
    failed = pods["haproxy-1"]
    assert (failed["applied_plan_id"], failed["checksum"], failed["mode"]) == (
        old["planID"],
        old["checksum"],
        "reload",
    )
    assert failed["acknowledged_at"] == "2026-11-30T08:01:00Z"
    assert failed["last_attempt_checksum"] == history["checksum"]
    assert failed["deployed_at"] == "2026-11-30T08:07:00Z"
    assert failed["consecutive_errors"] == 1 and "bind :8080" in failed["last_error"]
    assert failed["matches_intent"] is False
    assert pods["haproxy-0"]["matches_intent"] is True
    assert pods["haproxy-0"]["last_attempt_checksum"] == pods["haproxy-0"]["checksum"]


def test_receipts_name_the_term_that_applied_them(viewer_api: APIClient, history: dict) -> None:
    """A receipt names the holder and epoch whose token applied it; one published before
    receipts carried a term still loads, with none. The receipts API filters by term."""
    store.apply_haproxycfg(
        f.published(
            [
                f.receipt(
                    "haproxy-0",
                    history["plan"],
                    history["checksum"],
                    "2026-11-30T08:09:00Z",
                    term=("controller-b", 4),
                ),
                f.receipt(
                    "haproxy-1", history["plan"], history["checksum"], "2026-11-30T08:09:00Z"
                ),
            ],
            rv="4",
        )
    )
    by_term = viewer_api.get("/api/v1/receipts/?term_epoch=4").json()["results"]
    assert [(r["pod_name"], r["term_holder"], r["term_epoch"]) for r in by_term] == [
        ("haproxy-0", "controller-b", 4)
    ]
    assert viewer_api.get("/api/v1/receipts/?term_holder=controller-b").json()["count"] == 1
    assert viewer_api.get("/api/v1/receipts/?term_epoch=3").json()["count"] == 0
    older = viewer_api.get("/api/v1/receipts/?pod=haproxy-1&ordering=-deployed_at").json()
    assert (older["results"][0]["term_holder"], older["results"][0]["term_epoch"]) == ("", None)
    fleet = {p["pod_name"]: p for p in viewer_api.get("/api/v1/fleet/").json()["results"]}
    assert (fleet["haproxy-0"]["term_holder"], fleet["haproxy-0"]["term_epoch"]) == (
        "controller-b",
        4,
    )
    assert fleet["haproxy-1"]["term_epoch"] is None


def test_intents_terms_events_hub(viewer_api: APIClient, history: dict) -> None:
    intents = viewer_api.get("/api/v1/intents/").json()["results"]
    assert [(i["plan_id"], i["epoch"], i["holder"]) for i in intents] == [
        (history["plan"], 3, "controller-a")
    ]
    assert viewer_api.get("/api/v1/intents/?epoch=4").json()["count"] == 0
    terms = viewer_api.get("/api/v1/terms/?open=true").json()["results"]
    assert [(t["holder"], t["epoch"]) for t in terms] == [("controller-a", 3)]
    events = viewer_api.get("/api/v1/events/?reason=RetainedConfigActive").json()
    assert events["count"] == 1
    assert viewer_api.get("/api/v1/events/?type=Normal").json()["count"] == 0


def test_read_only_endpoints_refuse_writes(operator_api: APIClient, history: dict) -> None:
    assert operator_api.post("/api/v1/checkpoints/", {}).status_code == 405
    cp = Checkpoint.objects.first()
    assert operator_api.delete(f"/api/v1/checkpoints/{cp.pk}/").status_code == 405
    assert operator_api.post("/api/v1/audit-log/", {}).status_code == 405


def test_viewer_cannot_request_or_decide(viewer_api: APIClient, viewer: Any) -> None:
    assert viewer_api.post("/api/v1/recovery-reviews/", {"reason": "x"}).status_code == 403
    review = RecoveryReview.objects.create(requested_by=viewer, reason="r", status="eligible")
    assert viewer_api.post(f"/api/v1/recovery-reviews/{review.pk}/approve/").status_code == 403
    assert viewer_api.post(f"/api/v1/recovery-reviews/{review.pk}/reject/").status_code == 403
    review.refresh_from_db()
    assert review.status == "eligible"


def test_operator_requests_with_reason_and_decides(operator_api: APIClient, operator: Any) -> None:
    assert operator_api.post("/api/v1/recovery-reviews/", {"reason": "  "}).status_code == 400
    assert operator_api.post("/api/v1/recovery-reviews/", {}).status_code == 400
    response = operator_api.post("/api/v1/recovery-reviews/", {"reason": "pods stuck NotReady"})
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["status"], body["requested_by"], body["reason"]) == (
        "requested",
        "otto",
        "pods stuck NotReady",
    )
    # Not evaluated yet: approval is refused, rejection allowed.
    approve = operator_api.post(f"/api/v1/recovery-reviews/{body['id']}/approve/")
    assert approve.status_code == 409
    eligible = RecoveryReview.objects.create(requested_by=operator, reason="r", status="eligible")
    ok = operator_api.post(f"/api/v1/recovery-reviews/{eligible.pk}/approve/", {"comment": "go"})
    assert ok.status_code == 200 and ok.json()["status"] == "approved"
    assert ok.json()["decided_by"] == "otto"
    rejected = operator_api.post(f"/api/v1/recovery-reviews/{body['id']}/reject/")
    assert rejected.json()["status"] == "rejected"
    actions = operator_api.get("/api/v1/audit-log/?object_type=recoveryreview").json()["results"]
    assert {a["action"] for a in actions} == {
        "recovery_review.requested",
        "recovery_review.approved",
        "recovery_review.rejected",
    }
    assert all(a["actor_name"] == "otto" for a in actions)


def test_session_authentication_needs_csrf(operator: Any, client: Any) -> None:
    csrf_client = APIClient(enforce_csrf_checks=True)
    csrf_client.force_login(operator)
    assert csrf_client.get("/api/v1/checkpoints/").status_code == 200
    response = csrf_client.post("/api/v1/recovery-reviews/", {"reason": "x"})
    assert response.status_code == 403
    assert "CSRF" in response.json()["detail"]


def _bulk_checkpoints(n: int) -> None:
    for i in range(n):
        store.apply_haproxycfg(
            f.checkpoint(f"global\n  # {i}\n", created=f"2026-11-30T09:{i % 60:02d}:00Z")
        )


def _queries(client: APIClient, url: str) -> int:
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(url).status_code == 200
    return len(ctx.captured_queries)


def test_list_query_count_does_not_grow_with_page_size(
    viewer_api: APIClient, operator: Any, history: dict
) -> None:
    _bulk_checkpoints(30)
    for i in range(30):
        review = RecoveryReview.objects.create(requested_by=operator, reason=f"r{i}")
        RecoveryVerdict.objects.create(review=review, check_name="c", passed=False)
        store.apply_haproxycfg(
            f.published([f.receipt(f"pod-{i}", "p", "c", "2026-11-30T08:00:00Z")], uid=f"pub-{i}")
        )
    for url in (
        "/api/v1/checkpoints/?limit={}",
        "/api/v1/receipts/?limit={}",
        "/api/v1/recovery-reviews/?limit={}",
        "/api/v1/fleet/?limit={}",
    ):
        assert _queries(viewer_api, url.format(2)) == _queries(viewer_api, url.format(30)), url


def test_odd_but_valid_time_offsets_are_normalised(viewer_api: APIClient, history: dict) -> None:
    # Found by the schema fuzz run: Python accepts +19:43, PostgreSQL does not.
    response = viewer_api.get("/api/v1/events/", {"since": "1208-09-22T07:22:38+19:43"})
    assert response.status_code == 200 and response.json()["count"] == 1
    # Before what Python holds, yet valid RFC 3339: the earliest instant, so every row.
    earliest = viewer_api.get(
        "/api/v1/checkpoints/", {"created_after": "0001-01-01T00:00:00+01:00"}
    )
    assert earliest.status_code == 200
    assert earliest.json()["count"] == Checkpoint.objects.count() == 2


def test_render_warnings_lists_the_last_render_filtered(viewer_api: APIClient) -> None:
    warnings = f.render_warnings()

    def names(query: str = "") -> list[tuple[str, str, str]]:
        response = viewer_api.get("/api/v1/render-warnings/" + query)
        assert response.status_code == 200, response.content
        return [(r["reason"], r["namespace"], r["name"]) for r in response.json()["results"]]

    body = viewer_api.get("/api/v1/render-warnings/").json()
    assert body["count"] == 2  # the stale Secret's Event is not current
    first = body["results"][0]
    assert first["kind"] == "Ingress" and first["message"] == warnings["conflict"].message
    assert first["last_seen"].startswith("2026-11-30T08:00:00")
    assert names() == [("RouteConflict", "blog", "www"), ("ServiceNotFound", "shop", "web")]
    assert names("?reason=ServiceNotFound") == [("ServiceNotFound", "shop", "web")]
    assert names("?namespace=blog") == [("RouteConflict", "blog", "www")]
    assert names("?kind=Secret") == []
    assert names("?limit=1&offset=1") == [("ServiceNotFound", "shop", "web")]
    assert viewer_api.get("/api/v1/render-warnings/?limit=0").status_code == 400


def test_render_warning_gone_from_the_summary_is_not_current(viewer_api: APIClient) -> None:
    warnings = f.render_warnings()
    store.apply_template_config(f.template_config({"renderWarnings": {"count": 0}}))
    assert viewer_api.get("/api/v1/render-warnings/").json()["count"] == 0
    rest = [warnings["missing"]]
    store.apply_template_config(f.template_config({"renderWarnings": warnings_summary(rest)}))
    body = viewer_api.get("/api/v1/render-warnings/").json()
    assert [r["name"] for r in body["results"]] == ["web"]

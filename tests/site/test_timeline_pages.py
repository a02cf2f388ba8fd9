"""The timeline page, its strip on the fleet page and the record pages, over the mirrored
sample history (written through the mirror's store, read from PostgreSQL)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any

import pytest
from django.test import Client

from checkpoints import store
from checkpoints.models import (
    Checkpoint,
    DeploymentIntent,
    HubStatus,
    KubeEvent,
    LeadershipTerm,
    PodReceipt,
    RecoveryReview,
)
from controller.hub.promotion import EVENT_ABORTED, EVENT_PROMOTED
from tests.site import factories as f

pytestmark = pytest.mark.django_db

SVG = "{http://www.w3.org/2000/svg}"


def login(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def picture(html: str) -> ET.Element:
    match = re.search(r"<svg .*?</svg>", html, re.S)
    assert match, "no SVG on the page"
    return ET.fromstring(match.group(0))


def links(root: ET.Element) -> dict[str, str]:
    """href -> the lane it is drawn in."""
    found = {}
    for lane in root.iter(f"{SVG}g"):
        if lane.get("class") == "lane":
            y, h = float(lane[0].get("y")), float(lane[0].get("height"))
            for a in root.iter(f"{SVG}a"):
                shape = a[0]
                top = float(shape.get("y") or float(shape.get("cy")) - 4)
                if y <= top < y + h:
                    found[a.get("href")] = lane.get("data-lane")
    return found


@pytest.mark.parametrize("url", ["/timeline/", "/records/term/1/"])
def test_timeline_needs_a_role(url: str, nobody: Any) -> None:
    assert Client().get(url).status_code == 302
    assert login(nobody).get(url).status_code == 403


def test_timeline_draws_every_kind_of_record_in_its_lane(viewer: Any, history: dict) -> None:
    store.apply_event(
        f.event("RenderFailed", "template error: backends.cfg.j2 line 3", uid="render-fail")
    )
    client = login(viewer)
    response = client.get("/timeline/")
    assert response.status_code == 200
    html = response.content.decode()
    assert b"<script" not in response.content.split(b"</head>")[1]  # the picture is markup
    drawn = links(picture(html))
    term = LeadershipTerm.objects.get()
    intent = DeploymentIntent.objects.get()
    new = Checkpoint.objects.get(uid=history["new"]["metadata"]["uid"])
    old = Checkpoint.objects.get(uid=history["old"]["metadata"]["uid"])
    r0 = PodReceipt.objects.get(pod_name="haproxy-0")
    r1 = PodReceipt.objects.get(pod_name="haproxy-1")
    events = {e.reason: e for e in KubeEvent.objects.all()}
    assert drawn == {
        f"/records/term/{term.pk}/": "leadership",
        f"/records/intent/{intent.pk}/": "intents",
        f"/checkpoints/{old.pk}/": "checkpoints",
        f"/checkpoints/{new.pk}/": "checkpoints",
        f"/records/receipt/{r0.pk}/": "pod haproxy-0",
        f"/records/receipt/{r1.pk}/": "pod haproxy-1",
        f"/records/event/{events['RetainedConfigActive'].pk}/": "recoveries",
        f"/records/event/{events['RenderFailed'].pk}/": "render failures",
    }
    # Every lane is drawn, also those with nothing in the window.
    lanes = [g.get("data-lane") for g in picture(html).iter(f"{SVG}g") if g.get("data-lane")]
    assert lanes == [
        "leadership",
        "intents",
        "checkpoints",
        "recoveries",
        "render failures",
        "hub",
        "pod haproxy-0",
        "pod haproxy-1",
    ]
    # Each mark's link opens its record.
    for href in drawn:
        assert client.get(href).status_code == 200, href
    record = client.get(f"/records/receipt/{r0.pk}/").content.decode()
    assert history["plan"] in record and "haproxy-0" in record and "show on the timeline" in record


def test_start_and_end_zoom_to_a_range(viewer: Any, history: dict) -> None:
    client = login(viewer)
    html = client.get("/timeline/?start=2026-11-30T08:04:00Z&end=2026-11-30T08:07:00Z").content
    root = picture(html.decode())
    assert (root.get("data-start"), root.get("data-end")) == (
        "2026-11-30T08:04:00Z",
        "2026-11-30T08:07:00Z",
    )
    drawn = links(root)
    new = Checkpoint.objects.get(uid=history["new"]["metadata"]["uid"])
    old = Checkpoint.objects.get(uid=history["old"]["metadata"]["uid"])
    assert f"/checkpoints/{new.pk}/" in drawn and f"/checkpoints/{old.pk}/" not in drawn
    haproxy1 = PodReceipt.objects.get(pod_name="haproxy-1")  # deployed 08:01
    assert f"/records/receipt/{haproxy1.pk}/" not in drawn
    # The zoom links halve and double the range around its centre.
    text = html.decode()
    assert "start=2026-11-30T08%3A04%3A45Z&amp;end=2026-11-30T08%3A06%3A15Z" in text  # in
    assert "start=2026-11-30T08%3A02%3A30Z&amp;end=2026-11-30T08%3A08%3A30Z" in text  # out
    # An explicit end stops the live refresh; the default range follows the history.
    assert "data-refresh-url" not in text.split('id="timeline"')[1].split(">")[0]
    following = client.get("/timeline/").content.decode()
    assert "data-refresh-url" in following.split('id="timeline"')[1].split(">")[0]
    bad = client.get("/timeline/?start=yesterday").content.decode()
    assert "must be ISO 8601" in bad


def test_the_fleet_page_has_the_strip_and_polls_every_half_second(
    viewer: Any, history: dict
) -> None:
    client = login(viewer)
    html = client.get("/").content.decode()
    term = LeadershipTerm.objects.get()
    assert f"/records/term/{term.pk}/" in links(picture(html))
    assert 'data-refresh-url="/?fragment=1" data-refresh-seconds="0.5"' in html
    # The 0.5 s fragment is the fleet alone, without the picture.
    fragment = client.get("/?fragment=1").content.decode()
    assert "haproxy-0" in fragment and "<svg" not in fragment
    strip = client.get("/timeline/?fragment=1").content.decode()
    assert "<svg" in strip and "<html" not in strip


def test_record_pages(viewer: Any, history: dict, admin_user: Any) -> None:
    client = login(viewer)
    assert client.get("/records/nothing/1/").status_code == 404
    assert client.get("/records/term/999999/").status_code == 404
    intent = DeploymentIntent.objects.get()
    html = client.get(f"/records/intent/{intent.pk}/").content.decode()
    assert "<pre>{\n  &quot;claimedAt&quot;" in html  # the claim, as formatted JSON
    assert "/admin/" not in html.split("<main>")[1]  # viewers are not staff
    staff = login(admin_user).get(f"/records/intent/{intent.pk}/").content.decode()
    assert f"/admin/checkpoints/deploymentintent/{intent.pk}/change/" in staff


def test_past_the_limit_the_page_says_only_the_newest_are_drawn(
    viewer: Any, history: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dashboard import marks

    client = login(viewer)
    assert "only the newest" not in client.get("/timeline/").content.decode()
    monkeypatch.setattr(marks, "LIMIT", 2)  # two checkpoints in the sample history
    html = client.get("/timeline/").content.decode()
    assert "More than 2 records of one kind" in html


def marks_by_href(root: ET.Element) -> dict[str, ET.Element]:
    return {a.get("href"): a for a in root.iter(f"{SVG}a")}


def test_leader_change_errors_reviews_repeats_and_promotion(
    viewer: Any, operator: Any, history: dict
) -> None:
    # A second term (the first ends where it starts), a failed apply on haproxy-1, a render
    # failure seen three times, a recovery review and a published Active identity.
    store.apply_lease(
        f.leader_lease("controller-b", 4, "2026-11-30T08:07:00Z", "2026-11-30T08:09:00Z", rv="2")
    )
    failed = f.receipt("haproxy-1", "", history["checksum"], "2026-11-30T08:08:00Z")
    failed.update(mode="", lastError="refused: stale_epoch", consecutiveErrors=1)
    ok = f.receipt("haproxy-0", history["plan"], history["checksum"], "2026-11-30T08:06:00Z")
    store.apply_haproxycfg(f.published([ok, failed], retained=[history["new"]], rv="2"))
    event = f.event("RenderFailed", "backends.cfg.j2: undefined", count=3, uid="rf")
    event["firstTimestamp"] = "2026-11-30T08:01:00Z"  # lastTimestamp 08:03
    store.apply_event(event)
    store.apply_template_config(
        {
            "metadata": {"name": "haptic", "namespace": f.NS, "uid": f.TEMPLATE_UID},
            "status": {
                "activeController": {
                    "activeIdentity": "hub-b",
                    "endpoint": "https://b:6443",
                    "lastUpdated": "2026-11-30T08:07:30Z",
                }
            },
        }
    )
    review = RecoveryReview.objects.create(requested_by=operator, reason="pods NotReady")
    RecoveryReview.objects.filter(pk=review.pk).update(
        requested_at="2026-11-30T08:02:00Z",
        status="rejected",
        decided_at="2026-11-30T08:04:00Z",
    )

    root = picture(
        login(viewer)
        .get("/timeline/?start=2026-11-30T07:55:00Z&end=2026-11-30T08:10:00Z")
        .content.decode()
    )
    drawn, shapes = links(root), marks_by_href(root)
    a, b = LeadershipTerm.objects.order_by("epoch")
    for term, tone in ((a, "info"), (b, "ok")):  # ended, open
        href = f"/records/term/{term.pk}/"
        assert drawn[href] == "leadership" and shapes[href].get("class") == f"mark {tone}"
    # The ended term's bar stops where the next begins.
    bar_a, bar_b = (shapes[f"/records/term/{t.pk}/"][0] for t in (a, b))
    assert float(bar_a.get("x")) + float(bar_a.get("width")) <= float(bar_b.get("x")) + 0.1
    error = PodReceipt.objects.get(pod_name="haproxy-1", last_error__startswith="refused")
    href = f"/records/receipt/{error.pk}/"
    assert drawn[href] == "pod haproxy-1"
    assert (shapes[href].get("class"), shapes[href].get("data-kind")) == ("mark error", "error")
    assert "refused: stale_epoch" in shapes[href].findtext(f".//{SVG}title")
    render = KubeEvent.objects.get(reason="RenderFailed")
    href = f"/records/event/{render.pk}/"
    assert drawn[href] == "render failures"
    assert shapes[href][0].tag == f"{SVG}rect"  # seen 3 times: a bar from first to last
    assert drawn[f"/reviews/{review.pk}/"] == "recoveries"
    assert shapes[f"/reviews/{review.pk}/"].get("class") == "mark warn"
    hub = HubStatus.objects.get()
    assert drawn[f"/records/hub/{hub.pk}/"] == "hub"


def test_hub_promotions_and_aborted_promotions_are_drawn_in_the_hub_lane(
    viewer: Any, history: dict
) -> None:
    # The Events controller/hub/promotion.py emits, as the mirror stores them.
    promoted = f.event(EVENT_PROMOTED, "hub-b promoted to Active at epoch 5", uid="promoted")
    promoted["type"] = "Normal"
    aborted = f.event(EVENT_ABORTED, "active-reachable: https://a:6443 answered", uid="aborted")
    aborted["firstTimestamp"] = aborted["lastTimestamp"] = "2026-11-30T08:04:00Z"
    for event in (promoted, aborted):
        store.apply_event(event)
    client = login(viewer)
    root = picture(
        client.get(
            "/timeline/?start=2026-11-30T07:55:00Z&end=2026-11-30T08:10:00Z"
        ).content.decode()
    )
    drawn, shapes = links(root), marks_by_href(root)
    for reason, tone in ((EVENT_PROMOTED, "ok"), (EVENT_ABORTED, "error")):
        href = f"/records/event/{KubeEvent.objects.get(reason=reason).pk}/"
        assert drawn[href] == "hub", (reason, drawn)
        assert (shapes[href].get("class"), shapes[href].get("data-kind")) == (
            f"mark {tone}",
            reason,
        )
        assert reason in shapes[href].findtext(f".//{SVG}title")
        assert client.get(href).status_code == 200

"""The timeline and the live fleet page in headless Chromium against the live site.

Debian's chromium (/usr/bin/chromium), driven by Playwright's Python package (no browser
download), as in tests/site/test_browser.py. Screenshots go to test-artifacts/site/.
"""

from __future__ import annotations

import re
import time
from datetime import datetime
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from checkpoints import store
from checkpoints.models import LeadershipTerm
from tests.site import factories as f
from tests.site.conftest import ARTIFACTS

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]


@pytest.fixture
def page(page: Page, live_server: Any) -> Page:
    """The signed-in page (tests/site/conftest.py), opened on the timeline."""
    page.goto(f"{live_server.url}/timeline/")
    expect(page).to_have_url(f"{live_server.url}/timeline/")
    return page


def shown_range(page: Page) -> tuple[datetime, datetime]:
    svg = page.locator("svg.timeline")
    return (
        datetime.fromisoformat(svg.get_attribute("data-start").replace("Z", "+00:00")),
        datetime.fromisoformat(svg.get_attribute("data-end").replace("Z", "+00:00")),
    )


def test_timeline_marks_links_and_zoom(page: Page, live_server: Any, history: dict) -> None:
    page.reload()
    marks = page.locator("svg.timeline a.mark")
    expect(marks.first).to_be_visible()
    assert marks.count() >= 7
    for lane in ("leadership", "intents", "checkpoints", "recoveries", "pod haproxy-0"):
        expect(page.locator(f"svg.timeline g[data-lane='{lane}']")).to_have_count(1)
    page.screenshot(path=str(ARTIFACTS / "10-timeline.png"), full_page=True)

    # A mark links to its record.
    page.locator("svg.timeline a[data-kind=term]").click()
    term = LeadershipTerm.objects.get()
    expect(page).to_have_url(f"{live_server.url}/records/term/{term.pk}/")
    expect(page.locator("table#record")).to_contain_text("controller-a")
    page.go_back()
    page.locator("svg.timeline a[data-kind=checkpoint]").last.click()
    expect(page).to_have_url(re.compile(r"/checkpoints/\d+/$"))
    page.go_back()

    # The zoom buttons halve the range around its centre.
    start, end = shown_range(page)
    page.click("#tl-zoom-in")
    expect(page).to_have_url(re.compile(r"/timeline/\?start=.*&end="))
    zoomed_start, zoomed_end = shown_range(page)
    assert zoomed_start > start and zoomed_end < end
    assert abs((zoomed_end - zoomed_start) * 2 - (end - start)).total_seconds() <= 2
    page.click("#tl-zoom-out")
    start, end = shown_range(page)

    # Dragging across the picture zooms to the dragged range.
    svg = page.locator("svg.timeline")
    box = svg.bounding_box()
    assert box is not None
    scale = box["width"] / float(svg.get_attribute("viewBox").split()[2])
    x0, x1 = (float(svg.get_attribute(a)) * scale + box["x"] for a in ("data-x0", "data-x1"))
    left, right = x0 + (x1 - x0) * 0.25, x0 + (x1 - x0) * 0.75
    y = box["y"] + box["height"] / 2
    page.mouse.move(left, y)
    page.mouse.down()
    page.mouse.move((left + right) / 2, y, steps=5)
    page.mouse.move(right, y, steps=5)
    page.mouse.up()
    expect(page).not_to_have_url(page.url)
    dragged_start, dragged_end = shown_range(page)
    span = (end - start).total_seconds()
    assert abs((dragged_start - start).total_seconds() - span * 0.25) <= span * 0.02 + 1
    assert abs((dragged_end - start).total_seconds() - span * 0.75) <= span * 0.02 + 1
    page.screenshot(path=str(ARTIFACTS / "11-timeline-dragged.png"), full_page=True)
    assert (ARTIFACTS / "10-timeline.png").stat().st_size > 1000


def test_fleet_page_shows_a_changed_plan_within_a_second(
    page: Page, live_server: Any, history: dict
) -> None:
    page.goto(f"{live_server.url}/")
    expect(page.locator("table.fleet")).to_contain_text("haproxy-0")
    expect(page.locator("section.strip svg.timeline a.mark").first).to_be_visible()
    page.evaluate("window.__sameDocument = true")
    time.sleep(1.5)  # let the first poll swap in the fragment once
    plan, checksum = "feedfacecafe" + "0" * 52, f.sha("new content")
    # What the mirror writes when the ordinary HAProxyCfg reports haproxy-0 on a new plan.
    store.apply_haproxycfg(
        f.published(
            [
                f.receipt("haproxy-0", plan, checksum, "2026-11-30T08:09:00Z", mode="runtime"),
                f.receipt(
                    "haproxy-1",
                    history["old"]["spec"]["planID"],
                    history["old"]["spec"]["checksum"],
                    "2026-11-30T08:01:00Z",
                ),
            ],
            retained=[history["new"]],
            rv="2",
        )
    )
    written = time.monotonic()
    row = page.locator("table.fleet tr", has_text="haproxy-0")
    expect(row).to_contain_text("feedfacecafe", timeout=5_000)
    seen = time.monotonic() - written
    # A 1 s poll plus one request to the live server; measured ~1.0 s on an idle machine.
    assert seen < 2.0, f"the fleet page showed the new plan {seen:.2f} s after the write"
    assert page.evaluate("window.__sameDocument") is True  # no full reload
    expect(row).to_contain_text("differs")
    page.screenshot(path=str(ARTIFACTS / "12-fleet-live.png"), full_page=True)
    print(f"fleet page showed the changed plan {seen:.2f} s after the database write")

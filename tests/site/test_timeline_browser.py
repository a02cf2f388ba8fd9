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


# Counts the fleet fragment's polls as they are answered, and notes when the table first
# shows `window.__want` (the page's clock, Date.now(), is the system's, as time.time() is).
WATCH_FLEET = """want => {
  window.__sameDocument = true;
  window.__polls = 0;
  const fetch0 = window.fetch;
  window.fetch = (...args) => fetch0(...args).then(r => {
    if (String(args[0]) === '/?fragment=1') window.__polls++;
    return r;
  });
  const fleet = document.getElementById('fleet');
  new MutationObserver(() => {
    if (window.__seenAt === undefined && fleet.innerText.includes(want)) {
      window.__seenAt = Date.now();
    }
  }).observe(fleet, {childList: true, subtree: true, characterData: true});
}"""


def test_fleet_page_shows_a_changed_plan_within_a_second(
    page: Page, live_server: Any, history: dict
) -> None:
    """Issue 20: "the fleet page shows within a second that a pod changed plan", from the
    mirror's write, at the worst moment: the write lands just after the page's poll read
    the table, so only the next poll can bring it (bench/bench_live.py has the
    distribution over every moment)."""
    page.goto(f"{live_server.url}/")
    expect(page.locator("table.fleet")).to_contain_text("haproxy-0")
    expect(page.locator("section.strip svg.timeline a.mark").first).to_be_visible()
    plan, checksum = "feedfacecafe" + "0" * 52, f.sha("new content")
    page.evaluate(WATCH_FLEET, "feedfacecafe")
    page.wait_for_function("() => window.__polls >= 1", timeout=5_000)
    polls = page.evaluate("() => window.__polls")
    page.wait_for_function("n => window.__polls > n", arg=polls, timeout=5_000)
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
    written = time.time()
    page.wait_for_function("() => window.__seenAt !== undefined", timeout=10_000)
    seen = page.evaluate("() => window.__seenAt") / 1000 - written
    assert seen < 1.0, f"the fleet page showed the new plan {seen:.2f} s after the write"
    assert page.evaluate("window.__sameDocument") is True  # no full reload
    row = page.locator("table.fleet tr", has_text="haproxy-0")
    expect(row).to_contain_text("feedfacecafe")
    expect(row).to_contain_text("differs")
    page.screenshot(path=str(ARTIFACTS / "12-fleet-live.png"), full_page=True)
    print(f"fleet page showed the changed plan {seen:.2f} s after the database write")


def test_each_deployment_shows_which_way_it_went(page: Page, live_server: Any, history: dict):
    """A pod's runtime, file-only and reload deployments are told apart on the timeline (a
    ring, a square, a filled dot, each titled with its mode), on the pod's page and on the
    fleet page (issue 20: "deployments per pod (runtime / file / reload)")."""
    plan, checksum = history["plan"], history["checksum"]
    for rv, (minute, mode) in enumerate(((7, "runtime"), (8, "file-only"), (9, "reload")), 2):
        receipt = f.receipt("haproxy-0", f"{mode}-plan", checksum, f"2026-11-30T08:0{minute}:00Z")
        receipt["mode"] = mode
        if mode != "reload":
            receipt["runningPlanID"] = plan  # the worker's reload plan stays older
        store.apply_haproxycfg(f.published([receipt], retained=[history["new"]], rv=str(rv)))
    page.goto(f"{live_server.url}/timeline/?start=2026-11-30T08:06:30Z&end=2026-11-30T08:09:30Z")
    lane = page.locator("svg.timeline g[data-lane='pod haproxy-0']")
    expect(lane).to_have_count(1)
    drawn = {
        mode: page.locator(f"svg.timeline a.mark.deploy-{mode}[data-kind='{mode}']")
        for mode in ("runtime", "file-only", "reload")
    }
    for mode, mark in drawn.items():
        expect(mark).to_have_count(1)
        title = mark.locator("title").text_content() or ""
        assert title.startswith("haproxy-0 2026-11-30T08:0"), title
        assert f": {mode}, plan {mode}-plan" in title, title
    expect(drawn["file-only"].locator("rect")).to_have_count(1)  # a square, not a dot
    expect(drawn["runtime"].locator("circle")).to_have_count(1)
    ring = drawn["runtime"].locator("circle").evaluate("c => getComputedStyle(c).fill")
    dot = drawn["reload"].locator("circle").evaluate("c => getComputedStyle(c).fill")
    assert ring != dot, (ring, dot)  # a ring (white inside) against a filled dot
    expect(page.locator("#tl-deploy-legend")).to_contain_text("file-only")
    xs = [drawn[m].bounding_box()["x"] for m in ("runtime", "file-only", "reload")]
    assert xs == sorted(xs), xs  # in the order they happened along the axis
    page.screenshot(path=str(ARTIFACTS / "13-timeline-deploy-modes.png"), full_page=True)

    drawn["file-only"].click()
    expect(page).to_have_url(re.compile(r"/records/receipt/\d+/$"))
    expect(page.locator("table#record")).to_contain_text("file-only")

    page.goto(f"{live_server.url}/pods/haproxy-0/")
    rows = page.locator("table#pod-receipts tr")
    expect(rows.nth(1)).to_contain_text("reload")
    expect(rows.nth(2)).to_contain_text("file-only")
    expect(rows.nth(3)).to_contain_text("runtime")
    store.apply_haproxycfg(
        f.published(
            [
                {
                    **f.receipt("haproxy-0", "file-plan-2", checksum, "2026-11-30T08:10:00Z"),
                    "mode": "file-only",
                    "runningPlanID": plan,
                }
            ],
            retained=[history["new"]],
            rv="9",
        )
    )
    page.goto(f"{live_server.url}/")
    expect(page.locator("table.fleet tr", has_text="haproxy-0")).to_contain_text("file-only")

"""Page defects seen by an operator, checked in headless Chromium against the live site:
the Mirror table's errors, the diff of a whitespace-only change, audit data as JSON.

Needs Debian's chromium (/usr/bin/chromium); screenshots go to test-artifacts/site/.
"""

from __future__ import annotations

import re
import time
from typing import Any

import pytest
from kubernetes import client
from playwright.sync_api import Page, expect

from checkpoints import store
from checkpoints.mirror import Mirror
from checkpoints.models import AuditLog, Checkpoint, MirrorState, PodReceipt
from controller.render.warnings import warnings_summary
from localcluster.testing import ApiServer
from tests.site import factories as f
from tests.site.conftest import ARTIFACTS

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]


def test_mirror_table_shows_an_error_with_its_time_only_while_it_is_current(
    page: Page, live_server: Any, tmp_path: Any
) -> None:
    api = ApiServer.start(tmp_path / "cluster")
    mirror = Mirror(api.api_client(), f.NS, watch_timeout=3)
    try:
        client.CoreV1Api(api.api_client()).create_namespace({"metadata": {"name": f.NS}})
        mirror.start()
        assert mirror.wait_synced(timeout=30)
        fault = api.add_fault(path_regex="/leases", methods=["GET"], status=500)
        deadline = time.monotonic() + 30
        while not MirrorState.objects.filter(kind=f"{f.NS}/leases").exclude(last_error=""):
            assert time.monotonic() < deadline, "the failing watch was never recorded"
            time.sleep(0.2)
        page.goto(f"{live_server.url}/")
        row = page.locator("tr", has=page.locator("td", has_text=f"{f.NS}/leases"))
        expect(row.locator("td.mirror-error .err")).to_contain_text("500")
        expect(row.locator("td.mirror-error time")).to_have_attribute(
            "datetime", re.compile(r"^20\d\d-")
        )
        page.screenshot(path=str(ARTIFACTS / "10-mirror-error.png"), full_page=True)
        api.remove_fault(fault)
        # The page refreshes its fragment every 5 s; the retry backs off at most 10 s.
        expect(row.locator("td.mirror-error")).to_have_text("none", timeout=40_000)
        page.screenshot(path=str(ARTIFACTS / "11-mirror-recovered.png"), full_page=True)
    finally:
        mirror.stop()
        api.stop()


def test_a_whitespace_only_change_shows_what_changed(page: Page, live_server: Any) -> None:
    body = "".join(f"  server s{i} 10.0.0.{i}:80\n" for i in range(64))
    old = f.checkpoint("backend be\n" + body, created="2026-11-30T08:00:00Z")
    # Trailing blanks on one line, and no final newline: invisible when printed plainly.
    new = f.checkpoint("backend be  \n" + body.rstrip("\n"), created="2026-11-30T08:05:00Z")
    store.apply_haproxycfg(old)
    store.apply_haproxycfg(new)
    a = Checkpoint.objects.get(uid=old["metadata"]["uid"])
    b = Checkpoint.objects.get(uid=new["metadata"]["uid"])
    page.goto(f"{live_server.url}/checkpoints/diff/?a={a.pk}&b={b.pk}")
    section = page.locator("section.filediff", has_text="haproxy.cfg")
    expect(section).to_contain_text("changed")
    changed = section.locator("tr.replace")
    expect(changed).to_have_count(2)
    expect(changed.nth(0).locator("td.r span.ws")).to_have_text("\u00b7\u00b7")
    expect(changed.nth(1).locator("td.l span.eol")).to_have_count(0)
    expect(changed.nth(1).locator("td.r span.eol")).to_have_text("no newline at end of file")
    page.screenshot(path=str(ARTIFACTS / "12-diff-whitespace.png"), full_page=True)

    # Only a map changed: the config's stored checksum (the whole checkpoint's) differs, its
    # bytes do not, so it is not "changed" and the map shows its change.
    map_a = f.map_file("maps/hosts.map", "a.example be_a\n")
    map_b = f.map_file("maps/hosts.map", "a.example be_b\n")
    for child in (map_a, map_b):
        store.apply_auxiliary(child)
    with_a = f.checkpoint("backend be\n" + body, [map_a], created="2026-11-30T08:10:00Z")
    with_b = f.checkpoint("backend be\n" + body, [map_b], created="2026-11-30T08:15:00Z")
    store.apply_haproxycfg(with_a)
    store.apply_haproxycfg(with_b)
    a = Checkpoint.objects.get(uid=with_a["metadata"]["uid"])
    b = Checkpoint.objects.get(uid=with_b["metadata"]["uid"])
    page.goto(f"{live_server.url}/checkpoints/diff/?a={a.pk}&b={b.pk}")
    expect(page.locator("section.filediff.unchanged")).to_contain_text("haproxy.cfg")
    changed_map = page.locator("section.filediff.changed", has_text="maps/hosts.map")
    expect(changed_map.locator("tr.replace td.r")).to_have_text("a.example be_b")
    page.screenshot(path=str(ARTIFACTS / "14-diff-map-only.png"), full_page=True)


def test_audit_data_is_formatted_json_folded_when_long(page: Page, live_server: Any) -> None:
    AuditLog.objects.create(actor_name="system", action="short.entry", data={"reason": "drill"})
    long = {"detail": {f"pod-{i}": {"passed": i % 2 == 0, "why": "x" * 30} for i in range(8)}}
    AuditLog.objects.create(actor_name="system", action="long.entry", data=long)
    page.goto(f"{live_server.url}/audit/")
    short_row = page.locator("tr", has_text="short.entry")
    expect(short_row.locator("pre.json")).to_have_text('{\n  "reason": "drill"\n}')
    long_row = page.locator("tr", has_text="long.entry")
    folded = long_row.locator("details.audit-data")
    expect(folded.locator("pre.json")).to_be_hidden()
    folded.locator("summary").click()
    expect(folded.locator("pre.json")).to_be_visible()
    expect(folded.locator("pre.json")).to_contain_text('    "pod-0": {\n      "passed": true,')
    page.screenshot(path=str(ARTIFACTS / "13-audit-json.png"), full_page=True)


def test_pod_page_shows_its_state_every_receipt_and_the_diff_to_the_intent(
    page: Page, live_server: Any, history: dict
) -> None:
    old = history["old"]["spec"]
    failed = f.receipt("haproxy-1", history["plan"], history["checksum"], "2026-11-30T08:03:00Z")
    failed |= {"consecutiveErrors": 2, "lastError": "reload refused: bind :8080 in use"}
    # An earlier status listed the failed attempt; the latest lists the pod on the old plan.
    store.apply_haproxycfg(f.published([failed], rv="0"))
    store.apply_haproxycfg(
        f.published(
            [
                f.receipt(
                    "haproxy-0", history["plan"], history["checksum"], "2026-11-30T08:06:00Z"
                ),
                f.receipt("haproxy-1", old["planID"], old["checksum"], "2026-11-30T08:01:00Z"),
            ],
            retained=[history["new"]],
            rv="2",
        )
    )
    page.goto(f"{live_server.url}/")
    page.click("table.fleet >> text=haproxy-1")
    expect(page).to_have_url(f"{live_server.url}/pods/haproxy-1/")
    now = page.locator("#pod-now")
    expect(now).to_contain_text(old["planID"])
    expect(page.locator("#pod-intent")).to_contain_text("differs")
    rows = page.locator("#pod-receipts tr.bad, #pod-receipts tr:not(.bad):has(td)")
    expect(rows).to_have_count(2)
    expect(page.locator("#pod-receipts tr.bad")).to_contain_text("reload refused")
    page.screenshot(path=str(ARTIFACTS / "15-pod.png"), full_page=True)
    page.click("#pod-diff")
    expect(page.locator("tr.replace td.l").first).to_contain_text("timeout client 5s")
    expect(page.locator("tr.replace td.r").first).to_contain_text("timeout client 30s")
    # The pod that runs the intent says so.
    page.goto(f"{live_server.url}/pods/haproxy-0/")
    expect(page.locator("#pod-intent")).to_have_text("matches")
    assert page.goto(f"{live_server.url}/pods/nobody/").status == 404


def test_fleet_page_links_to_the_last_renders_warnings(page: Page, live_server: Any) -> None:
    warnings = f.render_warnings()
    page.goto(f"{live_server.url}/")
    link = page.locator("#render-warnings")
    expect(link).to_have_text("2")
    link.click()
    expect(page).to_have_url(re.compile(r"/warnings/$"))
    row = page.locator("table.warnings tr", has_text=warnings["missing"].message)
    expect(row).to_contain_text("ServiceNotFound")
    expect(row).to_contain_text("Ingress shop/web")
    expect(page.locator("table.warnings")).not_to_contain_text(warnings["stale"].message)
    page.screenshot(path=str(ARTIFACTS / "20-render-warnings.png"), full_page=True)


def _same_document(page: Page) -> None:
    page.evaluate("window.__sameDocument = true")


def test_warnings_page_follows_the_next_render_without_a_reload(
    page: Page, live_server: Any
) -> None:
    """The warnings are current state (the last render's): the page follows a render that
    no longer has them, as the fleet page follows the pods, with no full reload."""
    warnings = f.render_warnings()
    page.goto(f"{live_server.url}/warnings/")
    table = page.locator("table.warnings")
    expect(table).to_contain_text(warnings["missing"].message)
    _same_document(page)
    # The leader's next render: no warning left (its summary is what makes one current).
    store.apply_template_config(f.template_config({"renderWarnings": warnings_summary([])}))
    expect(table).not_to_contain_text(warnings["missing"].message, timeout=15_000)
    expect(page.locator("table.reasons")).to_contain_text("No warnings in the last render")
    assert page.evaluate("window.__sameDocument") is True


def test_hub_page_follows_a_new_active_identity_without_a_reload(
    page: Page, live_server: Any
) -> None:
    """Which control plane is Active is current state: the mirrored status follows a
    promotion while the page stays open."""
    store.apply_template_config(
        f.template_config({"activeController": {"activeIdentity": "hub-a", "endpoint": "a"}})
    )
    page.goto(f"{live_server.url}/hub/")
    mirrored = page.locator("h2:has-text('Mirrored template status') + table")
    expect(mirrored).to_contain_text("hub-a")
    _same_document(page)
    promoted = f.template_config({"activeController": {"activeIdentity": "hub-b", "endpoint": "b"}})
    store.apply_template_config(promoted)
    expect(mirrored).to_contain_text("hub-b", timeout=15_000)
    assert page.evaluate("window.__sameDocument") is True


def test_a_failed_apply_leaves_the_fleet_showing_what_the_pod_still_runs(
    page: Page, live_server: Any, history: dict
) -> None:
    """After a failed apply the leader's entry for the pod names only the output it tried
    (its checksum) and the error; the pod keeps serving what it last acknowledged. The fleet
    and pod pages show that plan and checksum as what it runs, and the failure beside it."""
    old = history["old"]["spec"]
    failed = {
        "podName": "haproxy-1",
        "podUID": "pod-uid-haproxy-1",
        "checksum": history["checksum"],
        "lastError": "reload refused: bind :8080 in use",
        "consecutiveErrors": 1,
        "deployedAt": "2026-11-30T08:07:00Z",
    }
    store.apply_haproxycfg(
        f.published(
            [
                f.receipt(
                    "haproxy-0", history["plan"], history["checksum"], "2026-11-30T08:06:00Z"
                ),
                failed,
            ],
            retained=[history["new"]],
            rv="3",
        )
    )
    page.goto(f"{live_server.url}/")
    row = page.locator("table.fleet tr", has_text="haproxy-1")
    cells = row.locator("td")
    expect(cells.nth(1)).to_contain_text(old["planID"][:12])  # applied plan: the old one
    expect(cells.nth(4)).to_contain_text(old["checksum"][:16])
    expect(cells.nth(4)).not_to_contain_text(history["checksum"][:16])
    expect(cells.nth(5)).to_have_text("reload")
    expect(row).to_contain_text("reload refused")
    expect(row).to_contain_text("differs")
    page.goto(f"{live_server.url}/pods/haproxy-1/")
    now = page.locator("#pod-now")
    expect(now).to_contain_text(old["planID"])
    expect(now).to_contain_text(old["checksum"])
    expect(now).to_contain_text("reload refused")


def test_pod_and_record_pages_say_which_term_applied_each_receipt(
    page: Page, live_server: Any, history: dict
) -> None:
    """Who deployed what: a receipt names the holder and epoch whose token applied it; one
    published before receipts carried a term says "unknown"."""
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
    page.goto(f"{live_server.url}/pods/haproxy-0/")
    expect(page.locator("#pod-applied-by")).to_have_text("controller-b at epoch 4")
    rows = page.locator("#pod-receipts tr")
    expect(rows.nth(1).locator("td.applied-by")).to_have_text("controller-b at epoch 4")
    expect(rows.nth(2).locator("td.applied-by")).to_have_text("unknown")  # the older one
    page.screenshot(path=str(ARTIFACTS / "20-pod-applied-by.png"), full_page=True)
    page.goto(f"{live_server.url}/pods/haproxy-1/")
    expect(page.locator("#pod-applied-by")).to_have_text("unknown")
    page.goto(f"{live_server.url}/")
    row = page.locator("table.fleet tr", has_text="haproxy-0")
    expect(row.locator("td.applied-by")).to_have_text("controller-b at epoch 4")
    newest = PodReceipt.objects.get(pod_name="haproxy-0", term_epoch=4)
    page.goto(f"{live_server.url}/records/receipt/{newest.pk}/")
    record = page.locator("#record")
    expect(record.locator("tr", has_text="applied by")).to_contain_text("controller-b at epoch 4")
    expect(record.locator("tr", has_text="term epoch")).to_contain_text("4")

"""The pod page's live section in headless Chromium (issue 20): it follows a real agent
without a full reload, from its live plan to "agent unreachable" once the agent stops.

Needs Debian's chromium (/usr/bin/chromium); screenshots go to test-artifacts/site/.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.agents.helpers import AgentProcess, manifest_for
from tests.site.conftest import ARTIFACTS
from tests.site.test_pod_live import publish_receipt, site_of

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]


def test_the_live_section_follows_the_agent_without_a_reload(
    page: Page, live_server: Any, tmp_path: Path
) -> None:
    agent = AgentProcess(tmp_path / "agent").start()
    try:
        site = site_of(agent)
        first = agent.client.apply(manifest_for(site, "plan-one"))
        publish_receipt(agent, "plan-one", first.state.applied_checksum)
        page.goto(f"{live_server.url}/pods/pod-a/")
        live = page.locator("#pod-live")
        expect(live).to_contain_text("observed at")
        expect(live).to_contain_text("plan-one")
        expect(page.locator("#pod-live-differs")).to_have_count(0)
        page.evaluate("window.__sameDocument = true")
        site.hosts["b.example"] = "be_a"
        agent.client.apply(manifest_for(site, "plan-two", sequence=2, previous="plan-one"))
        # The page refreshes its fragment every 5 s.
        expect(live).to_contain_text("plan-two", timeout=15_000)
        expect(page.locator("#pod-live-differs")).to_have_text(
            "live plan differs from the last receipt"
        )
        page.screenshot(path=str(ARTIFACTS / "30-pod-live.png"), full_page=True)
        agent.stop()
        expect(page.locator("#pod-live-unreachable")).to_contain_text(
            "agent unreachable:", timeout=15_000
        )
        page.screenshot(path=str(ARTIFACTS / "31-pod-live-unreachable.png"), full_page=True)
        assert page.evaluate("window.__sameDocument") is True
    finally:
        agent.stop()

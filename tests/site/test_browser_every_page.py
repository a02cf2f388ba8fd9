"""Every page of the dashboard, opened as an operator does: sign in, then follow each link of
the navigation bar in headless Chromium (Debian's /usr/bin/chromium) over seeded history.
Each page must answer 200, show its heading, raise no script error and keep the nav; one
screenshot per page goes to test-artifacts/site/pages/.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.site.conftest import ARTIFACTS

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]

# Navigation label -> what the page it opens must show (its heading).
NAV = {
    "Checkpoints": "Checkpoint",
    "Timeline": "Timeline",
    "Terms & intents": "Term",
    "Events": "Event",
    "Warnings": "Warning",
    "Hub": "Hub",
    "Recovery reviews": "review",
    "Audit log": "Audit",
    "Token": "Token",
}


def test_every_page_of_the_navigation_opens_in_the_browser(
    page: Page,
    live_server: Any,
    history: dict[str, Any],
) -> None:
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    shots = ARTIFACTS / "pages"
    shots.mkdir(parents=True, exist_ok=True)
    page.goto(f"{live_server.url}/")
    expect(page.locator("h1, h2").first).to_be_visible()
    page.screenshot(path=str(shots / "fleet.png"), full_page=True)
    for label, heading in NAV.items():
        page.goto(f"{live_server.url}/")
        link = page.locator("nav a", has_text=re.compile(rf"^\s*{re.escape(label)}\s*$")).first
        with page.expect_navigation() as nav:
            link.click()
        response = nav.value
        assert response is not None and response.status == 200, (label, response)
        expect(page.locator("h1, h2").first).to_contain_text(re.compile(heading, re.I))
        expect(page.locator("nav")).to_be_visible()
        assert "Server Error" not in page.content(), label
        page.screenshot(path=str(shots / f"{label.lower()}.png"), full_page=True)
    assert errors == [], errors

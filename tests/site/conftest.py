"""Fixtures of the site tests: users in each role, API clients, mirrored sample history."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from checkpoints import store
from tests.conftest import REPO_ROOT
from tests.site import factories as f

PASSWORD = "correct-horse-battery-staple"


@pytest.fixture(autouse=True)
def fast_password_hashing(settings: Any) -> None:
    # The production hasher spends ~1 s per password by design; tests create many users.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def roles(db: Any) -> None:
    call_command("haptic_bootstrap_roles", verbosity=0)


def _user(name: str, group: str | None) -> User:
    user = User.objects.create_user(name, password=PASSWORD)
    if group:
        user.groups.add(Group.objects.get(name=group))
    return user


@pytest.fixture
def viewer(roles: None) -> User:
    return _user("vera", "viewer")


@pytest.fixture
def operator(roles: None) -> User:
    return _user("otto", "operator")


@pytest.fixture
def nobody(roles: None) -> User:
    """Signed in, but in no group: may read nothing."""
    return _user("nina", None)


def token_client(user: User) -> APIClient:
    client = APIClient()
    token, _ = Token.objects.get_or_create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


@pytest.fixture
def viewer_api(viewer: User) -> APIClient:
    return token_client(viewer)


@pytest.fixture
def operator_api(operator: User) -> APIClient:
    return token_client(operator)


@pytest.fixture
def history(db: Any) -> dict[str, Any]:
    """Two checkpoints (the second intended), receipts, terms, an intent and events,
    written through the mirror's own store functions."""
    map_v1 = f.map_file("maps/hosts.map", "a.example backend_a\n")
    map_v2 = f.map_file("maps/hosts.map", "a.example backend_a\nb.example backend_b\n")
    general = f.map_file("general/errors.http", "HTTP/1.0 503\n")
    general["kind"] = "HAProxyGeneralFile"
    cfg1 = "global\n  daemon\ndefaults\n  timeout client 5s\nfrontend fe\n  bind :8080\n"
    cfg2 = cfg1.replace("5s", "30s")
    cert = {
        "secretName": "tls-a",
        "uid": "secret-uid",
        "key": "tls.pem",
        "path": "certs/a.pem",
        "checksum": f.sha("PRIVATE"),
    }
    old = f.checkpoint(cfg1, [map_v1], created="2026-11-30T08:00:00Z", certificates=[cert])
    new = f.checkpoint(cfg2, [map_v2], created="2026-11-30T08:05:00Z", compressed=True)
    for child in (map_v1, map_v2, general):
        store.apply_auxiliary(child)
    store.apply_haproxycfg(old)
    store.apply_haproxycfg(new)
    plan, checksum = new["spec"]["planID"], new["spec"]["checksum"]
    store.apply_haproxycfg(
        f.published(
            [
                f.receipt("haproxy-0", plan, checksum, "2026-11-30T08:06:00Z"),
                f.receipt(
                    "haproxy-1",
                    old["spec"]["planID"],
                    old["spec"]["checksum"],
                    "2026-11-30T08:01:00Z",
                ),
            ],
            retained=[new],
        )
    )
    store.apply_lease(
        f.leader_lease("controller-a", 3, "2026-11-30T07:59:00Z", "2026-11-30T08:06:00Z")
    )
    store.apply_lease(f.retained_lease(plan, checksum, 3))
    store.apply_event(f.event("RetainedConfigActive", "using checksum " + checksum))
    return {"old": old, "new": new, "plan": plan, "checksum": checksum}


CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = REPO_ROOT / "test-artifacts" / "site"


@pytest.fixture
def browser_tab(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A headless Chromium page (Debian's /usr/bin/chromium), not signed in; screenshots
    go to ARTIFACTS."""
    from playwright.sync_api import sync_playwright

    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium")
    # Playwright's sync API runs an event loop in this thread; the tests' ORM calls are
    # plain synchronous code.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        try:
            tab = browser.new_page(viewport={"width": 1400, "height": 900})
            tab.set_default_timeout(30_000)
            yield tab
        finally:
            browser.close()


def sign_in(tab: Any, user: User) -> None:
    """Submit the login form the tab shows, as `user`."""
    tab.fill("#id_username", user.username)
    tab.fill("#id_password", PASSWORD)
    tab.click("button[type=submit]")


@pytest.fixture
def page(browser_tab: Any, live_server: Any, viewer: User) -> Any:
    """The browser tab signed in as a viewer, on the fleet page; the browser tests of every
    page share it."""
    from playwright.sync_api import expect

    browser_tab.goto(f"{live_server.url}/accounts/login/")
    sign_in(browser_tab, viewer)
    expect(browser_tab.locator("nav")).to_contain_text(viewer.username)
    return browser_tab

"""The Hub page's "Which hub is Active" section, against real local API servers (no mocks).

Each hub cluster is a `localcluster` API server holding the HAProxyTemplateConfig whose
status.activeController the resolver reads through the kubeconfig the page is configured with.
"""

from __future__ import annotations

import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.cache import cache
from django.test import Client
from kubernetes import client

from controller.hub.publisher import GROUP, PLURAL, VERSION
from controller.kubeclient import bounded_copy
from dashboard import hub
from localcluster.testing import ApiServer, api_servers

pytestmark = [pytest.mark.django_db, pytest.mark.timeout(120)]

TEMPLATE = "haptic"
OLDER, FRESHER = "2026-01-01T00:00:00Z", "2026-01-01T00:05:00Z"


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[ApiServer, ApiServer]]:
    with api_servers(2) as (a, b):
        yield a, b


@pytest.fixture(autouse=True)
def fresh_cache() -> Iterator[None]:
    # The page caches its resolution; no test may see another's answer.
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def ns(servers: tuple[ApiServer, ApiServer], settings: Any) -> Iterator[str]:
    """A fresh namespace in both clusters, which the page is configured to read."""
    name = f"hubpage-{uuid.uuid4().hex[:8]}"
    for s in servers:
        with bounded_copy(s.api_client()) as api:
            client.CoreV1Api(api).create_namespace(
                client.V1Namespace(metadata=client.V1ObjectMeta(name=name))
            )
    settings.HAPTIC_NAMESPACE = name
    settings.HAPTIC_TEMPLATE_CONFIG = TEMPLATE
    settings.HAPTIC_HUB_IDENTITIES = None
    yield name
    for s in servers:
        s.clear_faults()


def publish(
    server: ApiServer, ns: str, identity: str, endpoint: str, updated: str, *, create: bool = True
) -> None:
    """The template in `server`'s cluster, with status.activeController as a hub writes it."""
    with bounded_copy(server.api_client()) as api:
        objects = client.CustomObjectsApi(api)
        if create:
            body = {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "HAProxyTemplateConfig",
                "metadata": {"name": TEMPLATE},
                "spec": {"podSelector": {"matchLabels": {"app": "haproxy"}}},
            }
            objects.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, body)
        # status is a subresource: a write of the main resource would drop it.
        objects.patch_namespaced_custom_object_status(
            GROUP, VERSION, ns, PLURAL, TEMPLATE,
            {"status": {"activeController": {
                "endpoint": endpoint, "activeIdentity": identity, "lastUpdated": updated,
            }}},
        )  # fmt: skip
        got = objects.get_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, TEMPLATE)
        assert got["status"]["activeController"]["activeIdentity"] == identity


def hub_page(user: Any) -> str:
    c = Client()
    c.force_login(user)
    response = c.get("/hub/")
    assert response.status_code == 200
    return response.content.decode()


def both_declare_themselves(a: ApiServer, b: ApiServer, ns: str) -> None:
    """A healed partition: each hub declares itself; B's lastUpdated is the fresher."""
    publish(a, ns, "hub-a", a.url, OLDER)
    publish(b, ns, "hub-b", b.url, FRESHER)


def active_line(html: str) -> str:
    start = html.index('<p id="active-hub"')
    return html[start : html.index("</p>", start)]


def endpoint_rows(html: str) -> list[str]:
    table = html[html.index('<table class="endpoints">') :]
    table = table[: table.index("</table>")]
    return table.split("<tr")[2:]  # skip the header row


def test_fresher_self_declaration_is_shown_active_and_both_endpoints_listed(
    servers: tuple[ApiServer, ApiServer], ns: str, settings: Any, viewer: Any
) -> None:
    a, b = servers
    # Both declare themselves (a healed partition): the fresher lastUpdated, B's, wins.
    both_declare_themselves(a, b, ns)
    settings.HAPTIC_HUB_KUBECONFIGS = [str(a.kubeconfig), str(b.kubeconfig)]

    html = hub_page(viewer)

    line = active_line(html)
    assert b.url in line and "hub-b" in line and "fresher lastUpdated" in line
    assert a.url not in line and "hub-a" not in line
    rows = endpoint_rows(html)
    assert len(rows) == 2
    assert str(a.kubeconfig) in rows[0] and a.url in rows[0]
    assert "hub-a" in rows[0] and OLDER in rows[0] and "Active</span>" not in rows[0]
    assert str(b.kubeconfig) in rows[1] and b.url in rows[1]
    assert "hub-b" in rows[1] and FRESHER in rows[1] and "Active</span>" in rows[1]
    assert all('<span class="ok">yes</span>' in row for row in rows)
    assert "<title>Hub · haptic</title>" in html  # the title block is only the title


def test_standby_naming_the_active_is_not_trusted_with_identities(
    servers: tuple[ApiServer, ApiServer], ns: str, settings: Any, viewer: Any
) -> None:
    a, b = servers
    # B is A's Standby: its mirrored copy names A, so only A declares itself. A advertises a
    # public endpoint, not the URL in our kubeconfig: only the identities can match it.
    public = "https://hub-a.example.net:6443"
    publish(a, ns, "hub-a", public, OLDER)
    publish(b, ns, "hub-a", public, OLDER)
    settings.HAPTIC_HUB_KUBECONFIGS = [str(a.kubeconfig), str(b.kubeconfig)]
    settings.HAPTIC_HUB_IDENTITIES = ["hub-a", "hub-b"]

    html = hub_page(viewer)

    line = active_line(html)
    assert a.url in line and "hub-a" in line and "self-declared" in line
    rows = endpoint_rows(html)
    assert "Active</span>" in rows[0] and "Active</span>" not in rows[1]
    assert "(expected hub-b)" in rows[1] and public in rows[1]


def test_missing_kubeconfig_and_stopped_server_are_error_rows_not_a_500(
    servers: tuple[ApiServer, ApiServer], ns: str, settings: Any, viewer: Any, tmp_path: Path
) -> None:
    a, _ = servers
    publish(a, ns, "hub-a", a.url, OLDER)
    # A server that was a hub and is gone: its kubeconfig outlives it (stop() removes its dir).
    gone = ApiServer.start()
    gone_url = gone.url
    gone_kubeconfig = tmp_path / "gone-kubeconfig"
    shutil.copy(gone.kubeconfig, gone_kubeconfig)
    gone.stop()
    missing = tmp_path / "no-such-kubeconfig"
    settings.HAPTIC_HUB_KUBECONFIGS = [str(missing), str(gone_kubeconfig), str(a.kubeconfig)]

    html = hub_page(viewer)

    rows = endpoint_rows(html)
    assert len(rows) == 3
    assert str(missing) in rows[0] and "no such file" in rows[0]
    assert rows[0].startswith(' class="bad"') and '<span class="err">' in rows[0]
    assert gone_url in rows[1] and rows[1].startswith(' class="bad"')
    assert '<span class="err">' in rows[1] and '<span class="ok">yes</span>' not in rows[1]
    # The endpoint that still answers is resolved despite the two broken ones.
    assert a.url in active_line(html) and "Active</span>" in rows[2]


def test_every_endpoint_broken_says_no_active(settings: Any, viewer: Any, tmp_path: Path) -> None:
    bad = tmp_path / "not-yaml"
    bad.write_text("this: [is not a kubeconfig")
    settings.HAPTIC_HUB_KUBECONFIGS = [str(tmp_path / "absent"), str(bad)]

    html = hub_page(viewer)

    assert "No Active hub found" in active_line(html)
    rows = endpoint_rows(html)
    assert len(rows) == 2 and all("cannot load kubeconfig" in row for row in rows)


def test_a_hanging_server_costs_one_bounded_read(
    servers: tuple[ApiServer, ApiServer], ns: str, settings: Any, viewer: Any
) -> None:
    a, b = servers
    both_declare_themselves(a, b, ns)
    b.add_fault(path_regex=f"/namespaces/{ns}/", blackhole=True)
    settings.HAPTIC_HUB_KUBECONFIGS = [str(a.kubeconfig), str(b.kubeconfig)]

    started = time.monotonic()
    html = hub_page(viewer)
    elapsed = time.monotonic() - started

    assert elapsed < hub.READ_TIMEOUT + 3.0, elapsed
    rows = endpoint_rows(html)
    assert rows[1].startswith(' class="bad"') and b.url in rows[1]
    assert a.url in active_line(html)  # B's fresher claim is unreadable, so not trusted


def test_resolution_is_cached_between_reloads(
    servers: tuple[ApiServer, ApiServer], ns: str, settings: Any, viewer: Any
) -> None:
    a, b = servers
    both_declare_themselves(a, b, ns)
    settings.HAPTIC_HUB_KUBECONFIGS = [str(a.kubeconfig), str(b.kubeconfig)]
    assert b.url in active_line(hub_page(viewer))

    # A now declares itself fresher than B; a reload within the cache window does not read
    # again, so it still shows the first answer.
    publish(a, ns, "hub-a", a.url, "2026-01-01T00:10:00Z", create=False)
    assert b.url in active_line(hub_page(viewer))

    cache.clear()  # the window over: the page reads again and sees A's fresher claim
    assert a.url in active_line(hub_page(viewer))


def test_no_kubeconfigs_configured_shows_how_to_set_them(settings: Any, viewer: Any) -> None:
    settings.HAPTIC_HUB_KUBECONFIGS = []

    html = hub_page(viewer)

    line = active_line(html)
    assert "HAPTIC_HUB_KUBECONFIGS" in line
    assert "python -m controller.hub resolve" in line
    assert '<table class="endpoints">' not in html

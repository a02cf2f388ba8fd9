"""The HTTP store against a real HTTP server on 127.0.0.1: bodies, ETags and 304s, slow
answers, oversize bodies, 401 without auth; the gate's verdict accepting or refusing a body."""

from __future__ import annotations

import base64
import threading
import time

import httpx
from prometheus_client import REGISTRY

from controller.health import ComponentHealth, HealthServer
from controller.httpstore.cache import ResourceSpec, Version
from controller.httpstore.fetcher import fetch
from controller.httpstore.store import HTTP_STORE, HTTPStore
from tests.httpstore.conftest import Source, _template


def test_fetch_bodies_304_timeouts_size_limit_and_errors(server) -> None:
    base, sources = server
    sources["list"] = Source(b"10.0.0.0/8\n", etag='"v1"')
    sources["slow"] = Source(b"late", delay=1.5)
    sources["big"] = Source(b"x" * 2048)
    sources["gone"] = Source(status=500)
    with httpx.Client() as http:
        got = fetch(http, ResourceSpec("list", f"{base}/list"), {})
        assert (got.body, got.etag, got.error) == ("10.0.0.0/8\n", '"v1"', None)
        again = fetch(http, ResourceSpec("list", f"{base}/list"), {"If-None-Match": '"v1"'})
        assert again.not_modified and again.body is None
        slow = fetch(http, ResourceSpec("slow", f"{base}/slow", timeout=0.3), {})
        assert slow.error and "timed out" in slow.error
        big = fetch(http, ResourceSpec("big", f"{base}/big", max_bytes=1024), {})
        assert big.error and "exceeds 1024 bytes" in big.error
        assert (
            fetch(http, ResourceSpec("big", f"{base}/big", max_bytes=4096), {}).body == "x" * 2048
        )
        assert fetch(http, ResourceSpec("gone", f"{base}/gone"), {}).error.startswith("HTTP 500")


def _sample(name: str, resource: str) -> float | None:
    return REGISTRY.get_sample_value(name, {"resource": resource})


def test_store_offers_pending_until_the_gate_passes_and_keeps_accepted_on_refusal(server) -> None:
    base, sources = server
    sources["allow"] = Source(b"v1", etag='"1"')
    template = _template(base, allow={"refreshInterval": "1s"})
    events: list[tuple[str, str, str]] = []
    store = HTTPStore(lambda: template, lambda _n: None, record_event=lambda *e: events.append(e))
    try:
        assert store.refresh(force=True)
        assert store.render_view() == {"allow": "v1"}  # pending: the gate checks it
        assert not store.settle({"allow": Version("v1").digest}, accepted=True)
        assert store.states["allow"].accepted.body == "v1"

        sources["allow"].body, sources["allow"].etag = b"v2", '"2"'
        assert store.refresh(force=True)
        assert store.render_view() == {"allow": "v2"}
        assert sources["allow"].requests[-1].get("If-None-Match") == '"1"'
        # The render with v2 is refused: templates see v1 again, and the caller re-renders.
        assert store.settle({"allow": Version("v2").digest}, accepted=False)
        assert store.render_view() == {"allow": "v1"}
        assert events[-1][1] == "HTTPResourceRefused"
        # The source still serves v2 (304 on our validators): v2 is not offered again.
        assert not store.refresh(force=True)
        assert store.render_view() == {"allow": "v1"}
    finally:
        store.close()


def _healthz(health: ComponentHealth) -> str | None:
    """components.http-store.error as /healthz serves it."""
    with HealthServer(health, host="127.0.0.1", port=0) as srv:
        body = httpx.get(f"{srv.url}/healthz", timeout=5).json()
    return body["components"][HTTP_STORE]["error"]


def test_failed_fetch_keeps_the_body_and_is_reported(server) -> None:
    base, sources = server
    sources["deny"] = Source(b"192.0.2.1\n")
    template = _template(base, deny={"timeout": "300ms"})
    health = ComponentHealth()
    events: list[tuple[str, str, str]] = []
    store = HTTPStore(
        lambda: template, lambda _n: None, health=health, record_event=lambda *e: events.append(e)
    )
    try:
        store.refresh(force=True)
        store.settle({"deny": Version("192.0.2.1\n").digest}, accepted=True)
        assert _healthz(health) is None
        errors_before = _sample("haptic_http_resource_fetch_errors_total", "deny") or 0
        sources["deny"].delay = 1.0
        assert not store.refresh(force=True)
        assert not store.refresh(force=True)
        assert store.render_view() == {"deny": "192.0.2.1\n"}
        assert _sample("haptic_http_resource_fetch_errors_total", "deny") == errors_before + 2
        assert [e[1] for e in events] == ["HTTPResourceFetchFailed"]  # once per streak
        assert "timed out" in _healthz(health)
        assert _sample("haptic_http_resource_age_seconds", "deny") >= 0
        sources["deny"].delay = 0
        store.refresh(force=True)
        assert _healthz(health) is None
    finally:
        store.close()


def test_bearer_and_basic_auth_from_the_secret(server) -> None:
    base, sources = server
    sources["bearer"] = Source(b"bearer list", authorization="Bearer s3cr3t")
    basic = "Basic " + base64.b64encode(b"reader:pw").decode()
    sources["basic"] = Source(b"basic list", authorization=basic)
    secrets = {"tok": {"token": "s3cr3t"}, "pair": {"username": "reader", "password": "pw"}}
    template = _template(
        base,
        bearer={"auth": {"type": "bearer", "secretRef": {"name": "tok"}}},
        basic={"auth": {"type": "basic", "secretRef": {"name": "pair"}}},
    )
    store = HTTPStore(lambda: template, secrets.get)
    try:
        store.refresh(force=True)
        assert store.render_view() == {"basic": "basic list", "bearer": "bearer list"}
        # The Secret is gone: no request can be authorised, and the store says why.
        secrets.clear()
        store.states.clear()
        store.refresh(force=True)
        assert store.render_view() == {}
        assert "lacks key" in store.health_error()
    finally:
        store.close()
    # Without auth the source answers 401: a failed fetch.
    with httpx.Client() as http:
        assert fetch(http, ResourceSpec("p", f"{base}/bearer"), {}).error.startswith("HTTP 401")


def test_a_term_fetches_before_it_returns_and_refetches_on_the_interval(server) -> None:
    base, sources = server
    sources["map"] = Source(b"one")
    template = _template(base, map={"refreshInterval": "200ms"})
    changed = threading.Event()
    store = HTTPStore(lambda: template, lambda _n: None)
    try:
        store.begin_term(on_change=changed.set)
        assert store.render_view() == {"map": "one"}  # before the first render
        store.settle({"map": Version("one").digest}, accepted=True)
        sources["map"].body = b"two"
        assert changed.wait(10)
        assert store.render_view() == {"map": "two"}
        store.end_term()
        fetched = len(sources["map"].requests)
        time.sleep(0.6)
        assert len(sources["map"].requests) == fetched  # not the leader: no fetches
        # A term that ends without end_term (its validity lapsed) stops fetching too.
        valid = [True]
        store.begin_term(term_valid=lambda: valid[0])
        valid[0] = False
        time.sleep(0.6)
        fetched = len(sources["map"].requests)
        time.sleep(0.6)
        assert len(sources["map"].requests) == fetched
    finally:
        store.close()


def test_an_api_error_reading_the_auth_secret_is_a_failed_fetch_not_a_failed_term(server) -> None:
    # runtime._start_term calls begin_term unguarded: a transient API error on the Secret
    # read must not escape it (README "HTTP resources"), it is reported like any failed fetch.
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import ReadTimeoutError

    base, sources = server
    sources["tok"] = Source(b"list", authorization="Bearer s3cr3t")
    template = _template(base, tok={"auth": {"type": "bearer", "secretRef": {"name": "tok"}}})
    health = ComponentHealth()
    events: list[tuple[str, str, str]] = []
    faults: list[Exception] = [ApiException(status=500, reason="Internal Server Error")]

    def read_secret(_name: str) -> dict[str, str]:
        if faults:
            raise faults[0]
        return {"token": "s3cr3t"}

    store = HTTPStore(
        lambda: template, read_secret, health=health, record_event=lambda *e: events.append(e)
    )
    try:
        faults.clear()
        store.refresh(force=True)
        store.settle({"tok": Version("list").digest}, accepted=True)
        errors_before = _sample("haptic_http_resource_fetch_errors_total", "tok") or 0
        faults.append(ApiException(status=500, reason="Internal Server Error"))
        store.begin_term()  # must not raise
        assert store.render_view() == {"tok": "list"}  # the accepted body is kept
        assert "auth Secret tok" in _healthz(health) and "500" in _healthz(health)
        faults[0] = ReadTimeoutError(None, "/api/v1/secrets/tok", "read timed out")
        store.refresh(force=True)
        assert _sample("haptic_http_resource_fetch_errors_total", "tok") == errors_before + 2
        assert [e[1] for e in events] == ["HTTPResourceFetchFailed"]
        assert "timed out" in _healthz(health)
        faults.clear()
        store.refresh(force=True)
        assert _healthz(health) is None
    finally:
        store.close()

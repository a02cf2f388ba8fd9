"""Health server: /healthz, /readyz, /metrics over real HTTP on localhost."""

from __future__ import annotations

import importlib
import json
import urllib.error
import urllib.request

import pytest
from prometheus_client import CollectorRegistry, Counter

from controller.health import RECONCILIATION_COORDINATOR, ComponentHealth, HealthServer


def get(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, resp.headers["Content-Type"], resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.headers["Content-Type"], err.read().decode()


@pytest.fixture
def served():
    health = ComponentHealth()
    registry = CollectorRegistry()
    server = HealthServer(health, "127.0.0.1", 0, registry=registry).start()
    try:
        yield health, registry, server
    finally:
        server.stop()


def test_render_error_is_reported_while_healthz_stays_200(served):
    health, _, server = served
    health.set_available(RECONCILIATION_COORDINATOR, True)
    health.set_error(RECONCILIATION_COORDINATOR, "template haproxy.cfg line 3: unexpected '}'")
    status, ctype, body = get(server.url + "/healthz")
    assert status == 200 and ctype == "application/json"
    comp = json.loads(body)["components"][RECONCILIATION_COORDINATOR]
    assert comp["error"] == "template haproxy.cfg line 3: unexpected '}'"
    assert comp["available"] is True and comp["errorSince"]
    # A successful render clears it.
    health.set_error(RECONCILIATION_COORDINATOR, None)
    comp = json.loads(get(server.url + "/healthz")[2])["components"][RECONCILIATION_COORDINATOR]
    assert comp["error"] is None and comp["errorSince"] is None


def test_an_unavailable_component_fails_healthz(served):
    health, _, server = served
    health.set_available("resource-watcher", True)
    health.set_available("elector", False)
    status, _, body = get(server.url + "/healthz")
    assert status == 503
    assert json.loads(body)["status"] == "unavailable"
    health.set_available("elector", True)
    assert get(server.url + "/healthz")[0] == 200


def test_probes_are_asked_on_each_request(served):
    health, _, server = served
    state = {"err": "ingresses: ReadTimeoutError"}
    health.register_probe("resource-watcher", lambda: state["err"])
    body = json.loads(get(server.url + "/healthz")[2])
    assert body["components"]["resource-watcher"]["error"] == "ingresses: ReadTimeoutError"
    state["err"] = None
    body = json.loads(get(server.url + "/healthz")[2])
    assert body["components"]["resource-watcher"]["error"] is None

    def broken() -> str | None:
        raise ValueError("boom")

    health.register_probe("other", broken)
    status, _, body = get(server.url + "/healthz")
    assert status == 200 and "boom" in json.loads(body)["components"]["other"]["error"]


def test_readyz_follows_the_readiness_checks(served):
    health, _, server = served
    synced = {"v": False}
    health.add_readiness_check("caches-synced", lambda: synced["v"])
    status, _, body = get(server.url + "/readyz")
    assert status == 503 and json.loads(body) == {
        "ready": False,
        "checks": {"caches-synced": False},
    }
    synced["v"] = True
    assert get(server.url + "/readyz")[0] == 200


def test_metrics_expose_the_registry(served):
    _, registry, server = served
    c = Counter("haptic_test_things_total", "Things.", ["kind"], registry=registry)
    c.labels("ingresses").inc(3)
    status, ctype, body = get(server.url + "/metrics")
    assert status == 200 and ctype.startswith("text/plain")
    assert 'haptic_test_things_total{kind="ingresses"} 3.0' in body
    assert get(server.url + "/nope")[0] == 404


def test_default_registry_carries_the_controller_metrics():
    # The real default registry, as a replica serves it (the imports register metrics).
    importlib.import_module("controller.reconciler")
    importlib.import_module("controller.watch.informer")

    server = HealthServer(ComponentHealth(), "127.0.0.1", 0).start()
    try:
        body = get(server.url + "/metrics")[2]
    finally:
        server.stop()
    assert "haptic_reconcile_triggers_total" in body
    assert "haptic_watch_lists_total" in body

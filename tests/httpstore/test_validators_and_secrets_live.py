"""The HTTP store with a source that sends Last-Modified (no ETag), and with its auth Secret
a real Secret on the local API server, read the way the controller reads it
(controller/kubeclient.py secret_data, behind ControllerRuntime._template_secret)."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator

import pytest
from kubernetes import client

from controller.httpstore.cache import Version
from controller.httpstore.store import HTTPStore
from controller.kubeclient import secret_data
from localcluster.testing import ApiServer
from tests.httpstore.conftest import Source, _template

STAMP = "Wed, 02 Dec 2026 10:00:00 GMT"


def test_last_modified_is_sent_back_and_a_304_keeps_the_body(server) -> None:
    base, sources = server
    sources["list"] = Source(b"10.0.0.0/8\n", last_modified=STAMP)
    store = HTTPStore(lambda: _template(base, list={}), lambda _n: None)
    try:
        assert store.refresh(force=True)
        assert "If-Modified-Since" not in sources["list"].requests[0]
        store.settle({"list": Version("10.0.0.0/8\n").digest}, accepted=True)
        assert not store.refresh(force=True)  # 304: nothing new
        assert sources["list"].requests[-1].get("If-Modified-Since") == STAMP
        assert "If-None-Match" not in sources["list"].requests[-1]
        assert store.render_view() == {"list": "10.0.0.0/8\n"}
        assert store.states["list"].accepted.body == "10.0.0.0/8\n"
        # A changed source answers 200 with a new stamp: the new body is offered.
        sources["list"].body = b"192.0.2.0/24\n"
        sources["list"].last_modified = "Wed, 02 Dec 2026 11:00:00 GMT"
        assert store.refresh(force=True)
        assert store.render_view() == {"list": "192.0.2.0/24\n"}
    finally:
        store.close()


@pytest.fixture(scope="module")
def api() -> Iterator[ApiServer]:
    with ApiServer.start() as server:
        yield server


def test_auth_from_a_secret_on_the_api_server(server, api: ApiServer) -> None:
    base, sources = server
    basic = "Basic " + base64.b64encode(b"reader:pw").decode()
    sources["basic"] = Source(b"basic list", authorization=basic)
    sources["bearer"] = Source(b"bearer list", authorization="Bearer s3cr3t")
    namespace = "h-" + uuid.uuid4().hex[:8]
    api_client = api.api_client()
    core = client.CoreV1Api(api_client)
    core.create_namespace({"metadata": {"name": namespace}})

    def create(name: str, data: dict[str, str]) -> None:
        encoded = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
        core.create_namespaced_secret(namespace, {"metadata": {"name": name}, "data": encoded})

    template = _template(
        base,
        basic={"auth": {"type": "basic", "secretRef": {"name": "pair"}}},
        bearer={"auth": {"type": "bearer", "secretRef": {"name": "tok"}}},
    )
    store = HTTPStore(lambda: template, lambda name: secret_data(api_client, namespace, name))
    try:
        create("pair", {"username": "reader", "password": "pw"})
        store.refresh(force=True)
        # No Secret "tok" yet: that resource is not fetched, and the store says why.
        assert store.render_view() == {"basic": "basic list"}
        assert sources["basic"].requests[-1]["Authorization"] == basic
        assert "tok" in (store.health_error() or "")
        create("tok", {"token": "s3cr3t"})
        store.refresh(force=True)
        assert store.render_view() == {"basic": "basic list", "bearer": "bearer list"}
        assert store.health_error() is None
    finally:
        store.close()
        api_client.close()

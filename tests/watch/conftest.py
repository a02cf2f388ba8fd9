"""Fixtures for the watch tests: a real local API server over HTTP, short informer timings."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator

import pytest
from kubernetes import client

from devstack.stack import wait_for
from kubewatch import ReflectorConfig
from localcluster.testing import ApiServer

# Short timings so faults show within seconds: a silent watch is abandoned after 3 + 2 s.
FAST = ReflectorConfig(
    connect_timeout=2.0,
    list_read_timeout=3.0,
    watch_timeout_seconds=3,
    watch_read_grace=2.0,
    backoff_initial=0.1,
    backoff_max=1.0,
)

_ns_counter = itertools.count()


@pytest.fixture(scope="session")
def api() -> Iterator[ApiServer]:
    server = ApiServer.start(extra_args=["--bookmark-interval", "0.5"])
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def api_client(api: ApiServer) -> Iterator[client.ApiClient]:
    ac = api.api_client()
    ac.configuration.retries = False
    try:
        yield ac
    finally:
        ac.close()


@pytest.fixture
def core(api_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)


@pytest.fixture
def namespace(core: client.CoreV1Api) -> str:
    name = f"w{next(_ns_counter)}-{int(time.time() * 1000) % 100000}"
    core.create_namespace({"metadata": {"name": name}}, _request_timeout=10)
    return name


def service(name: str, labels: dict | None = None) -> dict:
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": {"ports": [{"port": 80}]}}


OUR_THREADS = ("informer-", "reconciler", "health-http")


@pytest.fixture(autouse=True)
def no_leftover_threads() -> Iterator[None]:
    """Every informer, reconciler and health server a test starts must be gone after it."""
    yield

    def ours() -> list[str]:
        return [t.name for t in threading.enumerate() if t.name.startswith(OUR_THREADS)]

    wait_for(lambda: not ours(), timeout=10)
    assert not ours(), f"threads left running: {ours()}"

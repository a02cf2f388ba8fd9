"""Fault injection through the admin endpoint: latency, errors, black-hole, refusal, freeze."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.parse
from collections.abc import Iterator

import kubernetes
import pytest
import urllib3
from kubernetes import watch
from kubernetes.client import ApiException

from localcluster.testing import ApiServer


@pytest.fixture(scope="module")
def faulty() -> Iterator[ApiServer]:
    with ApiServer.start() as api:
        yield api


@pytest.fixture()
def fclient(faulty: ApiServer) -> Iterator[kubernetes.client.ApiClient]:
    faulty.clear_faults()
    config = faulty.configuration()
    config.retries = False
    c = kubernetes.client.ApiClient(config)
    yield c
    faulty.clear_faults()
    c.close()


def _port(api: ApiServer) -> int:
    return urllib.parse.urlsplit(api.url).port or 0


def test_error_status_fault_with_times(faulty, fclient):
    core = kubernetes.client.CoreV1Api(fclient)
    faulty.add_fault(
        path_regex="/namespaces/default/configmaps", status=503, times=1, message="injected"
    )
    with pytest.raises(ApiException) as err:
        core.list_namespaced_config_map("default")
    assert err.value.status == 503
    body = json.loads(err.value.body)
    assert body["kind"] == "Status" and body["message"] == "injected"
    core.list_namespaced_config_map("default")  # used up after one hit
    core.list_namespaced_secret("default")  # other paths never matched


def test_latency_fault_trips_a_bounded_read(faulty, fclient):
    core = kubernetes.client.CoreV1Api(fclient)
    faulty.add_fault(path_regex="/secrets", latency_ms=3000, methods=["GET"])
    with pytest.raises(urllib3.exceptions.ReadTimeoutError):
        core.list_namespaced_secret("default", _request_timeout=0.3)
    core.list_namespaced_config_map("default", _request_timeout=5)


def test_blackhole_never_answers_until_cleared(faulty, fclient):
    core = kubernetes.client.CoreV1Api(fclient)
    fault = faulty.add_fault(path_regex="/leases", blackhole=True)
    coord = kubernetes.client.CoordinationV1Api(fclient)
    with pytest.raises(urllib3.exceptions.ReadTimeoutError):
        coord.list_namespaced_lease("default", _request_timeout=0.5)
    core.list_namespaced_config_map("default", _request_timeout=5)
    faulty.remove_fault(fault)
    coord.list_namespaced_lease("default", _request_timeout=5)


def test_refuse_connections_and_recover(faulty, fclient):
    core = kubernetes.client.CoreV1Api(fclient)
    rv = core.list_namespaced_config_map("default").metadata.resource_version
    ended = threading.Event()

    def watch_until_dropped() -> None:
        try:
            for _ in watch.Watch().stream(
                core.list_namespaced_config_map, "default", resource_version=rv, timeout_seconds=60
            ):
                pass
        except Exception:
            pass
        ended.set()

    t = threading.Thread(target=watch_until_dropped, daemon=True)
    t.start()
    deadline = time.monotonic() + 10
    while faulty.state()["watchers"] < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    faulty.add_fault(refuse=True)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", _port(faulty)), timeout=5).close()
    assert ended.wait(10), "open watch was not dropped"
    with pytest.raises(urllib3.exceptions.HTTPError):
        core.list_namespaced_config_map("default", _request_timeout=2)
    faulty.clear_faults()
    assert core.list_namespaced_config_map("default", _request_timeout=5).items is not None
    t.join(5)


def test_freeze_one_kind(faulty, fclient):
    core = kubernetes.client.CoreV1Api(fclient)
    coord = kubernetes.client.CoordinationV1Api(fclient)
    lease = coord.create_namespaced_lease("default", {"metadata": {"generateName": "frz-"}})
    name = lease.metadata.name
    events: list[dict] = []
    w = watch.Watch()

    def watch_leases() -> None:
        for ev in w.stream(
            coord.list_namespaced_lease,
            "default",
            resource_version=lease.metadata.resource_version,
            timeout_seconds=30,
        ):
            events.append(ev)
            w.stop()

    watcher = threading.Thread(target=watch_leases, daemon=True)
    watcher.start()
    faulty.add_fault(freeze="coordination.k8s.io/leases")
    done = threading.Event()

    def write() -> None:
        coord.patch_namespaced_lease(name, "default", {"spec": {"holderIdentity": "x"}})
        done.set()

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    # Other kinds keep working while leases are frozen; reads of leases too.
    for _ in range(5):
        core.create_namespaced_config_map("default", {"metadata": {"generateName": "frz-"}})
    assert coord.read_namespaced_lease(name, "default").spec.holder_identity is None
    assert not done.is_set() and events == []
    faulty.clear_faults()
    assert done.wait(10)
    watcher.join(10)
    assert events and events[0]["object"].spec.holder_identity == "x"


def test_admin_rejects_unknown_fields(faulty):
    import urllib.error
    import urllib.request

    req = urllib.request.Request(
        faulty.admin_url + "/admin/faults",
        method="POST",
        data=json.dumps({"nonsense": 1}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req, timeout=5)
    assert err.value.code == 400


def test_blackhole_silences_an_open_watch_until_cleared(faulty, fclient):
    core = kubernetes.client.CoreV1Api(fclient)
    rv = core.list_namespaced_config_map("default").metadata.resource_version
    events: list[dict] = []
    got = threading.Event()
    w = watch.Watch()

    def run() -> None:
        for ev in w.stream(
            core.list_namespaced_config_map, "default", resource_version=rv, timeout_seconds=30
        ):
            events.append(ev)
            got.set()
            w.stop()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    deadline = time.monotonic() + 10
    while faulty.state()["watchers"] < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    fault = faulty.add_fault(path_regex="/configmaps", methods=["GET"], blackhole=True)
    made = core.create_namespaced_config_map("default", {"metadata": {"generateName": "bh-"}})
    assert not got.wait(1.0), "event delivered through a black hole"
    faulty.remove_fault(fault)
    assert got.wait(10)
    assert events[0]["object"].metadata.name == made.metadata.name
    t.join(10)

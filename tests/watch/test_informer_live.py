"""Informer against the local API server over HTTP: list, watch, resume, 410, faults."""

from __future__ import annotations

import itertools
import socket
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kubernetes import client

from controller.kubeclient import bounded_copy
from controller.watch import Informer, ResourceRef
from devstack.stack import wait_for
from kubewatch import ReflectorConfig
from localcluster.testing import ApiServer
from tests.watch.conftest import FAST, service

T = 10  # request timeout of the test's own API calls
_conv = itertools.count()


class Recorder:
    """Collects (type, name) notifications from the informer thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: list[tuple[str, str | None]] = []

    def __call__(self, kind: str, etype: str, obj: dict | None) -> None:
        with self.lock:
            self.events.append((etype, obj["metadata"]["name"] if obj else None))

    def names(self, etype: str) -> list[str | None]:
        with self.lock:
            return [n for t, n in self.events if t == etype]


@pytest.fixture
def informers(api_client):
    started: list[Informer] = []

    def make(ref: ResourceRef, config: ReflectorConfig = FAST, **kw) -> Informer:
        inf = Informer(bounded_copy(api_client), ref, config=config, **kw)
        started.append(inf)
        return inf.start()

    yield make
    for inf in started:
        assert inf.stop(timeout=15), f"informer {inf.kind} did not stop"
        inf.api_client.close()


def names(inf: Informer) -> list[str]:
    return [name for _, name in inf.store.list_keys()]


def test_list_fills_the_cache_and_the_watch_follows_changes(core, namespace, informers):
    for n in ("b", "a", "c"):
        core.create_namespaced_service(namespace, service(n), _request_timeout=T)
    rec = Recorder()
    inf = informers(ResourceRef("services", "v1", "services", namespace), handlers=[rec])
    assert inf.wait_synced(20)
    assert names(inf) == ["a", "b", "c"]
    obj = inf.store.get(namespace, "a")
    assert obj["kind"] == "Service" and obj["apiVersion"] == "v1"  # filled in for list items
    assert rec.names("ADDED") == ["a", "b", "c"] and rec.names("SYNCED") == [None]

    core.create_namespaced_service(namespace, service("d"), _request_timeout=T)
    core.patch_namespaced_service(
        "a", namespace, {"metadata": {"labels": {"x": "1"}}}, _request_timeout=T
    )
    core.delete_namespaced_service("b", namespace, _request_timeout=T)
    assert wait_for(lambda: names(inf) == ["a", "c", "d"])
    assert wait_for(lambda: inf.store.get(namespace, "a")["metadata"]["labels"] == {"x": "1"})
    assert rec.names("ADDED")[-1] == "d"
    assert rec.names("MODIFIED") == ["a"] and rec.names("DELETED") == ["b"]
    assert inf.stats["gone"] == 0 and inf.last_error is None


def test_watch_resumes_after_a_cut_without_relisting(core, namespace, informers):
    inf = informers(ResourceRef("services", "v1", "services", namespace))
    assert inf.wait_synced(20)
    for i in range(3):
        assert wait_for(inf.cut_watch)
        # Written while the informer reconnects: it must come from the resumed watch.
        core.create_namespaced_service(namespace, service(f"s{i}"), _request_timeout=T)
        assert wait_for(lambda i=i: inf.store.get(namespace, f"s{i}") is not None)
    assert inf.stats["lists"] == 1 and inf.stats["gone"] == 0
    assert inf.stats["watches"] >= 4


def test_bookmarks_advance_the_resume_version(core, namespace, informers):
    inf = informers(ResourceRef("services", "v1", "services", namespace))
    assert inf.wait_synced(20)
    # Changes elsewhere move the global resourceVersion; the server's bookmarks (every 0.5 s
    # here) carry it to this watch although no service changed.
    cm = core.create_namespaced_config_map(
        namespace, {"metadata": {"name": "m"}}, _request_timeout=T
    )
    target = int(cm.metadata.resource_version)
    assert wait_for(lambda: int(inf.resume_resource_version or 0) >= target)
    assert len(inf.store) == 0 and inf.stats["lists"] == 1


def test_label_selected_watch_adds_and_drops_objects_as_labels_change(core, namespace, informers):
    core.create_namespaced_service(namespace, service("in", {"app": "haproxy"}), _request_timeout=T)
    core.create_namespaced_service(namespace, service("out", {"app": "web"}), _request_timeout=T)
    rec = Recorder()
    inf = informers(
        ResourceRef("services", "v1", "services", namespace, label_selector="app=haproxy"),
        handlers=[rec],
    )
    assert inf.wait_synced(20) and names(inf) == ["in"]
    core.patch_namespaced_service(
        "out", namespace, {"metadata": {"labels": {"app": "haproxy"}}}, _request_timeout=T
    )
    core.patch_namespaced_service(
        "in", namespace, {"metadata": {"labels": {"app": "web"}}}, _request_timeout=T
    )
    assert wait_for(lambda: names(inf) == ["out"])
    assert rec.names("DELETED") == ["in"]


def test_paged_list_reads_every_page(core, namespace, informers):
    for i in range(7):
        core.create_namespaced_service(namespace, service(f"p{i}"), _request_timeout=T)
    config = ReflectorConfig(**{**FAST.__dict__, "page_size": 2})
    inf = informers(ResourceRef("services", "v1", "services", namespace), config=config)
    assert inf.wait_synced(20)
    assert names(inf) == [f"p{i}" for i in range(7)]


def test_server_errors_are_reported_and_retried(namespace, informers):
    inf = informers(ResourceRef("nothings", "v1", "nothings", namespace))
    assert wait_for(lambda: inf.stats["errors"] >= 2)
    assert "404" in inf.last_error
    assert inf.alive and not inf.synced


def test_relist_after_410_gone_catches_up_with_missed_changes(api_client, informers):
    # A server that keeps only 5 events of history, so a short gap expires the version.
    with ApiServer.start(extra_args=["--watch-history", "5", "--bookmark-interval", "60"]) as small:
        ac = small.api_client()
        ac.configuration.retries = False
        core = client.CoreV1Api(ac)
        core.create_namespace({"metadata": {"name": "gone"}}, _request_timeout=T)
        for n in ("keep", "drop"):
            core.create_namespaced_service("gone", service(n), _request_timeout=T)
        rec = Recorder()
        inf = Informer(
            bounded_copy(ac), ResourceRef("services", "v1", "services", "gone"), config=FAST
        )
        inf.add_handler(rec)
        inf.start()
        try:
            assert inf.wait_synced(20) and names(inf) == ["drop", "keep"]
            # Hold the informer's reads (writes still pass), break its watch, change things
            # and push the history past its resourceVersion.
            small.add_fault(path_regex="/services", methods=["GET"], blackhole=True)
            # Break streams until none is open, then wait for a read timeout: from then on
            # the informer only sends requests the server holds (none can predate the fault).
            assert wait_for(lambda: not inf.cut_watch())
            assert wait_for(lambda: inf.stats["errors"] >= 1, timeout=30)
            core.delete_namespaced_service("drop", "gone", _request_timeout=T)
            core.create_namespaced_service("gone", service("new"), _request_timeout=T)
            for i in range(8):
                core.create_namespaced_config_map(
                    "gone", {"metadata": {"name": f"c{i}"}}, _request_timeout=T
                )
            small.clear_faults()
            assert wait_for(lambda: names(inf) == ["keep", "new"], timeout=30)
            assert inf.stats["gone"] >= 1 and inf.stats["lists"] >= 2
            assert "drop" in rec.names("DELETED") and "new" in rec.names("ADDED")
            # The relisted cache keeps following the server.
            core.delete_namespaced_service("keep", "gone", _request_timeout=T)
            assert wait_for(lambda: names(inf) == ["new"])
            # Resuming from a version long compacted away: 410 again, relist again.
            gone, lists = inf.stats["gone"], inf.stats["lists"]
            assert wait_for(lambda: inf.cut_watch(resume_from="1"))
            assert wait_for(lambda: inf.stats["gone"] > gone and inf.stats["lists"] > lists)
            assert names(inf) == ["new"]
        finally:
            assert inf.stop(timeout=15)
            inf.api_client.close()
            ac.close()


def test_blackholed_server_does_not_hang_the_informer(core, namespace, informers, api):
    inf = informers(ResourceRef("services", "v1", "services", namespace))
    assert inf.wait_synced(20)
    api.add_fault(path_regex=f"/namespaces/{namespace}/services", methods=["GET"], blackhole=True)
    try:
        # The open stream predates the fault: break streams until none is open.
        assert wait_for(lambda: not inf.cut_watch())
        # The held request is abandoned after its read timeout (3 + 2 s here), reported,
        # and retried; the loop itself keeps running.
        assert wait_for(lambda: inf.stats["errors"] >= 2, timeout=40)
        assert "timed out" in inf.last_error.lower()
        assert inf.alive
    finally:
        api.clear_faults()
    core.create_namespaced_service(namespace, service("after"), _request_timeout=T)
    assert wait_for(lambda: inf.store.get(namespace, "after") is not None, timeout=30)
    assert wait_for(lambda: inf.last_error is None)


def test_stop_is_bounded_while_the_server_is_blackholed(api_client, namespace, api):
    api.add_fault(path_regex=f"/namespaces/{namespace}/services", methods=["GET"], blackhole=True)
    inf = Informer(
        bounded_copy(api_client), ResourceRef("services", "v1", "services", namespace), config=FAST
    ).start()
    try:
        assert wait_for(lambda: inf.stats["errors"] >= 1, timeout=30)  # the list timed out
        assert not inf.synced
    finally:
        # Blocked in a request the server never answers: stop returns once its read timeout
        # (3 s for a list) has passed.
        assert inf.stop(timeout=15)
        inf.api_client.close()
        api.clear_faults()


def test_refused_connections_are_retried_and_the_cache_catches_up(core, namespace, informers, api):
    inf = informers(ResourceRef("services", "v1", "services", namespace))
    assert inf.wait_synced(20)
    api.add_fault(refuse=True)  # listener closed, open watches dropped
    try:
        assert wait_for(lambda: inf.stats["errors"] >= 1, timeout=30)
        assert inf.alive
    finally:
        api.clear_faults()
    core.create_namespaced_service(namespace, service("back"), _request_timeout=T)
    assert wait_for(lambda: inf.store.get(namespace, "back") is not None, timeout=30)


def test_api_server_restart_relists_and_follows_the_new_server(tmp_path):
    # Same port and state dir: objects survive the restart. The informer rides out the
    # downtime with backoff, then resumes (or relists on 410, if the restarted server no
    # longer has its version) and keeps following the new server process.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    state = tmp_path / "cluster"
    no_bookmarks = ["--bookmark-interval", "600"]  # keep the informer's version behind
    first = ApiServer.start(state_dir=state, port=port, extra_args=no_bookmarks)
    ac = first.api_client()
    ac.configuration.retries = False
    inf = Informer(
        bounded_copy(ac), ResourceRef("services", "v1", "services", "r"), config=FAST
    ).start()
    second = None
    try:
        core = client.CoreV1Api(ac)
        core.create_namespace({"metadata": {"name": "r"}}, _request_timeout=T)
        core.create_namespaced_service("r", service("old"), _request_timeout=T)
        assert wait_for(lambda: names(inf) == ["old"])
        # Another kind moves the global version past the informer's last one (no bookmarks).
        core.create_namespaced_config_map("r", {"metadata": {"name": "c"}}, _request_timeout=T)
        first.stop()
        assert wait_for(lambda: inf.stats["errors"] >= 1, timeout=30)
        second = ApiServer.start(state_dir=state, port=port, extra_args=no_bookmarks)
        core.create_namespaced_service("r", service("new"), _request_timeout=T)
        assert wait_for(lambda: names(inf) == ["new", "old"], timeout=30)
        core.delete_namespaced_service("old", "r", _request_timeout=T)
        assert wait_for(lambda: names(inf) == ["new"])
    finally:
        assert inf.stop(timeout=15)
        inf.api_client.close()
        ac.close()
        first.stop()
        if second is not None:
            second.stop()


ops_st = st.lists(
    st.tuples(
        st.sampled_from(["create", "label", "delete", "cut"]),
        st.sampled_from(["s0", "s1", "s2", "s3"]),
        st.integers(0, 3),
    ),
    min_size=1,
    max_size=15,
)


@settings(
    max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=ops_st)
def test_cache_converges_to_the_server_state(api, api_client, ops):
    """Random writes (and random cuts of the watch) on the real server: the cache ends
    equal to a fresh list, object for object and version for version."""
    core = client.CoreV1Api(api_client)
    ns = f"conv-{next(_conv)}"
    core.create_namespace({"metadata": {"name": ns}}, _request_timeout=T)
    inf = Informer(
        bounded_copy(api_client), ResourceRef("services", "v1", "services", ns), config=FAST
    ).start()
    try:
        assert inf.wait_synced(20)
        for name in ("s0", "s1", "s2"):  # something to label and delete from the start
            core.create_namespaced_service(ns, service(name), _request_timeout=T)
        for op, name, value in ops:
            try:
                if op == "create":
                    core.create_namespaced_service(ns, service(name), _request_timeout=T)
                elif op == "label":
                    body = {"metadata": {"labels": {"v": str(value)}}}
                    core.patch_namespaced_service(name, ns, body, _request_timeout=T)
                elif op == "delete":
                    core.delete_namespaced_service(name, ns, _request_timeout=T)
                else:
                    inf.cut_watch()
            except client.ApiException as exc:
                assert exc.status in (404, 409)  # absent / already there: fine

        def server_state() -> dict:
            items = core.list_namespaced_service(ns, _request_timeout=T).items
            return {i.metadata.name: i.metadata.resource_version for i in items}

        def cache_state() -> dict:
            return {
                o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in inf.store.list()
            }

        expected = server_state()
        assert wait_for(lambda: cache_state() == expected), (cache_state(), expected)
    finally:
        assert inf.stop(timeout=15)
        inf.api_client.close()


def test_objects_from_separate_watch_events_share_their_keys_and_short_strings(
    core, namespace, informers
):
    """Each watch event is decoded on its own; the cache interns keys and short strings, so
    thousands of cached objects hold one copy of "metadata", the namespace, label values
    (issue 19: the controller's memory at 5,000 Ingresses)."""
    inf = informers(ResourceRef("services", "v1", "services", namespace))
    assert inf.wait_synced(20)
    for n in ("a", "b"):  # after the sync: each arrives in its own ADDED event
        body = service(n)
        body["metadata"]["labels"] = {"tier": "web-frontend"}
        core.create_namespaced_service(namespace, body, _request_timeout=T)
    assert wait_for(lambda: names(inf) == ["a", "b"])
    a, b = inf.store.get(namespace, "a"), inf.store.get(namespace, "b")
    key_a = next(k for k in a if k == "metadata")
    key_b = next(k for k in b if k == "metadata")
    assert key_a is key_b
    assert a["metadata"]["namespace"] is b["metadata"]["namespace"]
    assert a["metadata"]["labels"]["tier"] is b["metadata"]["labels"]["tier"]
    assert "managedFields" not in a["metadata"]

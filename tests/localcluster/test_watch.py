"""Watch: order, resume from a resourceVersion, 410 Gone, bookmarks, timeouts, selectors."""

from __future__ import annotations

import contextlib
import json
import queue
import threading
import time
import urllib.request
from collections.abc import Iterator

import kubernetes
import pytest
from kubernetes import watch
from kubernetes.client import ApiException

from localcluster.testing import ApiServer


class Collector:
    """Runs watch.Watch().stream in a thread and hands events over a queue."""

    def __init__(self, func, *args, **kwargs) -> None:
        self.w = watch.Watch()
        self.events: queue.Queue = queue.Queue()
        self.error: Exception | None = None

        def run() -> None:
            try:
                for ev in self.w.stream(func, *args, **kwargs):
                    self.events.put(ev)
            except Exception as exc:
                self.error = exc
            finally:
                self.events.put(None)

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def take(self, n: int, timeout: float = 10.0, types: set[str] | None = None) -> list[dict]:
        out: list[dict] = []
        deadline = time.monotonic() + timeout
        while len(out) < n:
            ev = self.events.get(timeout=max(0.01, deadline - time.monotonic()))
            if ev is None:
                break
            if types is None or ev["type"] in types:
                out.append(ev)
        return out

    def close(self) -> None:
        self.w.stop()
        resp = self.w._resp
        if resp is not None:
            # Unblocks the reading thread (urllib3 >= 2.3); it may have finished already.
            with contextlib.suppress(OSError, RuntimeError, ValueError):
                resp.shutdown()
        self.thread.join(timeout=10)


@pytest.fixture()
def collectors() -> Iterator[list[Collector]]:
    made: list[Collector] = []
    yield made
    for c in made:
        c.close()


def test_watch_from_resource_version_sees_every_change_in_order(core, namespace, collectors):
    start = core.list_namespaced_config_map(namespace).metadata.resource_version
    c = Collector(
        core.list_namespaced_config_map, namespace, resource_version=start, timeout_seconds=30
    )
    collectors.append(c)
    a = core.create_namespaced_config_map(namespace, {"metadata": {"name": "a"}})
    core.patch_namespaced_config_map("a", namespace, {"data": {"k": "v"}})
    core.delete_namespaced_config_map("a", namespace)
    events = c.take(3)
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "DELETED"]
    rvs = [int(e["object"].metadata.resource_version) for e in events]
    assert rvs == sorted(rvs) and rvs[0] == int(a.metadata.resource_version)
    assert events[1]["object"].data == {"k": "v"}


def test_watch_without_resource_version_starts_with_current_state(core, namespace, collectors):
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "x1"}})
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "x2"}})
    c = Collector(core.list_namespaced_config_map, namespace, timeout_seconds=30)
    collectors.append(c)
    events = c.take(2)
    assert sorted((e["type"], e["object"].metadata.name) for e in events) == [
        ("ADDED", "x1"),
        ("ADDED", "x2"),
    ]


def test_watch_resume_gets_exactly_the_missed_events(core, namespace, collectors):
    first = core.create_namespaced_config_map(namespace, {"metadata": {"name": "r0"}})
    resume_from = first.metadata.resource_version
    missed = [
        core.create_namespaced_config_map(namespace, {"metadata": {"name": f"r{i}"}})
        for i in range(1, 4)
    ]
    c = Collector(
        core.list_namespaced_config_map, namespace, resource_version=resume_from, timeout_seconds=30
    )
    collectors.append(c)
    events = c.take(3)
    assert [e["object"].metadata.name for e in events] == ["r1", "r2", "r3"]
    assert [e["object"].metadata.resource_version for e in events] == [
        m.metadata.resource_version for m in missed
    ]
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "r4"}})
    assert c.take(1)[0]["object"].metadata.name == "r4"


def test_label_selector_watch_turns_unmatching_changes_into_deleted(core, namespace, collectors):
    rv = core.list_namespaced_config_map(namespace).metadata.resource_version
    c = Collector(
        core.list_namespaced_config_map,
        namespace,
        resource_version=rv,
        label_selector="app=web",
        timeout_seconds=30,
    )
    collectors.append(c)
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "o", "labels": {}}})
    core.create_namespaced_config_map(
        namespace, {"metadata": {"name": "w", "labels": {"app": "web"}}}
    )
    core.patch_namespaced_config_map("w", namespace, {"metadata": {"labels": {"app": "db"}}})
    core.patch_namespaced_config_map("o", namespace, {"metadata": {"labels": {"app": "web"}}})
    events = c.take(3)
    assert [(e["type"], e["object"].metadata.name) for e in events] == [
        ("ADDED", "w"),
        ("DELETED", "w"),
        ("ADDED", "o"),
    ]


def test_field_selector_watch_on_pod_phase(core, namespace, collectors):
    rv = core.list_namespaced_pod(namespace).metadata.resource_version
    c = Collector(
        core.list_namespaced_pod,
        namespace,
        resource_version=rv,
        field_selector="status.phase=Running",
        timeout_seconds=30,
    )
    collectors.append(c)
    core.create_namespaced_pod(
        namespace, {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}}
    )
    core.patch_namespaced_pod_status("p", namespace, {"status": {"phase": "Running"}})
    events = c.take(1)
    assert events[0]["type"] == "ADDED" and events[0]["object"].status.phase == "Running"


def test_timeout_seconds_ends_the_stream(core, namespace):
    started = time.monotonic()
    events = list(
        watch.Watch().stream(
            core.list_namespaced_config_map,
            namespace,
            resource_version=core.list_namespaced_config_map(namespace).metadata.resource_version,
            timeout_seconds=1,
        )
    )
    assert events == []
    assert time.monotonic() - started < 20


def test_bookmarks_carry_the_current_resource_version(core, namespace, collectors):
    rv = core.list_namespaced_config_map(namespace).metadata.resource_version
    c = Collector(
        core.list_namespaced_config_map,
        namespace,
        resource_version=rv,
        allow_watch_bookmarks=True,
        timeout_seconds=30,
    )
    collectors.append(c)
    other = core.create_namespaced_secret(namespace, {"metadata": {"name": "elsewhere"}})
    # Bookmarks come every 0.5 s on the shared test server; one arrives after the write.
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        bm = c.take(1, types={"BOOKMARK"})[0]
        if int(bm["raw_object"]["metadata"]["resourceVersion"]) >= int(
            other.metadata.resource_version
        ):
            break
    else:
        pytest.fail("no bookmark at or after the last write")
    assert bm["raw_object"]["kind"] == "ConfigMap"


def test_watch_single_object_by_name(core, namespace, collectors):
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "one"}})
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "two"}})
    c = Collector(
        core.list_namespaced_config_map,
        namespace,
        field_selector="metadata.name=two",
        timeout_seconds=30,
    )
    collectors.append(c)
    events = c.take(1)
    assert events[0]["object"].metadata.name == "two"
    core.patch_namespaced_config_map("one", namespace, {"data": {"a": "1"}})
    core.patch_namespaced_config_map("two", namespace, {"data": {"a": "2"}})
    assert c.take(1)[0]["object"].data == {"a": "2"}


def test_many_watchers_see_the_same_order(core, namespace, collectors):
    rv = core.list_namespaced_config_map(namespace).metadata.resource_version
    for _ in range(8):
        collectors.append(
            Collector(
                core.list_namespaced_config_map, namespace, resource_version=rv, timeout_seconds=60
            )
        )
    writers = []
    for t in range(4):

        def write(t=t) -> None:
            for i in range(10):
                core.create_namespaced_config_map(namespace, {"metadata": {"name": f"w{t}-{i}"}})

        writers.append(threading.Thread(target=write))
    for w in writers:
        w.start()
    for w in writers:
        w.join()
    sequences = []
    for c in collectors:
        events = c.take(40, timeout=30)
        sequences.append([int(e["object"].metadata.resource_version) for e in events])
    assert all(len(s) == 40 for s in sequences)
    assert all(s == sorted(s) for s in sequences)
    assert all(s == sequences[0] for s in sequences)


# --- 410 Gone, on a server with a short watch history --------------------------------------


@pytest.fixture(scope="module")
def short_history() -> Iterator[ApiServer]:
    with ApiServer.start(extra_args=["--watch-history", "20"]) as api:
        yield api


def test_watch_from_too_old_version_is_410_error_event(short_history):
    with short_history.api_client() as c:
        core = kubernetes.client.CoreV1Api(c)
        old = core.create_namespaced_config_map("default", {"metadata": {"name": "old"}})
        for i in range(30):
            core.create_namespaced_config_map("default", {"metadata": {"name": f"n{i}"}})
        # The real server answers 200 and sends Status 410 inside the stream.
        url = (
            f"{short_history.url}/api/v1/namespaces/default/configmaps?watch=true"
            f"&resourceVersion={old.metadata.resource_version}"
        )
        with urllib.request.urlopen(url, timeout=10) as resp:
            assert resp.status == 200
            event = json.loads(resp.readline())
        assert event["type"] == "ERROR"
        assert event["object"]["code"] == 410 and event["object"]["reason"] == "Expired"
        assert "too old resource version" in event["object"]["message"]
        # The official client raises ApiException(410) (no retry when a timeout is given).
        with pytest.raises(ApiException) as err:
            for _ in watch.Watch().stream(
                core.list_namespaced_config_map,
                "default",
                resource_version=old.metadata.resource_version,
                timeout_seconds=5,
            ):
                pass
        assert err.value.status == 410
        # A recent version still resumes.
        recent = core.list_namespaced_config_map("default").metadata.resource_version
        events = list(
            watch.Watch().stream(
                core.list_namespaced_config_map,
                "default",
                resource_version=recent,
                timeout_seconds=1,
            )
        )
        assert events == []


def test_list_with_too_old_continue_is_410(short_history):
    with short_history.api_client() as c:
        core = kubernetes.client.CoreV1Api(c)
        core.create_namespace({"metadata": {"name": "paged"}})
        for i in range(6):
            core.create_namespaced_config_map("paged", {"metadata": {"name": f"p{i}"}})
        page = core.list_namespaced_config_map("paged", limit=2)
        assert page.metadata._continue
        for i in range(30):
            core.create_namespaced_secret("paged", {"metadata": {"name": f"s{i}"}})
        with pytest.raises(ApiException) as err:
            core.list_namespaced_config_map("paged", limit=2, _continue=page.metadata._continue)
        assert err.value.status == 410
        assert json.loads(err.value.body)["reason"] == "Expired"

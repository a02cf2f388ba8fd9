"""ADR-0034 end to end: the opt-in readiness gate orders a single-replica rollout.

TestIngressRollingRestartZeroDowntime: a one-replica gated backend behind an Ingress is
restarted (`kubectl rollout restart`) under continuous requests through every HAProxy pod;
no request fails. TestIngressRollingRestartUngatedRecovers: the same without the gate fails
only with fast 503s, all inside one window of at most 3 s.

Both backends drain on SIGTERM, which ADR-0034 leaves to the application: they keep
answering (with `Connection: close`) for `--drain-seconds`, then finish the requests in flight
and exit. Without a drain the sample backend resets connections still queued in its listen
backlog when it closes, a 502 no load balancer can prevent (seen once in ~600 requests).
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

import kubernetes
import pytest

from controller.statusapplier import FIELD_MANAGER, GATE_CONDITION
from devstack import stack
from devstack.stack import wait_for
from tests.e2e.harness import System, start_system

pytestmark = pytest.mark.e2e

NODE_CONDITIONS = ("PodScheduled", "Initialized", "ContainersReady", "Ready")
GATED_DRAIN_SECONDS = 2
# A guessed duration (ADR-0034, "Alternatives considered"): if propagation takes longer, the
# ungated rollout shows its window of 503s.
UNGATED_DRAIN_SECONDS = 1
FAST_503_SECONDS = 1.0
FAILURE_WINDOW_SECONDS = 3.0
LOAD_BOUND_SECONDS = 120.0


# -- pure helpers ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sample:
    haproxy: str  # HAProxy pod the request went through
    started: float  # monotonic
    elapsed: float
    status: int | None  # None: no HTTP answer at all
    backend: str  # X-Pod-Name of the answering backend pod
    error: str = ""


def failed(samples: list[Sample]) -> list[Sample]:
    return [s for s in samples if s.status != 200]


def failure_window(samples: list[Sample]) -> float:
    """Seconds from the first failed request's start to the last one's end (0 without any)."""
    bad = failed(samples)
    if not bad:
        return 0.0
    return max(s.started + s.elapsed for s in bad) - min(s.started for s in bad)


def test_failure_window_helpers() -> None:
    ok = Sample("h", 1.0, 0.01, 200, "a")
    bad = [Sample("h", 2.0, 0.1, 503, ""), Sample("h", 4.0, 0.5, None, "", "refused")]
    assert failed([ok, *bad]) == bad
    assert failure_window([ok]) == 0.0
    assert failure_window([ok, *bad]) == pytest.approx(2.5)


# -- the running system ---------------------------------------------------------------------


def backend(name: str, gated: bool, drain: int) -> list[dict]:
    objs = stack.backend(name, replicas=1, gated=gated)
    spec = objs[0]["spec"]["template"]["spec"]
    if drain:
        spec["containers"][0]["command"] += ["--drain-seconds", str(drain)]
        spec["terminationGracePeriodSeconds"] = drain + 3
    return objs


@pytest.fixture(scope="module")
def system() -> Iterator[System]:
    system = start_system("readiness_gate", haproxy_replicas=2, gate=True)
    try:
        system.apply(backend("gated", gated=True, drain=GATED_DRAIN_SECONDS))
        system.apply(backend("plain", gated=False, drain=UNGATED_DRAIN_SECONDS))
        system.apply([stack.ingress("gated", "gated.example", "gated")])
        system.apply([stack.ingress("plain", "plain.example", "plain")])
        wait_for(lambda: len(system.haproxy_pods(ready_only=False)) == 2, 60, what="haproxy pods")
        yield system
    finally:
        system.stop()


def raw_pod(system: System, name: str) -> dict:
    response = system.core().read_namespaced_pod(name, stack.NAMESPACE, _preload_content=False)
    return json.loads(response.data)


def backend_pods(system: System, app: str) -> list[dict]:
    response = system.core().list_namespaced_pod(
        stack.NAMESPACE, label_selector=f"app={app}", _preload_content=False
    )
    return json.loads(response.data)["items"]


def conditions(pod: dict) -> dict[str, str]:
    return {c["type"]: c["status"] for c in (pod.get("status") or {}).get("conditions") or []}


def single_ready_pod(system: System, app: str) -> str | None:
    """The name of the app's only pod when it is Ready and nothing else exists."""
    pods = backend_pods(system, app)
    if len(pods) != 1 or pods[0]["metadata"].get("deletionTimestamp"):
        return None
    return pods[0]["metadata"]["name"] if conditions(pods[0]).get("Ready") == "True" else None


def served_by(system: System, host: str, pod_name: str) -> bool:
    """Every HAProxy pod answers for host from the backend pod `pod_name`."""
    for hp in system.haproxy_pods(ready_only=False):
        response = system.get(hp, host, timeout=2)
        if response.status_code != 200 or response.headers.get("X-Pod-Name") != pod_name:
            return False
    return True


def rollout_restart(system: System, name: str) -> None:
    """What `kubectl rollout restart deployment/<name>` writes."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    patch = {
        "spec": {
            "template": {"metadata": {"annotations": {"kubectl.kubernetes.io/restartedAt": now}}}
        }
    }
    system.apps().patch_namespaced_deployment(name, stack.NAMESPACE, patch)


class Load:
    """Continuous requests through every HAProxy pod, one connection per request."""

    def __init__(self, system: System, host: str) -> None:
        self.host = host
        self.samples: list[Sample] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._loop, args=(hp.metadata.name, hp.status.pod_ip))
            for hp in system.haproxy_pods(ready_only=False)
        ]

    def __enter__(self) -> Load:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=30)

    def _loop(self, name: str, ip: str) -> None:
        deadline = time.monotonic() + LOAD_BOUND_SECONDS
        while not self._stop.is_set() and time.monotonic() < deadline:
            started = time.monotonic()
            conn = http.client.HTTPConnection(ip, 8080, timeout=10)
            try:
                conn.request("GET", "/", headers={"Host": self.host, "Connection": "close"})
                response = conn.getresponse()
                response.read()
                sample = Sample(
                    name,
                    started,
                    time.monotonic() - started,
                    response.status,
                    response.getheader("X-Pod-Name") or "",
                )
            except (OSError, http.client.HTTPException) as exc:
                sample = Sample(name, started, time.monotonic() - started, None, "", repr(exc))
            finally:
                conn.close()
            with self._lock:
                self.samples.append(sample)
            time.sleep(0.005)


class DeletionWatch:
    """Polls one pod; `seen_at` is the monotonic time its deletion was first observed (an
    upper bound on when the Deployment deleted it)."""

    def __init__(self, system: System, name: str) -> None:
        self.client = system.api.api_client()  # one client for all the polls
        self.core = kubernetes.client.CoreV1Api(self.client)
        self.name = name
        self.seen_at: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop)

    def __enter__(self) -> DeletionWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        self.client.close()

    def _loop(self) -> None:
        deadline = time.monotonic() + LOAD_BOUND_SECONDS
        while self.seen_at is None and not self._stop.is_set() and time.monotonic() < deadline:
            try:
                pod = self.core.read_namespaced_pod(self.name, stack.NAMESPACE, _request_timeout=5)
                deleting = pod.metadata.deletion_timestamp is not None
            except kubernetes.client.ApiException as exc:  # 404: already gone
                deleting = exc.status == 404
            except Exception:  # a slow or refused read: poll again
                deleting = False
            if deleting:
                self.seen_at = time.monotonic()
            self._stop.wait(0.02)


@dataclass
class Restart:
    old: str
    new: str
    samples: list[Sample]
    old_deleted_at: float | None


def restart_under_load(system: System, app: str, host: str) -> Restart:
    """Restart the app's Deployment under load through every HAProxy pod."""
    old = wait_for(lambda: single_ready_pod(system, app), 90, what=f"{app} pod Ready")
    wait_for(lambda: served_by(system, host, old), 60, what=f"{host} served by {old}")
    with Load(system, host) as load, DeletionWatch(system, old) as deletion:
        time.sleep(1.0)  # traffic before the restart
        rollout_restart(system, app)
        new = wait_for(
            lambda: (name := single_ready_pod(system, app)) != old and name,
            90,
            what=f"{app} rolled out",
        )
        wait_for(lambda: served_by(system, host, new), 30, what=f"{host} served by {new}")
        time.sleep(1.0)  # traffic after the old pod is gone
    return Restart(old, new, load.samples, deletion.seen_at)


def lead(restart: Restart) -> str:
    """Per HAProxy pod, how long before the old pod's deletion it first routed to the new one
    (negative: only after), for the record."""
    out = []
    for name in sorted({s.haproxy for s in restart.samples}):
        starts = [
            s.started for s in restart.samples if s.haproxy == name and s.backend == restart.new
        ]
        if starts and restart.old_deleted_at is not None:
            out.append(f"{name}: {restart.old_deleted_at - min(starts):+.3f}s")
    return "new pod routed before deletion by " + ", ".join(out)


def summary(samples: list[Sample]) -> str:
    bad = failed(samples)
    head = [(round(s.started, 3), s.haproxy, s.status, round(s.elapsed, 3), s.error) for s in bad]
    return f"{len(samples)} requests, {len(bad)} failed: {head[:20]}"


# -- the acceptance tests ------------------------------------------------------------------------


def test_ingress_rolling_restart_zero_downtime(system: System) -> None:
    restart = restart_under_load(system, "gated", "gated.example")
    old, new, samples = restart.old, restart.new, restart.samples
    assert not failed(samples), summary(samples)
    # The restart really happened under traffic and through every HAProxy pod. (How long
    # before the deletion each HAProxy pod first sent traffic to the new pod is printed, not
    # asserted: round-robin sampling may miss a short window; zero failures is the contract.)
    assert restart.old_deleted_at is not None
    for hp in system.haproxy_pods(ready_only=False):
        through = {s.backend for s in samples if s.haproxy == hp.metadata.name}
        assert {old, new} <= through, (hp.metadata.name, through)
    print(f"gated restart {old} -> {new}: {summary(samples)}; {lead(restart)}")
    # The new pod became Ready through the gate, written by haptic-deployed with SSA,
    # owning only that entry; the node's own conditions are all there.
    pod = raw_pod(system, new)
    found = conditions(pod)
    assert found.get(GATE_CONDITION) == "True"
    for t in NODE_CONDITIONS:
        assert found.get(t) == "True", (t, found)
    mine = [m for m in pod["metadata"]["managedFields"] if m["manager"] == FIELD_MANAGER]
    assert [(m["operation"], m.get("subresource")) for m in mine] == [("Apply", "status")]
    key = "k:" + json.dumps({"type": GATE_CONDITION}, separators=(",", ":"))
    assert list(mine[0]["fieldsV1"]["f:status"]["f:conditions"]) == [key]
    others = [m for m in pod["metadata"]["managedFields"] if m["manager"] != FIELD_MANAGER]
    assert any("f:status" in (m.get("fieldsV1") or {}) for m in others)  # the node's entry


def test_ingress_rolling_restart_ungated_recovers(system: System) -> None:
    restart = restart_under_load(system, "plain", "plain.example")
    old, new, samples = restart.old, restart.new, restart.samples
    bad = failed(samples)
    # Only fast 503s (never a hang, a reset or a timeout), all inside one short window.
    assert all(s.status == 503 and s.elapsed < FAST_503_SECONDS for s in bad), summary(samples)
    assert failure_window(samples) <= FAILURE_WINDOW_SECONDS, summary(samples)
    # Nobody wrote the gate on a pod that does not hold it.
    pod = raw_pod(system, new)
    assert GATE_CONDITION not in conditions(pod)
    assert all(m["manager"] != FIELD_MANAGER for m in pod["metadata"]["managedFields"])
    print(f"ungated restart {old} -> {new}: {summary(samples)}; {lead(restart)}")

"""A rollout of a big Deployment (issue 19): 1,000 endpoint changes in 10 s on one Service,
with 800 Ingresses loaded, 3 HAProxy pods and 2 controllers (bench_convergence's stack).

The Service `rollout` has no selector; the benchmark writes its EndpointSlice itself, 100
times a second: each write moves the not-ready endpoints of the rollout to new addresses
(pods being replaced), and every 100th write also moves the one ready endpoint between the
running sample backend pods A and B (a "marker"). The lag of a marker move is from its write
until every HAProxy pod answers from the new pod over HTTP; the run reports the largest.

Targets: 0 reloads on every pod over the burst; max lag <= 1 s. Reported beside them: the
writes actually made and their duration (the API server sets the pace on a loaded machine),
the leader's full and incremental renders over the burst, and the load average.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from typing import Any

import kubernetes

from bench.bench_convergence import (
    HAPROXY_PODS,
    Prober,
    _leader_series,
    _leader_share,
    _reloads,
    _service,
    _setup,
    until_every_pod,
)
from bench.harness import summarize
from devstack import stack
from devstack.stack import wait_for
from tests.e2e.harness import System, start_system
from tests.render.builders import scale_address

INGRESSES = 800
WRITES = int(os.environ.get("BENCH_ROLLOUT_WRITES", "1000"))
SECONDS = 10.0
MARKER_EVERY = 100
NOT_READY = 6  # endpoints of pods being replaced; with the marker, 7 of 10 slots
HOST = "rollout.bench.test"
SLICE = "rollout-bench"
LAG_TIMEOUT = 10.0
TARGET_MAX_LAG_MS = 1000.0


def rollout_endpoints(write: int, marker_ip: str) -> list[dict[str, Any]]:
    """The slice's endpoints at write `write`: the marker ready, the rest not ready on
    addresses that move with every write (pure)."""
    eps = [{"addresses": [marker_ip], "conditions": {"ready": True}}]
    for k in range(NOT_READY):
        n = write * NOT_READY + k
        address = scale_address(n % (1 << 16))
        eps.append({"addresses": [address], "conditions": {"ready": False}})
    return eps


def _slice(endpoints: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": SLICE,
            "namespace": stack.NAMESPACE,
            "labels": {"kubernetes.io/service-name": "rollout"},
        },
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
        "endpoints": endpoints,
    }


def _first_answer_from(prober: Prober, pod: str, deadline: float) -> float | None:
    while time.monotonic() < deadline:
        status, backend = prober.get(HOST)
        if status == 200 and backend == pod:
            return time.monotonic()
        time.sleep(0.01)
    return None


def _burst(
    system: System, probers: list[Prober], pods: dict[str, str]
) -> tuple[list[float], int, float]:
    """The 1,000 writes; returns (marker lags in ms, writes made, seconds taken)."""
    api = kubernetes.client.DiscoveryV1Api(system.api.api_client())
    names = sorted(pods)
    lags: list[float] = []
    failures: list[str] = []
    threads: list[threading.Thread] = []

    def measure(pod: str, written: float) -> None:
        deadline = written + LAG_TIMEOUT
        done = until_every_pod(probers, lambda p: _first_answer_from(p, pod, deadline), LAG_TIMEOUT)
        if done is None:
            failures.append(pod)
        else:
            lags.append((done - written) * 1000)

    started = time.monotonic()
    marker = names[0]
    for write in range(1, WRITES + 1):
        due = started + write * SECONDS / WRITES
        time.sleep(max(0.0, due - time.monotonic()))
        moved = write % MARKER_EVERY == 0
        if moved:
            marker = names[(write // MARKER_EVERY) % 2]
        body = {"endpoints": rollout_endpoints(write, pods[marker])}
        api.patch_namespaced_endpoint_slice(SLICE, stack.NAMESPACE, body)
        if moved:
            t = threading.Thread(target=measure, args=(marker, time.monotonic()))
            t.start()
            threads.append(t)
    taken = time.monotonic() - started
    for t in threads:
        t.join(LAG_TIMEOUT + 5)
    if failures:
        raise RuntimeError(f"marker moves to {failures} not served within {LAG_TIMEOUT:g} s")
    return lags, WRITES, taken


def run() -> list[dict[str, Any]]:
    system = start_system("bench_rollout", haproxy_replicas=HAPROXY_PODS, timings=stack.Timings())
    probers: list[Prober] = []
    try:
        wait_for(
            lambda: len(system.haproxy_pods(ready_only=False)) == HAPROXY_PODS, 60, what="pods"
        )
        a, b = _setup(system, INGRESSES, 0)
        core = system.core()
        pods = {n: core.read_namespaced_pod(n, stack.NAMESPACE).status.pod_ip for n in (a, b)}
        svc = _service("rollout", {})
        del svc["spec"]["selector"]  # the benchmark owns the slice, not the node
        system.apply([svc, _slice(rollout_endpoints(0, pods[a]))])
        system.apply([stack.ingress("rollout", HOST, "rollout")])
        wait_for(lambda: system.serves(HOST, a), 120, what="rollout host served")
        probers = [Prober(p.status.pod_ip) for p in system.haproxy_pods(ready_only=False)]
        load_before = os.getloadavg()[0]
        reloads_before = _reloads(system)
        series_before = _leader_series(system)
        lags, writes, taken = _burst(system, probers, pods)
        load_after = os.getloadavg()[0]
        reloads_after = _reloads(system)
        series_after = _leader_series(system)
    finally:
        for p in probers:
            p.close()
        system.stop()
        shutil.rmtree(system.api.state_dir, ignore_errors=True)
    per_pod = {n: reloads_after[n] - reloads_before.get(n, 0) for n in reloads_after}
    context = {
        "ingresses": INGRESSES,
        "haproxy_pods": HAPROXY_PODS,
        "writes": writes,
        "seconds": round(taken, 2),
        "writes_per_second": round(writes / taken, 1),
        "loadavg_1m": {"before": round(load_before, 2), "after": round(load_after, 2)},
        "cores": os.cpu_count(),
        "leader_renders": _leader_share(series_before, series_after)[0],
    }
    lag = summarize(lags)
    return [
        {
            "metric": "rollout_reloads",
            "value": max(per_pod.values()) if per_pod else 0,
            "reloads_per_pod": per_pod,
            **context,
            "target": "0 on every pod",
            "meets_target": bool(per_pod) and max(per_pod.values()) == 0,
        },
        {
            "metric": "rollout_marker_lag_to_served_by_every_pod",
            **lag,
            **context,
            "target": f"max <= {TARGET_MAX_LAG_MS:g} ms",
            "meets_target": lag["max_ms"] <= TARGET_MAX_LAG_MS,
        },
    ]

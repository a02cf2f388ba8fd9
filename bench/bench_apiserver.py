"""API server throughput and watch latency on loopback.

GET/s and compare-and-swap PUT/s with keep-alive `http.client` connections in client
processes; watch delivery latency (the writer's PUT returned -> the event line received) with
20 concurrent watch streams in another process. The server is the real
`python -m localcluster serve` process with a state directory (journal on).
"""

from __future__ import annotations

import http.client
import json
import multiprocessing as mp
import threading
import time
import urllib.parse
from typing import Any

from bench.harness import summarize
from localcluster.testing import ApiServer

DURATION_S = 4.0
CLIENT_PROCS = 2
THREADS_PER_PROC = 3
WATCHERS = 20
WATCH_WRITES = 300
WATCH_INTERVAL_S = 0.01
NS = "bench"


def _conn(url: str) -> http.client.HTTPConnection:
    parts = urllib.parse.urlsplit(url)
    return http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)


def _request(
    conn: http.client.HTTPConnection, method: str, path: str, body: Any = None
) -> tuple[int, dict[str, Any]]:
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    conn.request(method, path, body=data, headers=headers)
    resp = conn.getresponse()
    payload = resp.read()
    return resp.status, json.loads(payload) if payload else {}


def _load_worker(
    url: str, mode: str, worker: int, start_at: float, duration: float, out: Any
) -> None:
    """One process: THREADS_PER_PROC keep-alive connections doing GETs or CAS PUTs."""
    counts: list[int] = []
    errors: list[int] = []

    def run(thread: int) -> None:
        conn = _conn(url)
        name = f"lease-{worker}-{thread}"
        path = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/{name}"
        status, lease = _request(conn, "GET", path)
        assert status == 200, (status, lease)
        n = bad = 0
        while time.time() < start_at:
            time.sleep(0.001)
        end = start_at + duration
        while time.time() < end:
            if mode == "get":
                status, _ = _request(conn, "GET", path)
                if status == 200:
                    n += 1
                else:
                    bad += 1
            else:
                # Compare-and-swap: the body carries the resourceVersion last seen.
                lease["spec"]["leaseTransitions"] = lease["spec"].get("leaseTransitions", 0) + 1
                status, body = _request(conn, "PUT", path, lease)
                if status == 200:
                    lease = body
                    n += 1
                else:
                    bad += 1
                    _, lease = _request(conn, "GET", path)
        counts.append(n)
        errors.append(bad)
        conn.close()

    threads = [threading.Thread(target=run, args=(t,)) for t in range(THREADS_PER_PROC)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out.put((sum(counts), sum(errors)))


def _throughput(url: str, mode: str) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    start_at = time.time() + 2.0  # time for every process to start and connect
    procs = [
        ctx.Process(target=_load_worker, args=(url, mode, w, start_at, DURATION_S, out))
        for w in range(CLIENT_PROCS)
    ]
    for p in procs:
        p.start()
    results = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(30)
    ok = sum(r[0] for r in results)
    bad = sum(r[1] for r in results)
    return {
        "requests": ok,
        "errors": bad,
        "per_second": round(ok / DURATION_S, 1),
        "connections": CLIENT_PROCS * THREADS_PER_PROC,
        "duration_s": DURATION_S,
    }


def _watch_worker(url: str, rv: str, ready: Any, out: Any) -> None:
    """WATCHERS streams in threads; record (resourceVersion, receive time) for each event."""
    received: list[list[tuple[int, float]]] = [[] for _ in range(WATCHERS)]
    counter = threading.Semaphore(0)

    def watch(i: int) -> None:
        conn = _conn(url)
        conn.request(
            "GET",
            f"/api/v1/namespaces/{NS}/configmaps?watch=true&resourceVersion={rv}"
            f"&timeoutSeconds=120",
        )
        resp = conn.getresponse()
        counter.release()
        while len(received[i]) < WATCH_WRITES:
            line = resp.readline()
            if not line:
                break
            t = time.monotonic()
            event = json.loads(line)
            received[i].append((int(event["object"]["metadata"]["resourceVersion"]), t))
        conn.close()

    threads = [threading.Thread(target=watch, args=(i,)) for i in range(WATCHERS)]
    for t in threads:
        t.start()
    for _ in range(WATCHERS):
        counter.acquire()
    ready.set()
    for t in threads:
        t.join()
    out.put(received)


def _watch_latency(url: str) -> dict[str, Any]:
    conn = _conn(url)
    _request(
        conn,
        "POST",
        f"/api/v1/namespaces/{NS}/configmaps",
        {"metadata": {"name": "watched"}, "data": {"n": "0"}},
    )
    _, cm = _request(conn, "GET", f"/api/v1/namespaces/{NS}/configmaps/watched")
    ctx = mp.get_context("spawn")
    ready, out = ctx.Event(), ctx.Queue()
    proc = ctx.Process(
        target=_watch_worker, args=(url, cm["metadata"]["resourceVersion"], ready, out)
    )
    proc.start()
    assert ready.wait(60), "watchers did not connect"
    time.sleep(0.5)
    returned: dict[int, float] = {}
    path = f"/api/v1/namespaces/{NS}/configmaps/watched"
    for n in range(WATCH_WRITES):
        cm["data"]["n"] = str(n + 1)
        status, cm = _request(conn, "PUT", path, cm)
        returned[int(cm["metadata"]["resourceVersion"])] = time.monotonic()
        assert status == 200
        time.sleep(WATCH_INTERVAL_S)
    received = out.get(timeout=120)
    proc.join(30)
    conn.close()
    samples = []
    missing = 0
    for stream in received:
        got = dict(stream)
        for rv, t_write in returned.items():
            if rv in got:
                # Monotonic clocks are system-wide on Linux, so the processes agree.
                samples.append((got[rv] - t_write) * 1000.0)
            else:
                missing += 1
    stats = summarize(samples)
    stats["negative_samples"] = sum(1 for s in samples if s < 0)
    stats["missing_events"] = missing
    return stats


def run() -> list[dict[str, Any]]:
    with ApiServer.start() as api:
        conn = _conn(api.url)
        _request(conn, "POST", "/api/v1/namespaces", {"metadata": {"name": NS}})
        for w in range(CLIENT_PROCS):
            for t in range(THREADS_PER_PROC):
                _request(
                    conn,
                    "POST",
                    f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases",
                    {"metadata": {"name": f"lease-{w}-{t}"}, "spec": {}},
                )
        conn.close()
        get = _throughput(api.url, "get")
        put = _throughput(api.url, "put")
        watch = _watch_latency(api.url)
    return [
        {
            "metric": "apiserver_get_per_second",
            **get,
            "target": ">= 2000 GET/s",
            "meets_target": get["per_second"] >= 2000,
        },
        {
            "metric": "apiserver_cas_put_per_second",
            **put,
            "target": ">= 1000 PUT/s",
            "meets_target": put["per_second"] >= 1000,
        },
        {
            "metric": "apiserver_watch_delivery_latency",
            **watch,
            "watchers": WATCHERS,
            "writes": WATCH_WRITES,
            "target": "p99 < 20 ms with 20 watchers",
            "meets_target": watch["p99_ms"] < 20.0 and watch["missing_events"] == 0,
        },
    ]

"""End-to-end convergence on the local stack (issues 7 and 19): a change written to the
Kubernetes API until every HAProxy pod serves it, measured by HTTP through each pod.

The stack: the local API server and node, 3 HAProxy pods (agent + real haproxy), 2 controller
replicas as Celery workers on Redis, production-like timings (publish every 10 s, deployments
at most every 100 ms). The load: 800 Ingresses (5,000 in bench_convergence_5000), each with
its own host, Service and EndpointSlice with 3 endpoints (the render benchmark's scale set),
plus a probe Ingress whose Service selects the running sample backend pods A and B by a label.

- endpoint change: toggle the label that puts pod B into the probe Service (the node's
  EndpointSlice controller updates the slice, as kube-controller-manager would). Served when
  every HAProxy pod answers from B (added) or answers only from A four times in a row
  (removed). Issue 19's targets: median <= 40 ms, p95 <= 100 ms at 800 Ingresses.
- the same while a second process burns one core the whole time (target median <= 80 ms).
- leader CPU per endpoint change (the leader process and its children, such as `haproxy -c`):
  target <= 10 ms at 800. Reported with it: the leader's renders by path and the mean time
  of each dispatch step (the term fence, the intent record, the apply to every pod) from
  its own histograms, the leader's share of the latency.
- reloads per 100 endpoint changes, from the agents' reload_count (target 0).
- new Ingress (a new backend, so a reload): create an Ingress for a new host on a Service that
  already exists; served when every HAProxy pod answers 200 for the host. Target p95 <= 700 ms.
- the controllers' RSS at the end (reported; bench_convergence_5000 holds the target).

Every metric carries the load average before and after its series: on a shared machine the
figures mean little without it.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kubernetes
from prometheus_client.parser import text_string_to_metric_families

from bench.harness import summarize
from contract import pod_ready
from devstack import stack
from devstack.stack import wait_for
from tests.e2e.harness import System, start_system
from tests.render.builders import scale_set

HAPROXY_PODS = 3
ENDPOINT_CHANGES = int(os.environ.get("BENCH_CONVERGENCE_CHANGES", "40"))
NEW_INGRESSES = int(os.environ.get("BENCH_CONVERGENCE_INGRESSES", "12"))
REMOVED_RUN = 4  # answers only from A, in a row, that prove B is gone
CHANGE_TIMEOUT = 15.0
PROBE_HOST = "probe.bench.test"
SERVE_LABEL = "haptic-bench/serve"
MIB = 1024 * 1024


@dataclass(frozen=True)
class Scenario:
    """One stack size and the targets issue 19 sets for it."""

    ingresses: int
    endpoint_changes: int
    burn_changes: int  # changes measured again with a core burnt (0: not measured)
    new_ingresses: int
    endpoint_median_ms: float
    endpoint_p95_ms: float
    burn_median_ms: float
    cpu_ms: float
    ingress_p95_ms: float
    rss_mib: float | None = None  # target for the leader's RSS (None: reported only)
    server_slots: int | None = None  # serverSlots of the template config (None: its default)


SCENARIO = Scenario(
    ingresses=800,
    endpoint_changes=ENDPOINT_CHANGES,
    burn_changes=ENDPOINT_CHANGES // 2,
    new_ingresses=NEW_INGRESSES,
    endpoint_median_ms=40.0,
    endpoint_p95_ms=100.0,
    burn_median_ms=80.0,
    cpu_ms=10.0,
    ingress_p95_ms=700.0,
)


# -- pure detection ------------------------------------------------------------------------------


def converged_index(backends: Sequence[str], target: str, added: bool, run: int) -> int | None:
    """Index of the answer that proves the change, or None yet.

    added: the first answer from `target`. Removed: the first answer of `run` answers in a row
    not from `target` (with round robin over two servers, B still enabled can't give that).
    An answer "" (no backend: error or non-200) never proves anything.
    """
    if added:
        for i, name in enumerate(backends):
            if name == target:
                return i
        return None
    streak = 0
    for i, name in enumerate(backends):
        streak = streak + 1 if name and name != target else 0
        if streak == run:
            return i - run + 1
    return None


# -- HTTP through one HAProxy pod --------------------------------------------------------------


class Prober:
    """Keep-alive requests through one HAProxy pod (reconnects when the pod closes)."""

    def __init__(self, ip: str) -> None:
        self.ip = ip
        self.conn: http.client.HTTPConnection | None = None

    def get(self, host: str) -> tuple[int | None, str]:
        for _ in range(2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.ip, 8080, timeout=5)
            try:
                self.conn.request("GET", "/", headers={"Host": host})
                response = self.conn.getresponse()
                response.read()
                if response.getheader("Connection", "").lower() == "close":
                    self.close()
                return response.status, response.getheader("X-Pod-Name") or ""
            except (OSError, http.client.HTTPException):
                self.close()
        return None, ""

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def until_every_pod(
    probers: Sequence[Prober], check: Callable[[Prober], float | None], timeout: float
) -> float | None:
    """Run `check` on every prober in parallel; each returns the monotonic time it saw the
    change (None: timed out). The change is served when the last pod serves it."""
    results: list[float | None] = [None] * len(probers)

    def one(i: int) -> None:
        results[i] = check(probers[i])

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(probers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout + 5)
    if any(r is None for r in results):
        return None
    return max(r for r in results if r is not None)


def watch_endpoint(prober: Prober, target: str, added: bool, deadline: float) -> float | None:
    backends: list[str] = []
    stamps: list[float] = []
    while time.monotonic() < deadline:
        status, backend = prober.get(PROBE_HOST)
        backends.append(backend if status == 200 else "")
        stamps.append(time.monotonic())
        index = converged_index(backends, target, added, REMOVED_RUN)
        if index is not None:
            return stamps[index]
        # Polling costs CPU the controller needs on a small machine; 10 ms is the resolution.
        time.sleep(0.01)
    return None


def watch_host(prober: Prober, host: str, deadline: float) -> float | None:
    while time.monotonic() < deadline:
        status, _ = prober.get(host)
        if status == 200:
            return time.monotonic()
        time.sleep(0.01)
    return None


# -- the stack --------------------------------------------------------------------------------


def _create_all(system: System, objects: list[dict], workers: int = 6) -> None:
    local = threading.local()

    def create(obj: dict) -> None:
        if not hasattr(local, "client"):
            local.client = system.api.api_client()
        c = local.client
        ns = obj["metadata"].get("namespace")
        kind = obj["kind"]
        if kind == "Namespace":
            kubernetes.client.CoreV1Api(c).create_namespace(obj)
        elif kind == "Service":
            kubernetes.client.CoreV1Api(c).create_namespaced_service(ns, obj)
        elif kind == "EndpointSlice":
            kubernetes.client.DiscoveryV1Api(c).create_namespaced_endpoint_slice(ns, obj)
        elif kind == "Ingress":
            kubernetes.client.NetworkingV1Api(c).create_namespaced_ingress(ns, obj)
        else:
            raise ValueError(kind)

    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(create, objects))


def _service(name: str, selector: dict[str, str]) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": stack.NAMESPACE},
        "spec": {"selector": selector, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]},
    }


def _set_serving(system: System, pod: str, serving: bool) -> None:
    labels = {SERVE_LABEL: "yes" if serving else None}
    system.core().patch_namespaced_pod(pod, stack.NAMESPACE, {"metadata": {"labels": labels}})


def _ready_probe_pods(system: System) -> list[str]:
    pods = system.core().list_namespaced_pod(stack.NAMESPACE, label_selector="app=probe").items
    ready = [p.metadata.name for p in pods if not p.metadata.deletion_timestamp and pod_ready(p)]
    return sorted(ready)


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of one process and its waited-for children, such as the
    render gate's `haproxy -c` runs (0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _pod_processes(state_dir: Path) -> dict[int, str]:
    """pid -> pod name of every process the local node runs for this stack."""
    out: dict[int, str] = {}
    marker = f"LOCALCLUSTER_POD_DIR={state_dir}/pods/".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            env = (entry / "environ").read_bytes()
        except OSError:
            continue
        for var in env.split(b"\0"):
            if var.startswith(marker):
                out[int(entry.name)] = var[len(marker) :].decode().rsplit("/", 1)[-1]
    return out


def _cpu_by_part(system: System) -> dict[str, float]:
    """CPU seconds so far by part of the stack (this process hosts the node and probers)."""
    parts = {"api_server": _cpu_seconds(system.api.proc.pid)}
    for name, proc in system.controllers.items():
        parts[name] = _cpu_seconds(proc.proc.pid) if proc.proc else 0.0
    haproxy = 0.0
    for pid, pod in _pod_processes(system.api.state_dir).items():
        if pod.startswith("haproxy-"):
            haproxy += _cpu_seconds(pid)
    parts["haproxy_pods_agent_and_haproxy"] = haproxy
    parts["bench_process_node_and_probers"] = _cpu_seconds(os.getpid())
    return parts


def _reloads(system: System) -> dict[str, int]:
    return {
        p.metadata.name: system.agent_state(p).reload_count
        for p in system.haproxy_pods(ready_only=False)
    }


_STEP_HISTOGRAMS = {
    "haptic_dispatch_step_seconds": None,  # labelled by step: fence, intent
    "haptic_deploy_duration_seconds": "apply_to_every_pod",
}


def _leader_series(system: System) -> dict[str, float]:
    """The leader's series an endpoint change moves: `renders:<path>` (haptic_renders_total)
    and `<step>:sum` / `<step>:count` of each dispatch step (the term fence, the intent
    record, the apply to every pod), from its /metrics."""
    leader = system.leader()
    out: dict[str, float] = {}
    if leader not in system.health_ports:
        return out
    text = system.health(leader, "/metrics").text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "haptic_renders_total":
                out[f"renders:{sample.labels['path']}"] = sample.value
                continue
            base, _, part = sample.name.rpartition("_")
            if base in _STEP_HISTOGRAMS and part in ("sum", "count"):
                step = _STEP_HISTOGRAMS[base] or sample.labels.get("step", "")
                out[f"{step}:{part}"] = sample.value
    return out


def _leader_share(before: dict[str, float], after: dict[str, float]) -> tuple[dict, dict]:
    """(renders by path, mean ms of each dispatch step) between two `_leader_series`."""
    delta = {k: v - before.get(k, 0.0) for k, v in after.items()}
    renders = {k.split(":", 1)[1]: v for k, v in delta.items() if k.startswith("renders:")}
    steps = {
        k[: -len(":sum")]: round(v * 1000 / delta[k[: -len("sum")] + "count"], 1)
        for k, v in delta.items()
        if k.endswith(":sum") and delta.get(k[: -len("sum")] + "count")
    }
    return renders, steps


def _setup(system: System, ingresses: int, new_ingresses: int) -> tuple[str, str]:
    scale = scale_set(ingresses)
    namespaces = sorted({o["metadata"]["namespace"] for o in scale["ingresses"]})
    _create_all(
        system,
        [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}} for n in namespaces],
    )
    _create_all(system, scale["services"] + scale["endpointslices"])
    _create_all(system, scale["ingresses"])
    # The probe: two running backend pods; the Service selects those labelled to serve.
    probe = stack.backend("probe", replicas=2)
    system.apply([probe[0]])
    system.apply([_service("probe", {"app": "probe", SERVE_LABEL: "yes"})])
    system.apply([_service(f"fresh-{i}", {"app": "probe"}) for i in range(new_ingresses)])
    a, b = wait_for(
        lambda: (p := _ready_probe_pods(system)) and len(p) == 2 and p, 120, what="probe pods"
    )
    _set_serving(system, a, True)
    # Created last: once it is served, the 800 Ingresses before it are in the render too.
    system.apply([stack.ingress("probe", PROBE_HOST, "probe")])
    wait_for(lambda: system.serves(PROBE_HOST, a), 300, what="probe host served")
    # The leader then writes every served Ingress's load balancer status, one PATCH each, on
    # its deploy path (controller/ingressstatus.py); measure from a quiet system.
    wait_for(lambda: _statuses_written(system) > ingresses, 600, 1.0, what="Ingress statuses")
    return a, b


def _statuses_written(system: System) -> int:
    networking = kubernetes.client.NetworkingV1Api(system.client)
    items = networking.list_ingress_for_all_namespaces(_request_timeout=30).items
    return sum(1 for i in items if i.status and i.status.load_balancer.ingress)


class SliceWatch:
    """Watches the probe Service's EndpointSlices: when did the slice show each endpoint set
    (splits the node's EndpointSlice controller from haptic's part of the latency)."""

    def __init__(self, system: System) -> None:
        self.api = kubernetes.client.DiscoveryV1Api(system.api.api_client())
        self.events: list[tuple[float, frozenset[str]]] = []
        self._lock = threading.Lock()
        self._watch = kubernetes.watch.Watch()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> SliceWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        # The stream ends at its next event or when the API server stops (daemon thread).
        self._watch.stop()

    def _run(self) -> None:
        stream = self._watch.stream(
            self.api.list_namespaced_endpoint_slice,
            stack.NAMESPACE,
            label_selector="kubernetes.io/service-name=probe",
            timeout_seconds=900,
        )
        # The API server going away at the end of the run ends the stream with an error.
        with contextlib.suppress(Exception):
            self._consume(stream)

    def _consume(self, stream: Any) -> None:
        for event in stream:
            ips = frozenset(
                addr
                for ep in event["object"].endpoints or []
                if (ep.conditions is None or ep.conditions.ready is not False)
                for addr in ep.addresses[:1]
            )
            with self._lock:
                self.events.append((time.monotonic(), ips))

    def first(self, after: float, predicate: Callable[[frozenset[str]], bool]) -> float | None:
        with self._lock:
            for at, ips in self.events:
                if at >= after and predicate(ips):
                    return at
        return None


def _endpoint_changes(
    system: System, probers: list[Prober], a: str, b: str, changes: int
) -> tuple[list[float], list[float]]:
    """(API write -> served by every pod, slice updated -> served by every pod) in ms."""
    b_ip = system.core().read_namespaced_pod(b, stack.NAMESPACE).status.pod_ip
    samples: list[float] = []
    from_slice: list[float] = []
    serving = False
    with SliceWatch(system) as slices:
        for _ in range(changes):
            serving = not serving
            time.sleep(0.4)  # quiet time: each change is measured on its own
            started = time.monotonic()
            _set_serving(system, b, serving)
            deadline = started + CHANGE_TIMEOUT
            done = until_every_pod(
                probers,
                lambda p, s=serving, d=deadline: watch_endpoint(p, b, s, d),
                CHANGE_TIMEOUT,
            )
            if done is None:
                raise RuntimeError(f"endpoint change (B serving={serving}) not served in time")
            samples.append((done - started) * 1000)
            sliced = slices.first(started, lambda ips, s=serving: (b_ip in ips) == s)
            if sliced is not None:
                from_slice.append((done - sliced) * 1000)
    if serving:  # leave B out again (an even number of changes ends there anyway)
        _set_serving(system, b, False)
    return samples, from_slice


def _new_ingresses(system: System, probers: list[Prober], count: int) -> list[float]:
    networking = kubernetes.client.NetworkingV1Api(system.client)
    samples: list[float] = []
    for i in range(count):
        time.sleep(1.5)  # past the agents' reload pacing (1 s), so no reload waits on another
        host = f"fresh-{i}.bench.test"
        started = time.monotonic()
        networking.create_namespaced_ingress(
            stack.NAMESPACE, stack.ingress(f"fresh-{i}", host, f"fresh-{i}")
        )
        deadline = started + CHANGE_TIMEOUT
        done = until_every_pod(
            probers, lambda p, h=host, d=deadline: watch_host(p, h, d), CHANGE_TIMEOUT
        )
        if done is None:
            raise RuntimeError(f"new Ingress {host} not served in time")
        samples.append((done - started) * 1000)
    return samples


@contextlib.contextmanager
def burning_one_core() -> Any:
    """A second process spinning on one core for the duration (issue 19's loaded case)."""
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024 / MIB
    return 0.0


@dataclass
class _Measured:
    """What one run observed, before it is turned into metrics."""

    setup_s: float
    load: dict[str, float]  # 1-minute load average at named points of the run
    leader: Any
    endpoint_ms: list[float]
    slice_ms: list[float]
    burn_ms: list[float]
    ingress_ms: list[float]
    cpu_before: dict[str, float]
    cpu_after: dict[str, float]
    reloads_before: dict[str, int]
    reloads_after: dict[str, int]
    reloads_final: dict[str, int]
    rss_mib: dict[str, float]
    renders: dict[str, float]  # the leader's renders by path during the endpoint changes
    steps: dict[str, float]  # mean ms of each dispatch step during the endpoint changes


def run() -> list[dict[str, Any]]:
    return measure(SCENARIO)


def measure(scenario: Scenario) -> list[dict[str, Any]]:
    """Start the stack, load it with `scenario.ingresses`, measure, stop it."""
    timings = stack.Timings()  # production-like: publish every 10 s, deploy at most every 100 ms
    system = start_system(
        f"bench_convergence_{scenario.ingresses}", haproxy_replicas=HAPROXY_PODS, timings=timings
    )
    probers: list[Prober] = []
    try:
        if scenario.server_slots is not None:
            _set_server_slots(system, scenario.server_slots)
        wait_for(
            lambda: len(system.haproxy_pods(ready_only=False)) == HAPROXY_PODS, 60, what="pods"
        )
        setup_started = time.monotonic()
        a, b = _setup(system, scenario.ingresses, scenario.new_ingresses)
        setup_s = time.monotonic() - setup_started
        probers = [Prober(p.status.pod_ip) for p in system.haproxy_pods(ready_only=False)]
        measured = _measure_on(system, probers, scenario, a, b)
        measured.setup_s = setup_s
    finally:
        for p in probers:
            p.close()
        system.stop()
        shutil.rmtree(system.api.state_dir, ignore_errors=True)  # pod dirs, API state
    return _convergence_metrics(scenario, measured)


def _set_server_slots(system: System, slots: int) -> None:
    patch = {"spec": {"templateLibraries": {"kubernetesBackends": {"serverSlots": slots}}}}
    system.custom().patch_namespaced_custom_object(
        "haproxy-haptic.org", "v1alpha1", stack.NAMESPACE, "haproxytemplateconfigs", "haptic", patch
    )


def _measure_on(
    system: System, probers: list[Prober], scenario: Scenario, a: str, b: str
) -> _Measured:
    load = {"before_endpoint_changes": os.getloadavg()[0]}
    reloads_before = _reloads(system)
    series_before = _leader_series(system)
    cpu_before = _cpu_by_part(system)
    endpoint_ms, slice_ms = _endpoint_changes(system, probers, a, b, scenario.endpoint_changes)
    cpu_after = _cpu_by_part(system)
    renders, steps = _leader_share(series_before, _leader_series(system))
    leader = system.leader()
    load["after_endpoint_changes"] = os.getloadavg()[0]
    reloads_after = _reloads(system)
    burn_ms: list[float] = []
    if scenario.burn_changes:
        with burning_one_core():
            load["before_burn_changes"] = os.getloadavg()[0]
            burn_ms, _ = _endpoint_changes(system, probers, a, b, scenario.burn_changes)
            load["after_burn_changes"] = os.getloadavg()[0]
    reloads_burn = _reloads(system)
    ingress_ms = _new_ingresses(system, probers, scenario.new_ingresses)
    load["after_new_ingresses"] = os.getloadavg()[0]
    rss = {
        name: round(_rss_mib(proc.proc.pid), 1)
        for name, proc in system.controllers.items()
        if proc.proc is not None
    }
    return _Measured(
        setup_s=0.0,
        load={k: round(v, 2) for k, v in load.items()},
        leader=leader,
        endpoint_ms=endpoint_ms,
        slice_ms=slice_ms,
        burn_ms=burn_ms,
        ingress_ms=ingress_ms,
        cpu_before=cpu_before,
        cpu_after=cpu_after,
        reloads_before=reloads_before,
        reloads_after=reloads_burn if scenario.burn_changes else reloads_after,
        reloads_final=_reloads(system),
        rss_mib=rss,
        renders=renders,
        steps=steps,
    )


def _context(s: Scenario, m: _Measured) -> dict[str, Any]:
    """What every metric of a run is measured on."""
    return {
        "ingresses": s.ingresses,
        "haproxy_pods": HAPROXY_PODS,
        "controllers": 2,
        "loadavg_1m": m.load,
        "cores": os.cpu_count(),
        "setup_seconds": round(m.setup_s, 1),
    }


def _cpu_ms_per_change(m: _Measured) -> dict[str, float]:
    """CPU ms of each part of the stack per endpoint change (idle time included)."""
    return {
        part: round(
            (m.cpu_after[part] - m.cpu_before.get(part, 0.0)) * 1000 / len(m.endpoint_ms), 1
        )
        for part in m.cpu_after
    }


def _convergence_metrics(s: Scenario, m: _Measured) -> list[dict[str, Any]]:
    per_pod = {n: m.reloads_after[n] - m.reloads_before.get(n, 0) for n in m.reloads_after}
    worst = max(per_pod.values()) if per_pod else 0
    changes = len(m.endpoint_ms) + len(m.burn_ms)
    ep = summarize(m.endpoint_ms)
    ing = summarize(m.ingress_ms)
    context = _context(s, m)
    cpu = _cpu_ms_per_change(m)
    leader_cpu = cpu.get(m.leader, 0.0) if m.leader else 0.0
    metrics = [
        {
            "metric": "endpoint_change_to_served_by_every_pod",
            **ep,
            **context,
            "target": f"median <= {s.endpoint_median_ms:g} ms and p95 <= {s.endpoint_p95_ms:g} ms",
            "meets_target": ep["median_ms"] <= s.endpoint_median_ms
            and ep["p95_ms"] <= s.endpoint_p95_ms,
        },
        {
            "metric": "endpointslice_updated_to_served_by_every_pod",
            **summarize(m.slice_ms),
            "target": "reported: haptic's share of the endpoint change (watch, render, "
            "deploy); the rest is the node's EndpointSlice controller",
            "meets_target": True,
        },
        {
            "metric": "leader_cpu_ms_per_endpoint_change",
            "value": leader_cpu,
            "leader": m.leader,
            "cpu_ms_by_part": cpu,
            "leader_renders_during_endpoint_changes": m.renders,
            "leader_dispatch_steps_mean_ms": m.steps,
            **context,
            "target": f"leader <= {s.cpu_ms:g} ms (the leader process and its children)",
            "meets_target": bool(m.leader) and leader_cpu <= s.cpu_ms,
        },
        {
            "metric": "reloads_per_100_endpoint_changes",
            "value": round(worst * 100 / changes, 2),
            "endpoint_changes": changes,
            "reloads_per_pod": per_pod,
            "target": "0",
            "meets_target": worst == 0,
        },
        {
            "metric": "new_ingress_reload_to_served_by_every_pod",
            **ing,
            **context,
            "reloads_per_pod": {
                n: m.reloads_final[n] - m.reloads_after.get(n, 0) for n in m.reloads_final
            },
            "target": f"p95 <= {s.ingress_p95_ms:g} ms",
            "meets_target": ing["p95_ms"] <= s.ingress_p95_ms,
        },
        _rss_entry(s, m, context),
    ]
    if m.burn_ms:
        burn = summarize(m.burn_ms)
        metrics.insert(
            1,
            {
                "metric": "endpoint_change_to_served_by_every_pod_one_core_burnt",
                **burn,
                **context,
                "target": f"median <= {s.burn_median_ms:g} ms (a second process burns one core)",
                "meets_target": burn["median_ms"] <= s.burn_median_ms,
            },
        )
    return metrics


def _rss_entry(s: Scenario, m: _Measured, context: dict[str, Any]) -> dict[str, Any]:
    leader_rss = m.rss_mib.get(m.leader, 0.0) if m.leader else 0.0
    entry: dict[str, Any] = {
        "metric": "controller_rss_mib",
        "value": leader_rss,
        "leader": m.leader,
        "rss_mib_by_controller": m.rss_mib,
        **context,
    }
    if s.rss_mib is None:
        entry.update(target="reported", meets_target=True)
    else:
        entry.update(
            target=f"leader <= {s.rss_mib:g} MiB with {s.ingresses} Ingresses, Services "
            "and EndpointSlices",
            meets_target=0 < leader_rss <= s.rss_mib,
        )
    return entry

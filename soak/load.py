"""Load generator and state sampler: the two threads that watch the system during the soak.

The sampler reads the deployment intent first, then the leader Lease, the HAProxy pods and
every agent (the order check_intent_order relies on), and keeps the list of Ready pods the
load generator sends to, as a Service would. Every read has a short timeout, so an API
server fault slows the sampler down but never blocks it.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
import kubernetes

from agents.client import AgentClient
from contract import (
    CFG_PLURAL,
    CHECKPOINT_ROLE,
    EPOCH_ANNOTATION,
    GROUP,
    INTENT_ANNOTATION,
    ROLE_LABEL,
    VERSION,
    parse_epoch,
    pod_ready,
)
from devstack import stack
from soak.invariants import PodObservation, RequestRecord, Sample

READ_TIMEOUT = 2.0


@dataclass
class PodView:
    name: str
    ip: str
    ready: bool
    bootstrap: bool = True
    applied_checksum: str | None = None
    invariant_violation: str | None = None
    worker_pid: int | None = None


@dataclass
class Snapshot:
    t: float = 0.0
    intent: str | None = None
    leader: str | None = None
    epoch: int | None = None
    pods: list[PodView] = field(default_factory=list)


class Sampler(threading.Thread):
    """Samples the system every `interval` seconds until stopped."""

    def __init__(self, kubeconfig: str, token: str, interval: float = 0.5) -> None:
        super().__init__(name="soak-sampler", daemon=True)
        self.client = kubernetes.config.new_client_from_config(config_file=kubeconfig)
        self.token = token
        self.interval = interval
        self.samples: list[Sample] = []
        self.snapshot = Snapshot()
        self.checkpoint_uids: set[str] = set()
        self.event_uids: set[str] = set()
        self.receipts: set[str] = set()
        self.read_errors = 0
        self._halt = threading.Event()
        self._lock = threading.Lock()

    def stop(self) -> None:
        self._halt.set()

    def targets(self) -> list[PodView]:
        with self._lock:
            return [p for p in self.snapshot.pods if p.ready]

    def latest(self) -> Snapshot:
        with self._lock:
            return self.snapshot

    def run(self) -> None:
        rounds = 0
        while not self._halt.is_set():
            started = time.monotonic()
            try:
                self.sample_once(slow=rounds % 4 == 0)
            except Exception:  # an unreadable round is recorded as such, never fatal
                self.read_errors += 1
            rounds += 1
            self._halt.wait(max(0.0, self.interval - (time.monotonic() - started)))

    # -- one round ----------------------------------------------------------------------

    def read_intent(self) -> str | None:
        lease = kubernetes.client.CoordinationV1Api(self.client).read_namespaced_lease(
            "haptic-retained-state", stack.NAMESPACE, _request_timeout=READ_TIMEOUT
        )
        raw = (lease.metadata.annotations or {}).get(INTENT_ANNOTATION)
        return json.loads(raw).get("checksum") if raw else None

    def read_leader(self) -> tuple[str | None, int | None]:
        lease = kubernetes.client.CoordinationV1Api(self.client).read_namespaced_lease(
            "haptic-leader", stack.NAMESPACE, _request_timeout=READ_TIMEOUT
        )
        epoch = (lease.metadata.annotations or {}).get(EPOCH_ANNOTATION)
        return lease.spec.holder_identity, parse_epoch(epoch) if epoch else None

    def sample_once(self, slow: bool = False) -> None:
        t = time.time()
        intent = leader = epoch = None
        try:
            intent = self.read_intent()
        except Exception:
            self.read_errors += 1
        try:
            leader, epoch = self.read_leader()
        except Exception:
            self.read_errors += 1
        try:
            pods = stack.list_haproxy_pods(self.client, timeout=READ_TIMEOUT)
        except Exception:
            self.read_errors += 1
            with self._lock:  # keep the last known pods; record only the intent
                self.samples.append(Sample(t, intent, leader, epoch, {}))
            return
        views, observations = [], {}
        for pod in pods:
            view = PodView(pod.metadata.name, pod.status.pod_ip, pod_ready(pod))
            try:
                with AgentClient(f"http://{view.ip}:8405", self.token, timeout=1.5) as agent:
                    state = agent.state()
                view.bootstrap = state.bootstrap
                view.applied_checksum = state.applied_checksum
                view.invariant_violation = state.invariant_violation
                view.worker_pid = (state.worker or {}).get("pid")
                observations[view.name] = PodObservation(
                    state.applied_checksum, state.apply_count, view.worker_pid, state.runtime_id
                )
            except Exception:
                view.ready = False  # an unreachable agent's pod is not a target this round
            views.append(view)
        with self._lock:
            self.samples.append(Sample(t, intent, leader, epoch, observations))
            self.snapshot = Snapshot(t, intent, leader, epoch, views)
        if slow:
            self.sample_objects()

    def sample_objects(self) -> None:
        """What the mirror must end up holding: checkpoints, receipts, events."""
        custom = kubernetes.client.CustomObjectsApi(self.client)
        try:
            cfgs = custom.list_namespaced_custom_object(
                GROUP,
                VERSION,
                stack.NAMESPACE,
                CFG_PLURAL,
                _request_timeout=READ_TIMEOUT,
            )["items"]
            events = kubernetes.client.CoreV1Api(self.client).list_namespaced_event(
                stack.NAMESPACE, _request_timeout=READ_TIMEOUT
            )
        except Exception:
            self.read_errors += 1
            return
        with self._lock:
            for cfg in cfgs:
                labels = cfg["metadata"].get("labels") or {}
                if labels.get(ROLE_LABEL) == CHECKPOINT_ROLE:
                    self.checkpoint_uids.add(cfg["metadata"]["uid"])
                for entry in (cfg.get("status") or {}).get("deployedToPods") or []:
                    if entry.get("checksum"):
                        self.receipts.add(f"{entry['podName']} {entry['checksum']}")
            self.event_uids.update(e.metadata.uid for e in events.items)

    def observed(self) -> dict[str, set[str]]:
        with self._lock:
            return {
                "checkpoints": set(self.checkpoint_uids),
                "receipts": set(self.receipts),
                "events": set(self.event_uids),
            }


class LoadGenerator:
    """Threads sending HTTP through every Ready HAProxy pod for every host, at a bounded
    rate, recording each request's time, status and latency. A request counts as good only
    when it answers 200 from the backend the host routes to."""

    def __init__(
        self, sampler: Sampler, hosts: dict[str, str], round_interval: float = 0.25
    ) -> None:
        self.sampler = sampler
        self.hosts = hosts  # host -> expected body prefix (the backend's pod names)
        self.round_interval = round_interval
        self.records: list[RequestRecord] = []
        self._halt = threading.Event()
        self._threads = [
            threading.Thread(target=self._run, args=(host,), name=f"soak-load-{host}", daemon=True)
            for host in hosts
        ]
        self._lock = threading.Lock()

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._halt.set()
        for thread in self._threads:
            thread.join(timeout=10)

    def _run(self, host: str) -> None:
        expect = self.hosts[host]
        # One connection per request: a reload closes idle keep-alive connections, which
        # would count against HAProxy what is really the client's reuse policy.
        with httpx.Client(timeout=2.0, limits=httpx.Limits(max_keepalive_connections=0)) as http:
            while not self._halt.is_set():
                started = time.monotonic()
                for pod in self.sampler.targets():
                    self.records.append(self._one(http, pod, host, expect))
                self._halt.wait(max(0.0, self.round_interval - (time.monotonic() - started)))

    @staticmethod
    def _one(http: httpx.Client, pod: PodView, host: str, expect: str) -> RequestRecord:
        t = time.time()
        began = time.monotonic()
        status: int | None = None
        error = ""
        try:
            response = http.get(f"http://{pod.ip}:8080/", headers={"Host": host})
            status = response.status_code
            ok = status == 200 and expect in response.text
            if status == 200 and not ok:
                error = "wrong backend"
        except httpx.HTTPError as exc:
            ok, error = False, type(exc).__name__
        latency = (time.monotonic() - began) * 1000
        return RequestRecord(t, pod.name, host, ok, status, round(latency, 2), error)

    def summary(self) -> dict[str, Any]:
        records = list(self.records)
        latencies = sorted(r.latency_ms for r in records if r.ok)

        def pct(p: float) -> float | None:
            if not latencies:
                return None
            return latencies[min(len(latencies) - 1, round(p / 100 * (len(latencies) - 1)))]

        return {
            "requests": len(records),
            "ok": sum(r.ok for r in records),
            "failed": sum(not r.ok for r in records),
            "latency_ms": {"median": pct(50), "p95": pct(95), "p99": pct(99), "max": pct(100)},
        }

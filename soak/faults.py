"""The faults the soak injects, one at a time, each ending only when the system is seen
healthy again (every HAProxy pod Ready, on the intended plan, serving both hosts).

Each fault returns the Window(s) it opened: when it started and ended, which pods' requests
may fail in it (only the pod being deleted, killed or repaired) and whether it may move
the leader Lease or breaks rendering.
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kubernetes

from contract import EPOCH_ANNOTATION, GROUP, TEMPLATE_PLURAL, VERSION
from devstack import stack
from soak.invariants import Window
from soak.load import Sampler
from soak.services import Postgres, Redis
from tests.e2e.harness import System

BROKEN_TEMPLATE = "{{ this template does not parse"
# Renders (Jinja is happy) but `haproxy -c` refuses it: the asynchronous render gate's case.
REFUSED_TEMPLATE = "global\n    no-such-haproxy-keyword-for-the-soak\n"
HEAL_TIMEOUT = 120.0


@dataclass
class FaultLog:
    kind: str
    started: float
    detail: dict[str, Any] = field(default_factory=dict)
    healed_after_s: float | None = None
    healthy: bool = True
    error: str = ""


GAUGE = "haptic_retained_config_active"
# docs/design/incremental.md: the consistency check's count of incremental outputs that
# differed from the full render (0 always).
MISMATCH = "haptic_incremental_mismatch_total"


def gauge_value(metrics_text: str, name: str) -> float | None:
    """The value of an unlabelled gauge in Prometheus text exposition, or None."""
    for line in metrics_text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


class Faults:
    def __init__(
        self,
        system: System,
        sampler: Sampler,
        rng: random.Random,
        hosts: dict[str, str],
        replicas: int,
        redis: Redis | None,
        postgres: Postgres | None,
    ) -> None:
        self.system = system
        self.sampler = sampler
        self.rng = rng
        self.hosts = hosts
        self.replicas = replicas
        self.redis = redis
        self.postgres = postgres
        self.log: list[FaultLog] = []
        self.gamma = False  # whether the third Ingress exists (ingress_change toggles it)
        # (time, controller, value) of haptic_retained_config_active after each convergence
        self.gauge_readings: list[tuple[float, str, float | None]] = []
        self.mismatch_readings: list[tuple[float, str, float | None]] = []
        # template_gate_refuses: (fault start, seconds until a refusal after dispatch was
        # reported on /healthz, or None)
        self.gate_refusals: list[tuple[float, float | None]] = []
        self.unhealthy = "not judged yet"

    def kinds(self) -> dict[str, Callable[[FaultLog], list[Window]]]:
        kinds: dict[str, Callable[[FaultLog], list[Window]]] = {
            "leader_sigkill": lambda f: self.leader_loss(f, graceful=False),
            "leader_graceful_stop": lambda f: self.leader_loss(f, graceful=True),
            "api_latency": self.api_latency,
            "api_blackhole": self.api_blackhole,
            "haproxy_worker_kill": self.worker_kill,
            "agent_kill": self.agent_kill,
            "haproxy_pod_delete": self.pod_delete,
            "haproxy_scale_up": self.scale_up,
            "template_break_and_repair": self.template_break,
            "ingress_change": self.ingress_change,
            "revert_a_change": self.revert_change,
            "template_gate_refuses": self.template_gate_refuses,
            "leader_lease_recreate": self.lease_recreate,
        }
        if self.redis is not None:
            kinds["redis_restart"] = self.redis_restart
        if self.postgres is not None:
            kinds["postgres_restart"] = self.postgres_restart
        return kinds

    # -- health -------------------------------------------------------------------------

    def healthy(self, replicas: int | None = None, since: float = 0.0) -> bool:
        """Every HAProxy pod Ready, on the intended checksum with a live worker and no
        invariant violation, and answering 200 for every host, in a sample taken after
        `since` (an older sample would still show the fleet from before the fault)."""
        self.unhealthy = self._unhealthy(replicas, since)
        return not self.unhealthy

    def _unhealthy(self, replicas: int | None, since: float) -> str:
        """Why the fleet is not healthy yet ("" when it is): said when a wait times out."""
        snap = self.sampler.latest()
        want = replicas if replicas is not None else self.replicas
        if snap.intent is None or len(snap.pods) != want or snap.t < since:
            return f"intent {snap.intent}, {len(snap.pods)} of {want} pods, sample at {snap.t}"
        for pod in snap.pods:
            if not pod.ready or pod.applied_checksum != snap.intent or pod.invariant_violation:
                return f"{pod.name}: ready {pod.ready}, runs {pod.applied_checksum}, " + (
                    f"intent {snap.intent}, violation {pod.invariant_violation}"
                )
            if not pod.worker_pid:
                return f"{pod.name}: no haproxy worker"
        pods = self.system.haproxy_pods(ready_only=False)
        for host, expect in self.hosts.items():
            if not self.system.serves(host, expect, pods):
                return f"{host} not served by every pod"
        return ""

    def wait_healthy(
        self, entry: FaultLog, since: float, replicas: int | None = None, current: bool = True
    ) -> float:
        """Until the fleet is healthy; then, if it converged on a current render (`current`),
        read the retained-config gauges (a fleet recovered while rendering is broken runs a
        retained config: its gauge is 1, rightly)."""
        deadline = time.monotonic() + HEAL_TIMEOUT
        fresh = time.time() + 0.5  # only samples taken after the fault's last action count
        while time.monotonic() < deadline:
            try:
                if self.healthy(replicas, since=fresh):
                    entry.healed_after_s = round(time.time() - since, 2)
                    if current:
                        self.read_gauges()
                    return time.time()
            except Exception:  # a read during a fault: try again
                pass
            time.sleep(0.5)
        entry.healthy = False
        entry.error = f"not healthy {HEAL_TIMEOUT:.0f}s after the fault"
        return time.time()

    def read_gauges(self) -> None:
        """haptic_retained_config_active of every controller, read once the fleet converged
        on a current render (it must be 0 then: recovery is over)."""
        for name in list(self.system.controllers):
            try:
                text = self.system.health(name, "/metrics").text
            except Exception:  # a controller restarting: no reading
                self.gauge_readings.append((time.time(), name, None))
                self.mismatch_readings.append((time.time(), name, None))
                continue
            self.gauge_readings.append((time.time(), name, gauge_value(text, GAUGE)))
            self.mismatch_readings.append((time.time(), name, gauge_value(text, MISMATCH)))

    def _pick_pod(self) -> Any:
        pods = self.system.haproxy_pods(ready_only=True)
        if not pods:
            raise RuntimeError("no Ready HAProxy pod")
        return self.rng.choice(pods)

    def _leader(self) -> str:
        return stack.wait_for(
            lambda: (name := self.system.leader()) in self.system.controllers and name,
            30,
            what="a leader among the soak's controllers",
        )

    # -- controllers --------------------------------------------------------------------

    def leader_loss(self, entry: FaultLog, graceful: bool) -> list[Window]:
        leader = self._leader()
        entry.detail["leader"] = leader
        start = time.time()
        proc = self.system.controllers[leader]
        if graceful:
            proc.stop(grace=30)  # SIGTERM: the leader drains, then releases the Lease
        else:
            proc.signal(signal.SIGKILL)
            proc.stop(grace=5)  # reaps it
        new = stack.wait_for(
            lambda: (n := self.system.leader()) not in (None, leader) and n, 60, what="new leader"
        )
        entry.detail["new_leader"] = new
        entry.detail["handover_s"] = round(time.time() - start, 2)
        self.system.start_controller(leader)  # back to two replicas
        end = self.wait_healthy(entry, start)
        return [Window(entry.kind, start, end, frozenset(), leader_change=True)]

    # -- API server ---------------------------------------------------------------------

    def api_latency(self, entry: FaultLog) -> list[Window]:
        latency = self.rng.choice([500, 1000, 2000])
        hold = self.rng.uniform(3, 6)
        entry.detail.update(latency_ms=latency, hold_s=round(hold, 1))
        start = time.time()
        self.system.api.add_fault(latency_ms=latency)
        time.sleep(hold)
        self.system.api.clear_faults()
        end = self.wait_healthy(entry, start)
        return [Window(entry.kind, start, end, frozenset(), leader_change=True)]

    def api_blackhole(self, entry: FaultLog) -> list[Window]:
        hold = self.rng.uniform(2, 5)
        entry.detail["hold_s"] = round(hold, 1)
        start = time.time()
        self.system.api.add_fault(blackhole=True)
        time.sleep(hold)
        self.system.api.clear_faults()
        end = self.wait_healthy(entry, start)
        return [Window(entry.kind, start, end, frozenset(), leader_change=True)]

    # -- HAProxy pods -------------------------------------------------------------------

    def worker_kill(self, entry: FaultLog) -> list[Window]:
        pod = self._pick_pod()
        worker = self.system.agent_state(pod).worker or {}
        pid = int(worker["pid"])
        entry.detail.update(pod=pod.metadata.name, worker_pid=pid)
        start = time.time()
        os.kill(pid, signal.SIGKILL)
        end = self.wait_healthy(entry, start)
        return [Window(entry.kind, start, end, frozenset({pod.metadata.name}))]

    @staticmethod
    def agent_pid(pod_ip: str) -> int | None:
        """The agent process of the pod at pod_ip (its argv names --listen POD_IP:8405)."""
        listen = f"{pod_ip}:8405".encode()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"agents" in argv and b"serve" in argv and listen in argv:
                return int(entry.name)
        return None

    def agent_kill(self, entry: FaultLog) -> list[Window]:
        pod = self._pick_pod()
        pid = self.agent_pid(pod.status.pod_ip)
        if pid is None:
            raise RuntimeError(f"no agent process for {pod.metadata.name}")
        entry.detail.update(pod=pod.metadata.name, agent_pid=pid)
        start = time.time()
        os.kill(pid, signal.SIGKILL)
        end = self.wait_healthy(entry, start)
        return [Window(entry.kind, start, end, frozenset({pod.metadata.name}))]

    def pod_delete(self, entry: FaultLog) -> list[Window]:
        pod = self._pick_pod()
        entry.detail["pod"] = pod.metadata.name
        start = time.time()
        self.system.core().delete_namespaced_pod(pod.metadata.name, stack.NAMESPACE)
        end = self.wait_healthy(entry, start)
        return [Window(entry.kind, start, end, frozenset({pod.metadata.name}))]

    def scale_up(self, entry: FaultLog) -> list[Window]:
        start = time.time()
        self.system.scale("haproxy", self.replicas + 1)
        up = self.wait_healthy(entry, start, replicas=self.replicas + 1)
        entry.detail["scaled_up_after_s"] = entry.healed_after_s
        before = {p.metadata.name for p in self.system.haproxy_pods(ready_only=False)}
        self.system.scale("haproxy", self.replicas)
        down_start = time.time()
        end = self.wait_healthy(entry, start)
        removed = before - {p.metadata.name for p in self.system.haproxy_pods(ready_only=False)}
        entry.detail["removed"] = sorted(removed)
        return [
            Window(entry.kind, start, up, frozenset()),
            Window(entry.kind + "_down", down_start, end, frozenset(removed)),
        ]

    # -- brokers and databases ----------------------------------------------------------

    def redis_restart(self, entry: FaultLog) -> list[Window]:
        assert self.redis is not None
        down = self.rng.uniform(1, 3)
        entry.detail["down_s"] = round(down, 1)
        start = time.time()
        self.redis.restart(down)
        end = self.wait_healthy(entry, start)
        return [Window(entry.kind, start, end, frozenset(), leader_change=True)]

    def postgres_restart(self, entry: FaultLog) -> list[Window]:
        assert self.postgres is not None
        down = self.rng.uniform(1, 3)
        entry.detail["down_s"] = round(down, 1)
        start = time.time()
        self.postgres.restart(down)
        end = self.wait_healthy(entry, start)
        return [Window(entry.kind, start, end, frozenset())]

    # -- configuration ------------------------------------------------------------------

    def _patch_template(self, body: dict) -> None:
        self.system.custom().patch_namespaced_custom_object(
            GROUP,
            VERSION,
            stack.NAMESPACE,
            TEMPLATE_PLURAL,
            "haptic",
            body,
        )

    def template_break(self, entry: FaultLog) -> list[Window]:
        """Break rendering; while broken, maybe lose the leader (so the next one has no
        output in memory) and replace one HAProxy pod (it must recover from the checkpoint
        the intent names while the others get nothing); then repair."""
        start = time.time()
        self._patch_template({"spec": {"haproxyConfig": {"template": BROKEN_TEMPLATE}}})
        time.sleep(3)  # the leader renders and fails
        windows: list[Window] = []
        lose_leader = self.rng.random() < 0.5
        entry.detail["leader_killed"] = lose_leader
        if lose_leader:
            leader = self._leader()
            self.system.controllers[leader].signal(signal.SIGKILL)
            self.system.controllers[leader].stop(grace=5)
            stack.wait_for(
                lambda: self.system.leader() not in (None, leader), 60, what="new leader"
            )
            self.system.start_controller(leader)
        pod = self._pick_pod()
        entry.detail["replaced_pod"] = pod.metadata.name
        self.system.core().delete_namespaced_pod(pod.metadata.name, stack.NAMESPACE)
        # The replacement is recovered from the checkpoint: a retained config, gauge 1.
        self.wait_healthy(entry, start, current=False)
        entry.detail["recovered_while_broken"] = entry.healthy
        entry.detail["recovery_s"] = entry.healed_after_s
        repaired = time.time()
        windows.append(
            Window(
                "template_broken",
                start,
                repaired,
                frozenset({pod.metadata.name}),
                leader_change=lose_leader,
                rendering_broken=True,
            )
        )
        self._patch_template({"spec": {"haproxyConfig": None}})
        end = self.wait_healthy(entry, start)
        windows.append(Window("template_repair", repaired, end, frozenset({pod.metadata.name})))
        return windows

    def ingress_change(self, entry: FaultLog) -> list[Window]:
        """Add or remove a third Ingress: a new plan with a reload on every pod, and a new
        deployment intent (what the intent-order check needs to see move)."""
        start = time.time()
        net = kubernetes.client.NetworkingV1Api(self.system.client)
        if self.gamma:
            net.delete_namespaced_ingress("gamma", stack.NAMESPACE)
        else:
            self.system.apply([stack.ingress("gamma", "z.example", "alpha")])
        self.gamma = not self.gamma
        entry.detail["gamma_present"] = self.gamma
        end = self.wait_healthy(entry, start)
        return [Window(entry.kind, start, end, frozenset())]

    def revert_change(self, entry: FaultLog) -> list[Window]:
        """A -> B -> A: add an Ingress, converge, remove it again. The plan after the revert
        is the first one again; the intent must name it (issue 15, hole 1)."""
        start = time.time()
        net = kubernetes.client.NetworkingV1Api(self.system.client)
        self.system.apply([stack.ingress("revert", "r.example", "beta")])
        mid = self.wait_healthy(entry, start)
        entry.detail["changed_after_s"] = entry.healed_after_s
        net.delete_namespaced_ingress("revert", stack.NAMESPACE)
        end = self.wait_healthy(entry, start)
        return [Window(entry.kind, start, mid, frozenset()), Window(entry.kind, mid, end)]

    def template_gate_refuses(self, entry: FaultLog) -> list[Window]:
        """A template that renders but haproxy -c refuses: the gate refuses it (after the
        dispatch, it is optimistic), the agents refuse it and keep last-known-good; no
        request may fail; then the field is removed."""
        start = time.time()
        self._patch_template({"spec": {"haproxyConfig": {"template": REFUSED_TEMPLATE}}})
        hold_until = time.monotonic() + self.rng.uniform(4, 8)
        reported: float | None = None
        while time.monotonic() < hold_until:
            if reported is None and self._refused_after_dispatch():
                reported = round(time.time() - start, 2)
            time.sleep(0.25)
        entry.detail["refused_after_dispatch_s"] = reported
        self.gate_refusals.append((start, reported))
        repaired = time.time()
        self._patch_template({"spec": {"haproxyConfig": None}})
        end = self.wait_healthy(entry, start)
        return [
            Window("template_refused", start, repaired, frozenset(), rendering_broken=True),
            Window("template_refused_repair", repaired, end, frozenset()),
        ]

    def _refused_after_dispatch(self) -> bool:
        """Some controller's /healthz names an asynchronous refusal: the gate let the render
        go out optimistically, then refused it (controller/term/coordinator.py, on_verdict)."""
        for name in list(self.system.controllers):
            try:
                if "after dispatch" in self.system.health(name, "/healthz", startup=0).text:
                    return True
            except Exception:  # a controller restarting: not this one
                continue
        return False

    def lease_recreate(self, entry: FaultLog) -> list[Window]:
        """Delete the leader Lease: an elector creates it again with its epoch counter back
        at the start, below the retained claim, and the next claim must Reclaim."""
        start = time.time()
        before = self.system.leader_lease()
        entry.detail["epoch_before"] = (before.metadata.annotations or {}).get(EPOCH_ANNOTATION)
        leases = kubernetes.client.CoordinationV1Api(self.system.client)
        leases.delete_namespaced_lease("haptic-leader", stack.NAMESPACE)
        end = self.wait_healthy(entry, start)
        try:
            after = self.system.leader_lease()
            entry.detail["epoch_after"] = (after.metadata.annotations or {}).get(EPOCH_ANNOTATION)
        except kubernetes.client.ApiException:
            pass
        return [Window(entry.kind, start, end, frozenset(), leader_change=True)]

"""The kubelet part of the node: binds pods, runs their containers as process groups, probes
them, writes their status and carries out graceful deletion. One worker thread per pod."""

from __future__ import annotations

import base64
import logging
import os
import shutil
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from config.env import child_environ

from . import podstatus
from .events import EventRecorder
from .ipam import IpamStore, LoopbackBlock
from .kube import Obj, normalized, raw, retry_on_conflict, rv_newer, status_of
from .podenv import EnvError, RefData, container_argv, container_env, referenced_objects
from .probe_logic import ProbeSpec, ProbeState, record, restart_backoff
from .probes import run_handler
from .processes import MARKER_ENV, ContainerProcess
from .volumes import mount_map, translate, volume_dir, volume_files, volume_refs

log = logging.getLogger(__name__)

HOST_IP = "127.0.0.1"
FIELD_MANAGER = "localcluster-node"
# A container that ran this long is healthy again: its crash backoff starts over.
BACKOFF_RESET_AFTER = 10.0
TICK = 0.1
REPO_ROOT = Path(__file__).resolve().parents[2]


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def base_environment(state_dir: Path) -> dict[str, str]:
    """What every container starts from: the node's environment (a local process, not an
    image), with the repo importable and this interpreter's bin dir first on PATH so
    `python -m localcluster.sample_backend` or `python -m agents` work in any pod."""
    env = child_environ()
    env.pop("KUBECONFIG", None)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join(p for p in [str(REPO_ROOT), env.get("PYTHONPATH", "")] if p)
    env["PYTHONUNBUFFERED"] = "1"
    env[MARKER_ENV] = str(state_dir)
    return env


@dataclass
class ContainerRun:
    """Mutable runtime state of one container, owned by its pod worker thread."""

    spec: dict[str, Any]
    init: bool = False
    proc: ContainerProcess | None = None
    restart_count: int = 0
    started_at: str | None = None
    terminated: dict[str, Any] | None = None
    last_state: dict[str, Any] = field(default_factory=dict)
    waiting_reason: str = "ContainerCreating"
    waiting_message: str = ""
    next_start: float = 0.0
    backoff: float = 0.0
    probe_state: ProbeState = field(default_factory=ProbeState)
    probe_stop: threading.Event = field(default_factory=threading.Event)
    # Set once the startupProbe succeeded (at once without one); gates the other probes.
    startup_ok: threading.Event = field(default_factory=threading.Event)
    kill_reason: str = ""  # a failed liveness/startup probe asks the worker to restart it
    kill_deadline: float | None = None
    env: dict[str, str] = field(default_factory=dict)
    ever_started: bool = False
    done: bool = False  # init container finished successfully

    @property
    def name(self) -> str:
        return self.spec["name"]

    @property
    def running(self) -> bool:
        return self.proc is not None

    def started(self) -> bool:
        return self.proc is not None and self.startup_ok.is_set()

    def ready(self) -> bool:
        if not self.started() or self.kill_reason:
            return False
        if "readinessProbe" not in self.spec:
            return True
        return self.probe_state.result


class PodWorker:
    """Drives one pod from scheduled to finalized. All process handling for the pod happens
    on this worker's thread; other threads only hand it newer copies of the pod."""

    def __init__(self, kubelet: Kubelet, pod: Obj) -> None:
        self.kubelet = kubelet
        meta = pod["metadata"]
        self.namespace = meta.get("namespace", "default")
        self.name = meta["name"]
        self.uid = meta["uid"]
        self._pod = pod
        self._gone = False  # the object was removed from the API server
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self.dir = kubelet.state_dir / "pods" / self.namespace / self.name
        self.pod_ip = ""
        self.start_time = ""
        self.init_runs: list[ContainerRun] = []
        self.runs: list[ContainerRun] = []
        self._status_backoff = 0.0
        self._status_not_before = 0.0
        self._thread = threading.Thread(
            target=self._run, name=f"pod-{self.namespace}/{self.name}", daemon=True
        )

    # --- called from other threads -------------------------------------------------------
    def start(self) -> None:
        self._thread.start()

    def update(self, pod: Obj) -> None:
        with self._lock:
            self._pod = pod
        self._wake.set()

    def removed(self, pod: Obj) -> None:
        with self._lock:
            self._pod = pod
            self._gone = True
        self._wake.set()

    def wake(self) -> None:
        self._wake.set()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def alive(self) -> bool:
        return self._thread.is_alive()

    def _event(self, reason: str, message: str, kind: str = "Normal", container: str = "") -> None:
        pod, _ = self._snapshot()
        self.kubelet.events.pod_event(
            pod, reason, message, kind, container or None, now=now_rfc3339()
        )

    # --- worker thread ------------------------------------------------------------------
    def _snapshot(self) -> tuple[Obj, bool]:
        with self._lock:
            return self._pod, self._gone

    def _run(self) -> None:
        try:
            self._setup()
            while True:
                pod, gone = self._snapshot()
                if self.kubelet.stopping.is_set():
                    self._terminate(self.kubelet.stop_grace(pod), pod_aware=False)
                    return
                if gone:
                    self._terminate(_grace_of_removed(pod), pod_aware=False)
                    self._cleanup()
                    return
                if pod["metadata"].get("deletionTimestamp"):
                    self._terminate(_grace_of(pod), pod_aware=True)
                    self._finalize()
                    return
                self._step(pod)
                self._sync_status()
                self._wake.wait(TICK)
                self._wake.clear()
        except Exception:
            log.exception("pod worker %s/%s crashed; killing it", self.namespace, self.name)
            for run in self.init_runs + self.runs:
                self._kill(run)
        finally:
            self.kubelet.worker_done(self)

    def _setup(self) -> None:
        pod, _ = self._snapshot()
        status = pod.get("status") or {}
        if (pod.get("spec") or {}).get("hostNetwork"):
            self.pod_ip = self.kubelet.host_ip  # shares the node's address, as in a cluster
        else:
            self.pod_ip = self.kubelet.ipam.assign(
                self.uid, f"{self.namespace}/{self.name}", wanted=status.get("podIP")
            )
        self.start_time = status.get("startTime") or now_rfc3339()
        uid_file = self.dir / ".uid"
        if self.dir.exists() and (not uid_file.exists() or uid_file.read_text() != self.uid):
            # Same name, new pod: start with a clean directory and fresh logs.
            shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir(parents=True, exist_ok=True)
        uid_file.write_text(self.uid)
        spec = pod.get("spec") or {}
        previous = {
            c.get("name"): c
            for c in (status.get("containerStatuses") or [])
            + (status.get("initContainerStatuses") or [])
        }
        self.init_runs = [ContainerRun(c, init=True) for c in spec.get("initContainers") or []]
        self.runs = [ContainerRun(c) for c in spec.get("containers") or []]
        for run in self.init_runs + self.runs:
            prev = previous.get(run.name)
            if prev:
                # The node restarted under a running pod: its containers count as restarted.
                run.restart_count = int(prev.get("restartCount", 0))
                # The node restarted under a started pod: the next start is a restart.
                run.ever_started = bool(prev.get("started") or prev.get("lastState"))
                if prev.get("state", {}).get("terminated") and run.init:
                    run.done = prev["state"]["terminated"].get("exitCode") == 0
        self._sync_status()

    def _restart_policy(self) -> str:
        pod, _ = self._snapshot()
        return (pod.get("spec") or {}).get("restartPolicy", "Always")

    def _initialized(self) -> bool:
        return all(r.done for r in self.init_runs)

    def _step(self, pod: Obj) -> None:
        now = time.monotonic()
        policy = self._restart_policy()
        for run in self.init_runs + self.runs:
            self._reap(run, policy, now)
        if not self._initialized():
            for run in self.init_runs:
                if run.done:
                    continue
                if not run.running and run.terminated is None and now >= run.next_start:
                    self._start(pod, run)
                break  # init containers run one at a time, in order
            return
        for run in self.runs:
            if run.running:
                if now - run.proc.started > BACKOFF_RESET_AFTER:
                    run.backoff = 0.0
                if run.kill_reason:
                    self._probe_kill(pod, run, now)
                continue
            if run.terminated is not None:
                continue  # finished for good under this restart policy
            if now >= run.next_start:
                self._start(pod, run)

    def _reap(self, run: ContainerRun, policy: str, now: float) -> None:
        if run.proc is None:
            return
        code = run.proc.poll()
        if code is None:
            return
        self._stop_probe(run)
        run.proc = None
        finished = now_rfc3339()
        term = {
            "exitCode": code if code >= 0 else 128 - code,
            "reason": "Completed" if code == 0 else "Error",
            "startedAt": run.started_at,
            "finishedAt": finished,
            "containerID": f"local://{self.uid}/{run.name}",
        }
        if code < 0:
            term["signal"] = -code
        if run.init and code == 0:
            run.done = True
            run.terminated = term
            return
        restart = policy == "Always" or (policy == "OnFailure" and code != 0)
        if run.init and code != 0:
            restart = policy != "Never"
        if restart:
            run.last_state = {"terminated": term}
            run.backoff = restart_backoff(run.backoff)
            run.next_start = now + run.backoff
            run.waiting_reason = "CrashLoopBackOff"
            run.waiting_message = f"back-off {run.backoff:g}s restarting failed container"
            self._event("BackOff", run.waiting_message, "Warning", run.name)
            run.terminated = None
        else:
            run.terminated = term

    def _materialize_volumes(self, pod: Obj, refs: RefData) -> None:
        """Write Secret/ConfigMap/downwardAPI volume files; create emptyDir directories."""
        for vol in (pod.get("spec") or {}).get("volumes") or []:
            if "hostPath" in vol:
                continue
            target = volume_dir(vol, self.dir)
            target.mkdir(parents=True, exist_ok=True)
            files = volume_files(vol, pod, self.pod_ip, self.kubelet.host_ip, refs)
            for rel, content in (files or {}).items():
                path = (target / rel).resolve()
                if not path.is_relative_to(target.resolve()):
                    raise EnvError(f"volume {vol['name']!r}: path {rel!r} leaves the volume")
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(content)

    def _probe_kill(self, pod: Obj, run: ContainerRun, now: float) -> None:
        """A failed liveness or startup probe: SIGTERM, then SIGKILL after the grace period;
        the exit is then handled like a crash (restart policy, backoff)."""
        assert run.proc is not None
        if run.kill_deadline is None:
            probe = run.spec.get("livenessProbe") or run.spec.get("startupProbe") or {}
            grace = probe.get("terminationGracePeriodSeconds")
            if grace is None:
                grace = (pod.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
            run.kill_deadline = now + float(grace)
            self._event(
                "Killing",
                f"Container {run.name} {run.kill_reason}, will be restarted",
                "Normal",
                run.name,
            )
            run.proc.signal(signal.SIGTERM)
        elif now >= run.kill_deadline:
            run.proc.signal(signal.SIGKILL)

    def _start(self, pod: Obj, run: ContainerRun) -> None:
        try:
            refs = self.kubelet.fetch_refs(pod, run.spec)
            self._materialize_volumes(pod, refs)
            mounts = mount_map(pod, run.spec, self.dir)
            spec_env = container_env(pod, run.spec, self.pod_ip, self.kubelet.host_ip, refs)
            env = self.kubelet.base_env | {k: translate(v, mounts) for k, v in spec_env.items()}
            env["LOCALCLUSTER_POD_DIR"] = str(self.dir)
            argv = [translate(a, mounts) for a in container_argv(run.spec, env)]
        except EnvError as exc:
            if run.waiting_message != str(exc):
                self._event("Failed", f"Error: {exc}", "Warning", run.name)
            run.waiting_reason = "CreateContainerConfigError"
            run.waiting_message = str(exc)
            run.next_start = time.monotonic() + 2.0
            return
        cwd = self.dir
        if run.spec.get("workingDir"):
            cwd = Path(run.spec["workingDir"])
            if not cwd.is_absolute():
                cwd = self.dir / cwd
            cwd.mkdir(parents=True, exist_ok=True)
        try:
            run.proc = ContainerProcess(argv, cwd, env, self.dir / f"{run.name}.log")
        except OSError as exc:
            run.waiting_reason = "RunContainerError"
            run.waiting_message = f"cannot start {argv[0]!r}: {exc}"
            run.next_start = time.monotonic() + max(restart_backoff(run.backoff), 1.0)
            run.backoff = restart_backoff(run.backoff)
            return
        run.env = env
        if run.ever_started:
            run.restart_count += 1  # counted when the container starts again, as the kubelet
        run.ever_started = True
        run.started_at = now_rfc3339()
        run.waiting_reason = ""
        self._event("Started", f"Started container {run.name}", container=run.name)
        run.probe_state = ProbeState()
        run.probe_stop = threading.Event()
        run.startup_ok = threading.Event()
        run.kill_reason = ""
        run.kill_deadline = None
        if run.init or "startupProbe" not in run.spec:
            run.startup_ok.set()
        if run.init:
            return
        for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
            if kind in run.spec:
                self._start_probe(run, kind)

    def _start_probe(self, run: ContainerRun, kind: str) -> None:
        """One thread per probe; readiness and liveness wait for the startup probe."""
        stop, startup_ok = run.probe_stop, run.startup_ok
        spec = ProbeSpec.from_dict(run.spec[kind])
        handler = run.spec[kind]

        def on_result(state: ProbeState) -> bool:
            """Apply a result; True when this probe's thread is done."""
            if kind == "readinessProbe":
                before = run.probe_state.result
                run.probe_state = state
                if state.result != before:
                    self._wake.set()
                return False
            failed = state.last is False and state.run >= spec.failure_threshold
            if kind == "startupProbe" and state.result:
                startup_ok.set()
                self._wake.set()
                return True
            if failed:
                run.kill_reason = f"{kind} failed"
                self._wake.set()
                return True
            return False

        def loop() -> None:
            if kind != "startupProbe":
                while not startup_ok.wait(0.2):
                    if stop.is_set():
                        return
            if stop.wait(spec.initial_delay):
                return
            state = ProbeState()
            while not stop.is_set():
                ok = run_handler(handler, run.spec, self.pod_ip, spec.timeout, self.dir, run.env)
                if stop.is_set():
                    return
                state = record(state, spec, ok)
                if on_result(state):
                    return
                if stop.wait(spec.period):
                    return

        threading.Thread(target=loop, name=f"{kind}-{self.name}-{run.name}", daemon=True).start()

    def _stop_probe(self, run: ContainerRun) -> None:
        run.probe_stop.set()
        run.probe_state = ProbeState()

    def _kill(self, run: ContainerRun) -> None:
        self._stop_probe(run)
        if run.proc is not None:
            run.proc.kill()
            run.proc = None

    # --- termination --------------------------------------------------------------------
    def _terminate(self, grace: float, pod_aware: bool) -> None:
        """preStop hooks, SIGTERM, wait out the grace period, SIGKILL what is left.

        With pod_aware, a later delete with a shorter grace period (or the object vanishing)
        shortens the wait, as for the kubelet."""
        started = time.monotonic()
        deadline = started + max(grace, 0.0)
        runs = [r for r in self.init_runs + self.runs if r.running]
        for run in runs:
            self._event("Killing", f"Stopping container {run.name}", container=run.name)
        if grace > 0:
            for run in runs:
                hook = ((run.spec.get("lifecycle") or {}).get("preStop")) or None
                if hook:
                    self._pre_stop(hook, run, deadline)
        for run in runs:
            self._stop_probe(run)
            if run.proc is not None:
                run.proc.signal(signal.SIGKILL if grace <= 0 else signal.SIGTERM)
        while time.monotonic() < deadline and any(
            r.proc is not None and r.proc.group_alive() for r in runs
        ):
            if pod_aware:
                pod, gone = self._snapshot()
                newer = 0.0 if gone else _grace_of(pod)
                deadline = min(deadline, started + newer)
            self._wake.wait(TICK)
            self._wake.clear()
        for run in runs:
            self._kill(run)

    def _pre_stop(self, hook: dict[str, Any], run: ContainerRun, deadline: float) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return
        if "sleep" in hook:
            time.sleep(min(float(hook["sleep"].get("seconds", 0)), remaining))
            return
        run_handler(hook, run.spec, self.pod_ip, remaining, self.dir, run.env)

    def _finalize(self) -> None:
        """Processes are gone: remove the pod object (grace 0, guarded by our uid)."""
        core = self.kubelet.core
        body = {"gracePeriodSeconds": 0, "preconditions": {"uid": self.uid}}
        for _ in range(20):
            try:
                raw(core.delete_namespaced_pod, self.name, self.namespace, body=body)
                break
            except ApiException as exc:
                if exc.status in (404, 409):
                    break  # already gone, or a different pod now has the name
                log.warning("finalizing %s/%s: %s", self.namespace, self.name, exc.status)
            except Exception as exc:
                log.warning("finalizing %s/%s: %s", self.namespace, self.name, exc)
            if self.kubelet.stopping.wait(0.5):
                return
        self._cleanup()

    def _cleanup(self) -> None:
        self.kubelet.ipam.release(self.uid)

    # --- status -------------------------------------------------------------------------
    def _container_status(self, run: ContainerRun, pod: Obj) -> dict[str, Any]:
        state: dict[str, Any]
        if run.proc is not None:
            state = {"running": {"startedAt": run.started_at}}
        elif run.terminated is not None:
            state = {"terminated": run.terminated}
        else:
            waiting: dict[str, Any] = {"reason": run.waiting_reason or "ContainerCreating"}
            if run.waiting_message:
                waiting["message"] = run.waiting_message
            state = {"waiting": waiting}
        entry: dict[str, Any] = {
            "name": run.name,
            "image": run.spec.get("image", ""),
            "imageID": "",
            "ready": run.ready() if not run.init else run.done,
            "restartCount": run.restart_count,
            "started": run.started(),
            "state": state,
            "lastState": run.last_state,
        }
        if run.ever_started:
            entry["containerID"] = f"local://{self.uid}/{run.name}"
        return entry

    def _views(self) -> list[podstatus.ContainerView]:
        policy = self._restart_policy()
        views = []
        for run in self.runs:
            if run.proc is not None:
                state = "running"
            elif run.terminated is not None:
                state = "terminated"
            else:
                state = "waiting"
            views.append(
                podstatus.ContainerView(
                    name=run.name,
                    ready=run.ready(),
                    state=state,
                    exit_code=(run.terminated or {}).get("exitCode"),
                    will_restart=state == "waiting" and run.ever_started and policy != "Never",
                )
            )
        return views

    def _build_status(self, pod: Obj) -> dict[str, Any]:
        """The pod's status with the node's fields replaced; other conditions kept as is."""
        old = dict(pod.get("status") or {})
        initialized = self._initialized()
        views = self._views()
        phase = podstatus.pod_phase(views, self._restart_policy(), initialized)
        if (
            self.init_runs
            and not initialized
            and any(r.terminated and r.terminated.get("exitCode") for r in self.init_runs)
        ):
            phase = "Failed"
        pending_init = [r.name for r in self.init_runs if not r.done]
        init_cond = (
            podstatus.Condition("Initialized", "True")
            if initialized
            else podstatus.Condition(
                "Initialized",
                "False",
                "ContainersNotInitialized",
                f"containers with incomplete status: [{' '.join(pending_init)}]",
            )
        )
        conds = podstatus.compute_conditions(
            views,
            phase,
            init_cond,
            podstatus.readiness_gate_types(pod),
            old.get("conditions") or [],
        )
        new = dict(old)
        new.update(
            {
                "phase": phase,
                "conditions": podstatus.merge_conditions(
                    old.get("conditions") or [], conds.node_conditions(), now_rfc3339()
                ),
                "hostIP": self.kubelet.host_ip,
                "hostIPs": [{"ip": self.kubelet.host_ip}],
                "podIP": self.pod_ip,
                "podIPs": [{"ip": self.pod_ip}],
                "startTime": self.start_time,
                "qosClass": old.get("qosClass", "BestEffort"),
                "containerStatuses": [self._container_status(r, pod) for r in self.runs],
            }
        )
        if self.init_runs:
            new["initContainerStatuses"] = [self._container_status(r, pod) for r in self.init_runs]
        return new

    def _sync_status(self) -> None:
        """Write status only when it differs, as a read-modify-write guarded by
        resourceVersion, so conditions other managers own are never overwritten."""
        pod, _ = self._snapshot()
        if normalized(self._build_status(pod)) == normalized(pod.get("status") or {}):
            return
        if time.monotonic() < self._status_not_before:
            return  # the API server failed us recently; do not hammer it every tick
        core = self.kubelet.core

        def attempt() -> None:
            try:
                fresh = raw(core.read_namespaced_pod, self.name, self.namespace)
            except ApiException as exc:
                if exc.status == 404:
                    return
                raise
            if fresh["metadata"].get("uid") != self.uid:
                return
            if fresh["metadata"].get("deletionTimestamp"):
                self.update(fresh)
            status = self._build_status(fresh)
            if normalized(status) == normalized(fresh.get("status") or {}):
                self.update(fresh)
                return
            fresh["status"] = status
            written = raw(
                core.replace_namespaced_pod_status,
                self.name,
                self.namespace,
                fresh,
                field_manager=FIELD_MANAGER,
            )
            self._merge_newer(written)

        try:
            retry_on_conflict(attempt)
            self._status_backoff = 0.0
        except Exception as exc:
            self._status_backoff = min(max(self._status_backoff * 2, 0.5), 5.0)
            self._status_not_before = time.monotonic() + self._status_backoff
            log.warning("status of %s/%s: %s", self.namespace, self.name, exc)

    def _merge_newer(self, obj: Obj) -> None:
        """Adopt our own write unless the watch already delivered something newer."""
        with self._lock:
            if self._gone:
                return
            current = self._pod["metadata"].get("resourceVersion", "")
            new = obj["metadata"].get("resourceVersion", "")
            if rv_newer(new, current):
                self._pod = obj


def _grace_of(pod: Obj) -> float:
    meta = pod.get("metadata") or {}
    if meta.get("deletionGracePeriodSeconds") is not None:
        return float(meta["deletionGracePeriodSeconds"])
    return float((pod.get("spec") or {}).get("terminationGracePeriodSeconds", 30))


def _grace_of_removed(pod: Obj) -> float:
    """A pod removed outright (grace 0 / forced) gets no grace unless the object says so."""
    meta = pod.get("metadata") or {}
    if meta.get("deletionGracePeriodSeconds") is not None:
        return float(meta["deletionGracePeriodSeconds"])
    return 0.0


class Kubelet:
    """Watches pods, binds unscheduled ones to this node, and keeps one worker per pod."""

    def __init__(
        self,
        api: client.ApiClient,
        node_name: str,
        state_dir: Path,
        stop_deadline: list[float],
        block: LoopbackBlock | None = None,
    ) -> None:
        """stop_deadline is a one-element box the agent fills with the monotonic deadline of
        its stop(), so pods get their grace period only as far as the stop budget allows.
        With `block` (a real cluster) pods get addresses of that block, the node's own is
        its .1, and the scheduler binds pods instead of this kubelet."""
        self.core = client.CoreV1Api(api)
        self.node_name = node_name
        self.state_dir = state_dir
        self.host_ip = block.node_ip if block is not None else HOST_IP
        self.binds = block is None
        self.ipam = IpamStore(state_dir / "node" / "ipam.json", block)
        self.base_env = base_environment(state_dir)
        self.stopping = threading.Event()
        self._stop_deadline = stop_deadline
        self._lock = threading.Lock()
        self._workers: dict[str, PodWorker] = {}  # by uid
        self._binding_supported = True
        self.events = EventRecorder(api, node_name, self.stopping)

    def stop_grace(self, pod: Obj) -> float:
        """On node shutdown a pod gets its grace period, bounded by the stop budget."""
        remaining = self._stop_deadline[0] - time.monotonic() - 1.0
        return max(0.0, min(_grace_of(pod), remaining))

    def handle(self, kind: str, pod: Obj) -> None:
        meta = pod["metadata"]
        uid = meta.get("uid", "")
        node = (pod.get("spec") or {}).get("nodeName")
        with self._lock:
            worker = self._workers.get(uid)
        if kind == "DELETED":
            if worker is not None:
                worker.removed(pod)
            return
        if worker is not None:
            worker.update(pod)
            return
        if self.stopping.is_set():
            return
        if not node:
            if self.binds and not meta.get("deletionTimestamp"):
                threading.Thread(target=self._bind, args=(pod,), daemon=True).start()
            return
        if node != self.node_name:
            return
        phase = (pod.get("status") or {}).get("phase")
        if phase in ("Succeeded", "Failed") and not meta.get("deletionTimestamp"):
            return  # finished pods stay as records; nothing to run
        worker = PodWorker(self, pod)
        with self._lock:
            if uid in self._workers:
                self._workers[uid].update(pod)
                return
            self._workers[uid] = worker
        worker.start()

    def _bind(self, pod: Obj) -> None:
        meta = pod["metadata"]
        name, ns = meta["name"], meta.get("namespace", "default")
        if self._binding_supported:
            body = {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": name, "namespace": ns, "uid": meta.get("uid")},
                "target": {"apiVersion": "v1", "kind": "Node", "name": self.node_name},
            }
            try:
                raw(self.core.create_namespaced_pod_binding, name, ns, body)
                self._scheduled(pod)
                return
            except ApiException as exc:
                if exc.status not in (404, 405):
                    log.warning("binding %s/%s: %s", ns, name, exc.status)
                    return
                self._binding_supported = False
        # Fallback for a server without pods/binding: set spec.nodeName directly.
        patch = {"metadata": {"uid": meta.get("uid")}, "spec": {"nodeName": self.node_name}}
        try:
            raw(
                self.core.patch_namespaced_pod,
                name,
                ns,
                patch,
                _content_type="application/merge-patch+json",
            )
        except ApiException as exc:
            log.warning("scheduling %s/%s: %s", ns, name, exc.status)
            return
        self._scheduled(pod)

    def _scheduled(self, pod: Obj) -> None:
        meta = pod["metadata"]
        self.events.pod_event(
            pod,
            "Scheduled",
            f"Successfully assigned {meta.get('namespace', 'default')}/{meta['name']} "
            f"to {self.node_name}",
            component="default-scheduler",
            now=now_rfc3339(),
        )

    def fetch_refs(self, pod: Obj, container: dict[str, Any]) -> RefData:
        ns = pod["metadata"].get("namespace", "default")
        refs: RefData = {}
        for kind, name in referenced_objects(container) | volume_refs(pod):
            try:
                if kind == "secret":
                    obj = raw(self.core.read_namespaced_secret, name, ns)
                    data = {
                        k: base64.b64decode(v).decode("utf-8", "replace")
                        for k, v in (obj.get("data") or {}).items()
                    }
                    data.update(obj.get("stringData") or {})
                else:
                    obj = raw(self.core.read_namespaced_config_map, name, ns)
                    data = dict(obj.get("data") or {})
            except ApiException as exc:
                if status_of(exc) == 404:
                    continue
                raise EnvError(f"reading {kind} {name!r}: {exc.status}") from exc
            refs[(kind, name)] = data
        return refs

    def release_addresses_except(self, live_uids: set[str]) -> None:
        """Free addresses of pods that vanished while the node was down."""
        for uid in self.ipam.uids() - live_uids:
            self.ipam.release(uid)

    def worker_done(self, worker: PodWorker) -> None:
        with self._lock:
            if self._workers.get(worker.uid) is worker:
                del self._workers[worker.uid]

    def workers(self) -> list[PodWorker]:
        with self._lock:
            return list(self._workers.values())

    def stop(self) -> None:
        self.stopping.set()
        for worker in self.workers():
            worker.wake()

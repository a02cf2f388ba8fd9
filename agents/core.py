"""The agent core: applies manifests to one supervised haproxy and proves what it runs.

Everything here is blocking and runs under one lock, so an apply, a verified read, the
worker monitor and a paced reload never interleave (a verified read must not mistake the
agent's own reload for a foreign worker). The HTTP layer calls it from a thread.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import os
import shutil
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agents.decide import (
    Action,
    Current,
    choose_action,
    expected_servers,
    fence,
    map_problems,
    runtime_commands,
    server_problems,
)
from agents.filetree import (
    DigestCache,
    Journal,
    TreeError,
    check_inside,
    commit,
    flat_name,
    hash_tree,
    stage,
    stage_beside,
    update_store,
    write_atomic,
)
from agents.haproxy_process import (
    BOOTSTRAP_CFG,
    Layout,
    Supervisor,
    process_start_time,
    render_agent_cfg,
)
from agents.haproxy_text import (
    alert_lines,
    parse_map_file,
    parse_servers_state,
    parse_show_info,
    parse_show_map,
)
from agents.manifest import (
    DEFAULT_MAX_FILES,
    DEFAULT_MAX_OPERATIONS,
    ROOT_CONFIG,
    FileEntry,
    Manifest,
    ManifestError,
    MapOp,
    SetServer,
    Token,
    parse_manifest,
    resolve_base,
    sha256_hex,
)
from agents.sockets import HAProxySocketError, RuntimeAPI
from agents.state import DurableState, PlanRecord, load, save
from config.env import child_environ
from contract import PodAction

log = logging.getLogger("agents")


@dataclass
class Settings:
    binary: str
    data_dir: Path
    socket_dir: Path
    pod_ip: str = "127.0.0.1"
    readiness_port: int = 8406
    pod_name: str = ""
    pod_uid: str = ""
    min_reload_interval: float = 1.0
    uptake_timeout: float = 10.0
    durable: bool = False
    max_files: int = DEFAULT_MAX_FILES
    max_operations: int = DEFAULT_MAX_OPERATIONS
    extra_env: dict[str, str] = field(default_factory=dict)


class ReloadFailure(enum.StrEnum):
    """Why a reload did not prove uptake (reported as the apply's `reason`)."""

    REFUSED = "refused"  # haproxy would not load the configuration
    UPTAKE_NOT_PROVEN = "uptake_not_proven"
    SOCKET_ERROR = "socket_error"


@dataclass
class ReloadOutcome:
    ok: bool
    kind: ReloadFailure | None = None
    error: str = ""


def _record(m: Manifest) -> PlanRecord:
    return PlanRecord(
        plan_id=m.plan_id,
        checksum=m.checksum,
        structure_digest=m.structure_digest,
        files={f.path: {"kind": f.kind, "sha256": f.sha256, "size": f.size} for f in m.files},
    )


class Agent:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.layout = Layout(settings.data_dir, settings.socket_dir)
        env = child_environ({**settings.extra_env, "POD_IP": settings.pod_ip})
        self.supervisor = Supervisor(settings.binary, self.layout, env)
        self.runtime = RuntimeAPI(str(self.layout.runtime_sock))
        self.journal = Journal(settings.data_dir / "journal")
        self.state_path = settings.data_dir / "state.json"
        self.lkg_dir = settings.data_dir / "lkg"
        self.staging_root = settings.data_dir / "staging"
        self.runtime_id = uuid.uuid4().hex
        self.digests = DigestCache()  # the apply path's; verify=1 re-hashes every byte
        self.state = DurableState()
        self.worker: dict[str, Any] | None = None
        self.haproxy_version = ""
        self.draining = False
        self.lock = threading.RLock()
        self._last_reload = float("-inf")  # monotonic time of the last reload
        self._pending_due = 0.0  # monotonic due time of the pending reload

    # ---- start and stop -------------------------------------------------------------

    def start(self) -> None:
        """Reconcile disk with the journal and the saved state, then start haproxy."""
        layout = self.layout
        layout.config_root.mkdir(parents=True, exist_ok=True)
        layout.socket_dir.mkdir(parents=True, exist_ok=True)
        if self.staging_root.exists():
            shutil.rmtree(self.staging_root)
        self.haproxy_version = self.supervisor.version()
        saved = load(self.state_path)
        violation = None
        record = self.journal.pending()
        if record is not None:
            if record.get("complete"):
                self.journal.restore(layout.config_root)
                violation = (
                    f"apply of plan {record.get('plan_id')} was interrupted; the files of "
                    f"plan {record.get('previous_plan_id')} were restored from the journal"
                )
            else:
                violation = "an apply was interrupted before its journal was complete"
            self.journal.clear()
        if saved is not None:
            self.state = saved
        state = self.state
        # A new haproxy starts from the disk: nothing pending, the worker runs what is applied.
        state.pending_reload = None
        state.running_plan_id = state.worker_operation_plan_id = None
        state.running_structure_digest = None
        if state.applied is not None:
            problems = self._tree_problems(state.applied)
            if problems:
                violation = violation or (
                    f"files on disk do not match applied plan {state.applied.plan_id} at "
                    f"start: {'; '.join(problems[:5])}"
                )
                state.applied = None
        if violation:
            state.invariant_violation = violation
        if state.applied is None:
            write_atomic(layout.root_cfg, BOOTSTRAP_CFG, self.settings.durable)
        layout.agent_cfg.write_text(
            render_agent_cfg(layout, self.settings.readiness_port), encoding="utf-8"
        )
        self._write_ready_file(state.applied is not None)
        try:
            self.supervisor.start()
        except RuntimeError as exc:
            if state.applied is None:
                raise
            # The applied plan no longer starts (e.g. a new haproxy binary refuses it):
            # serve the bootstrap config and say why rather than exit.
            state.invariant_violation = (
                f"applied plan {state.applied.plan_id} does not start: {alert_lines(str(exc))}"
            )
            state.applied = None
            write_atomic(layout.root_cfg, BOOTSTRAP_CFG, self.settings.durable)
            self._write_ready_file(False)
            self.supervisor.start()
        self._adopt_current_worker()
        if state.applied is not None:
            state.running_plan_id = state.worker_operation_plan_id = state.applied.plan_id
            state.running_structure_digest = state.applied.structure_digest
        self._save()

    def stop(self) -> None:
        self.supervisor.stop()

    def drain(self) -> None:
        """Stop answering ready (readiness endpoint and /readyz) without a reload."""
        with self.lock:
            self.draining = True
            self._write_ready_file(self.state.applied is not None)
            with contextlib.suppress(HAProxySocketError):
                self.runtime.command(f"add map {self.layout.ready_map} draining 1")

    # ---- reports ----------------------------------------------------------------------

    def public_state(self) -> dict[str, Any]:
        s = self.state
        applied = s.applied
        lkg = s.last_known_good
        bootstrap = self.is_bootstrap()
        pending = None
        if s.pending_reload is not None:
            pending = dict(s.pending_reload)
            pending["due_in_s"] = round(max(0.0, self._pending_due - time.monotonic()), 3)
        return {
            "pod_name": self.settings.pod_name,
            "pod_uid": self.settings.pod_uid,
            "runtime_id": self.runtime_id,
            "bootstrap": bootstrap,
            "applied_plan_id": applied.plan_id if applied else None,
            "running_plan_id": s.running_plan_id,
            "worker_operation_plan_id": s.worker_operation_plan_id,
            "worker_operation_mode": self.worker_operation_mode(),
            "last_known_good_plan_id": lkg.plan_id if lkg else None,
            "applied_checksum": applied.checksum if applied else None,
            "applied_token": s.applied_token,
            "files": dict(applied.files) if applied else {},
            "structure_digest": applied.structure_digest if applied else None,
            "running_structure_digest": s.running_structure_digest,
            "haproxy_version": self.haproxy_version,
            "worker": self.worker,
            "pending_reload": pending,
            "last_apply": s.last_apply,
            "invariant_violation": s.invariant_violation,
            "apply_count": s.apply_count,
            "reload_count": s.reload_count,
            "draining": self.draining,
        }

    def worker_operation_mode(self) -> str | None:
        """How the worker came to match its worker-operation plan: "reload" when it was
        started from it, else the runtime path's mode (an older state names none: runtime)."""
        s = self.state
        if s.worker_operation_plan_id is None:
            return None
        if s.worker_operation_plan_id == s.running_plan_id:
            return PodAction.RELOAD
        return s.worker_operation_mode or PodAction.RUNTIME

    def is_bootstrap(self) -> bool:
        """ADR-0033's bootstrap pod: no applied, running, worker-operation or last-known-good
        plan, no applied token, no invariant violation."""
        s = self.state
        return (
            s.applied is None
            and s.running_plan_id is None
            and s.worker_operation_plan_id is None
            and s.last_known_good is None
            and s.applied_token is None
            and s.invariant_violation is None
        )

    def ready(self) -> tuple[bool, str]:
        """Master and worker answer (for /readyz)."""
        if self.draining:
            return False, "draining"
        code = self.supervisor.exit_code()
        if code is not None:
            return False, f"haproxy master exited with code {code}"
        # During an apply the worker may be changing hands: answer from what is known
        # rather than flap on the reload the agent itself is doing.
        if not self.lock.acquire(timeout=1.0):
            return self.worker is not None, "apply in progress"
        try:
            return self._ready_locked()
        finally:
            self.lock.release()

    def _ready_locked(self) -> tuple[bool, str]:
        try:
            info = parse_show_info(self.runtime.command("show info"))
        except HAProxySocketError as exc:
            return False, f"runtime API: {exc}"
        if self.worker is None or info.get("Pid") != str(self.worker["pid"]):
            return False, f"worker answering is {info.get('Pid')}, expected {self.worker}"
        return True, "ok"

    def verify(self) -> dict[str, Any]:
        """Re-hash the files on disk and re-read the worker from haproxy itself."""
        with self.lock:
            self.check_worker()
            problems: list[str] = []
            if self.state.applied is not None:
                problems = self._tree_problems(self.state.applied)
                if problems:
                    self._violate("files changed behind the agent: " + "; ".join(problems[:10]))
            return {
                "files_ok": not problems,
                "file_problems": problems,
                "worker_ok": self.worker is not None,
                "verified_at": time.time(),
            }

    def check_worker(self) -> None:
        """Detect a dead master, a dead worker or a worker the agent did not start."""
        with self.lock:
            code = self.supervisor.exit_code()
            known = self.worker["pid"] if self.worker else None
            if code is not None:
                if known is not None:
                    self._lose_worker(
                        f"worker {known} is gone: haproxy master exited with code {code}"
                        " (the master leaves when its worker is killed or crashes)"
                    )
                return
            info = None
            deadline = time.monotonic() + 2.0
            while info is None:
                try:
                    info = self.supervisor.master.show_proc()
                except HAProxySocketError as exc:
                    # The master re-executes itself on a reload and briefly refuses.
                    if time.monotonic() > deadline:
                        if known is not None:
                            self._lose_worker(f"master CLI does not answer: {exc}")
                        return
                    time.sleep(0.02)
            if known is None:
                return
            if known not in info.workers:
                if info.workers:
                    self._lose_worker(
                        f"worker {known} replaced by {info.workers} outside an agent reload"
                    )
                else:
                    self._lose_worker(f"worker {known} is gone (killed or crashed)")

    def _lose_worker(self, why: str) -> None:
        log.error("invariant violation: %s", why)
        self.worker = None
        self.state.running_plan_id = None
        self.state.worker_operation_plan_id = None
        self.state.running_structure_digest = None
        self._violate(why)

    def _violate(self, why: str) -> None:
        if self.state.invariant_violation is None:
            self.state.invariant_violation = why
        self._save()

    # ---- apply ------------------------------------------------------------------------

    def apply(self, raw: Any) -> tuple[int, dict[str, Any]]:
        """Apply one manifest. Returns (HTTP status, JSON body)."""
        with self.lock:
            started = time.monotonic()
            try:
                manifest = parse_manifest(
                    raw,
                    max_files=self.settings.max_files,
                    max_operations=self.settings.max_operations,
                )
            except ManifestError as exc:
                return 400, {"reason": exc.reason, "detail": exc.detail}
            current = self._current()
            reason = fence(current, manifest)
            if reason is not None:
                return 409, {
                    "reason": reason,
                    "applied_plan_id": current.applied_plan_id,
                    "applied_token": self.state.applied_token,
                }
            decision = choose_action(current, manifest)
            if decision.action is Action.NOOP:
                return 200, self._finish(manifest, PodAction.NOOP, decision.why, started)
            if manifest.based:
                try:
                    manifest = resolve_base(manifest, self._base_files(manifest))
                except ManifestError as exc:
                    status = 409 if exc.reason == "base_unavailable" else 400
                    return status, {"reason": exc.reason, "detail": exc.detail}
            if decision.action is Action.REVERT:
                try:
                    manifest = self._lkg_manifest(manifest)
                except ManifestError as exc:
                    return 409, {"reason": exc.reason, "detail": exc.detail}
            try:
                for entry in manifest.files:
                    check_inside(self.layout.config_root, entry.path)
            except TreeError as exc:
                return 400, {"reason": exc.reason, "detail": exc.detail}
            action = (
                decision.action
                if decision.action in (Action.RUNTIME, Action.FILE_ONLY)
                else Action.RELOAD
            )
            try:
                return self._apply_files(manifest, action, decision.why, started)
            except (OSError, TreeError, HAProxySocketError) as exc:
                log.exception("apply of %s failed", manifest.plan_id)
                self.state.last_apply = self._result(manifest, "error", str(exc), started)
                self._recover_journal(manifest.plan_id)
                self._save()
                return 500, {"reason": "agent_error", "detail": str(exc)}

    def _base_files(self, m: Manifest) -> dict[str, bytes]:
        """The applied plan's bytes of every path `m` takes from it, read from disk and
        proven against the applied record: a file changed behind the agent is no base
        (409 base_unavailable; the sender then sends the whole file)."""
        applied = self.state.applied
        if applied is None or applied.plan_id != m.expected_previous_plan_id:
            raise ManifestError("base_unavailable", "the pod does not run the base plan")
        base: dict[str, bytes] = {}
        for entry in m.based:
            meta = applied.files.get(entry.path)
            if meta is None:
                raise ManifestError("base_unavailable", f"{entry.path} is not in the applied plan")
            try:
                path = check_inside(self.layout.config_root, entry.path)
                content, digest = self.digests.read(entry.path, path)
            except (OSError, TreeError) as exc:
                raise ManifestError("base_unavailable", f"{entry.path}: {exc}") from None
            if digest != meta["sha256"]:
                raise ManifestError("base_unavailable", f"{entry.path} changed on disk")
            base[entry.path] = content
        return base

    def _recover_journal(self, plan_id: str) -> None:
        """After an unexpected error mid-apply: put the journaled files back, or say so."""
        if self.journal.pending() is None:
            return
        try:
            self.journal.restore(self.layout.config_root)
            self.journal.clear()
        except (OSError, TreeError) as exc:
            self._violate(f"apply of {plan_id} failed and its journal could not be restored: {exc}")

    def _current(self) -> Current:
        s = self.state
        token = Token(**s.applied_token) if s.applied_token else None
        return Current(
            applied_plan_id=s.applied.plan_id if s.applied else None,
            applied_checksum=s.applied.checksum if s.applied else None,
            applied_token=token,
            files={
                p: (f["kind"], f["sha256"])
                for p, f in (s.applied.files if s.applied else {}).items()
            },
            running_structure_digest=s.running_structure_digest,
            worker_alive=self.worker is not None,
            pending_reload=s.pending_reload is not None,
            violation=s.invariant_violation is not None,
            bootstrap=self.is_bootstrap(),
        )

    def _apply_files(
        self, m: Manifest, action: Action, why: str, started: float
    ) -> tuple[int, dict[str, Any]]:
        root = self.layout.config_root
        durable = self.settings.durable
        new = m.file_map()
        disk = hash_tree(root, self.digests)
        write = sorted(p for p, f in new.items() if p not in disk or disk[p].sha256 != f.sha256)
        remove = sorted(p for p in disk if p not in new)
        staging = None
        try:
            if action is Action.RELOAD:
                # The whole tree, so `haproxy -c` sees exactly what the reload will load.
                staging = self.staging_root / uuid.uuid4().hex[:12]
                stage(staging, m.files, durable)
                ok, text = self.supervisor.check(staging / ROOT_CONFIG)
                if not ok:
                    return self._refused(m, alert_lines(text), started)
                staged = {p: staging / p for p in write}
            else:
                staged = stage_beside(root, [new[p] for p in write], durable)
            previous = self.state.applied.plan_id if self.state.applied else None
            self.journal.begin(root, m.plan_id, previous, write + remove, durable)
            commit(staged, root, remove)
            for path in write:
                self.digests.wrote(path, root / path, new[path].sha256, new[path].size)
        finally:
            if staging is not None:
                shutil.rmtree(staging, ignore_errors=True)

        if action is not Action.RELOAD:
            problems = self._runtime_apply(m, write)
            if not problems:
                self._runtime_done(m, action)
                self.journal.clear()
                return 200, self._finish(m, PodAction(action), why, started)
            why = "runtime verification failed, reloading: " + "; ".join(problems[:5])
            log.warning("%s", why)
            ok, text = self.supervisor.check(self.layout.root_cfg)
            if not ok:
                self.journal.restore(root)
                self.journal.clear()
                # The worker may hold half of the operations: reload it onto the old files.
                self._reload_and_prove()
                return self._refused(m, alert_lines(text), started)

        if time.monotonic() - self._last_reload < self.settings.min_reload_interval:
            return 200, self._schedule_reload(m, why, started)
        was_ready = self.state.applied is not None
        self._write_ready_file(True)
        outcome = self._reload_and_prove()
        if outcome.ok:
            self._reload_done(m)
            self.journal.clear()
            return 200, self._finish(m, PodAction.RELOAD, why, started)
        self.journal.restore(root)
        self.journal.clear()
        self._write_ready_file(was_ready)
        if self.supervisor.exit_code() is not None:
            self._restart_haproxy()  # back to serving the restored files, if they load
        elif action is not Action.RELOAD and outcome.kind is ReloadFailure.REFUSED:
            self._reload_and_prove()  # drop operations half-applied before the fallback
        if outcome.kind is ReloadFailure.REFUSED:
            return self._refused(m, outcome.error, started)
        self._violate(f"reload for plan {m.plan_id}: {outcome.error}")
        self.state.last_apply = self._result(m, outcome.kind, outcome.error, started)
        self._save()
        return 500, {"reason": outcome.kind, "error": outcome.error}

    def _refused(self, m: Manifest, error: str, started: float) -> tuple[int, dict[str, Any]]:
        self.state.last_apply = self._result(m, "config_refused", error, started)
        self._save()
        return 422, {"reason": "config_refused", "error": error}

    def _runtime_apply(self, m: Manifest, written: list[str]) -> list[str]:
        """Runtime operations on one connection, then read back what they touched."""
        new = m.file_map()
        maps = sorted(
            {op.map for op in m.runtime_operations if isinstance(op, MapOp)}
            | {p for p in written if new[p].kind == "map"}
        )
        try:
            shown = self.runtime.batch([f"show map {p}" for p in maps])
            current = {p: parse_show_map(r) for p, r in zip(maps, shown, strict=True)}
            commands = runtime_commands(
                m.runtime_operations, {p: dict(e) for p, e in current.items()}
            )
            backends = sorted(
                {op.backend for op in m.runtime_operations if isinstance(op, SetServer)}
            )
            readback = [f"show servers state {b}" for b in backends]
            readback += [f"show map {p}" for p in maps]
            answers = self.runtime.batch(commands + readback)
        except HAProxySocketError as exc:
            return [f"runtime API: {exc}"]
        answers = answers[len(commands) :]
        seen_servers: dict = {}
        for answer in answers[: len(backends)]:
            seen_servers.update(parse_servers_state(answer))
        seen_maps = {
            p: parse_show_map(a) for p, a in zip(maps, answers[len(backends) :], strict=True)
        }
        want_maps = {p: parse_map_file(new[p].content) for p in maps if p in new}
        return server_problems(expected_servers(m.runtime_operations), seen_servers) + (
            map_problems(want_maps, seen_maps)
        )

    def _reload_and_prove(self) -> ReloadOutcome:
        """Reload through the master CLI and prove a new worker took the config: the master
        lists a new current worker and the runtime socket is answered by that pid."""
        if self.supervisor.exit_code() is not None:
            return self._restart_haproxy()
        master = self.supervisor.master
        try:
            before = set(master.show_proc().workers)
            ok, startup_log = master.reload()
        except HAProxySocketError as exc:
            return ReloadOutcome(False, ReloadFailure.SOCKET_ERROR, str(exc))
        if not ok:
            return ReloadOutcome(False, ReloadFailure.REFUSED, alert_lines(startup_log))
        self._last_reload = time.monotonic()
        self.state.reload_count += 1
        deadline = time.monotonic() + self.settings.uptake_timeout
        new_pid = None
        while time.monotonic() < deadline:
            try:
                if new_pid is None:
                    fresh = [p for p in master.show_proc().workers if p not in before]
                    new_pid = fresh[-1] if fresh else None
                if new_pid is not None:
                    info = parse_show_info(self.runtime.command("show info"))
                    if info.get("Pid") == str(new_pid):
                        self.worker = {"pid": new_pid, "start_time": process_start_time(new_pid)}
                        return ReloadOutcome(True)
            except HAProxySocketError:
                pass
            time.sleep(0.005)
        self.worker = None
        return ReloadOutcome(
            False,
            ReloadFailure.UPTAKE_NOT_PROVEN,
            f"no new worker answered within {self.settings.uptake_timeout}s (new pid {new_pid})",
        )

    def _restart_haproxy(self) -> ReloadOutcome:
        """The master is gone (it exits when its worker is killed): start a new one from
        the tree on disk. Its first worker is the proof of uptake."""
        try:
            self.supervisor.start()
            self._adopt_current_worker()
        except (RuntimeError, HAProxySocketError) as exc:
            self.worker = None
            return ReloadOutcome(False, ReloadFailure.REFUSED, alert_lines(str(exc)))
        self._last_reload = time.monotonic()
        self.state.reload_count += 1
        return ReloadOutcome(self.worker is not None, ReloadFailure.UPTAKE_NOT_PROVEN, "no worker")

    def _adopt_current_worker(self) -> None:
        info = self.supervisor.master.show_proc()
        pid = info.workers[-1] if info.workers else None
        self.worker = {"pid": pid, "start_time": process_start_time(pid)} if pid else None

    def _runtime_done(self, m: Manifest, mode: str) -> None:
        s = self.state
        s.applied = _record(m)
        s.applied_token = m.token.as_dict()
        s.worker_operation_plan_id = m.plan_id
        s.worker_operation_mode = mode
        self._set_lkg(s.applied)

    def _set_lkg(self, plan: PlanRecord) -> None:
        """The plan the worker was proven to run becomes last-known-good (bytes kept)."""
        old = self.state.last_known_good
        update_store(
            self.layout.config_root,
            self.lkg_dir,
            {p: f["sha256"] for p, f in plan.files.items()},
            {p: f["sha256"] for p, f in old.files.items()} if old else None,
        )
        self.state.last_known_good = plan

    def _reload_done(self, m: Manifest) -> None:
        s = self.state
        s.applied = _record(m)
        s.applied_token = m.token.as_dict()
        s.running_plan_id = s.worker_operation_plan_id = m.plan_id
        s.running_structure_digest = m.structure_digest
        s.pending_reload = None
        s.invariant_violation = None
        self._set_lkg(s.applied)

    def _schedule_reload(self, m: Manifest, why: str, started: float) -> dict[str, Any]:
        """Inside the minimum interval: files are in place and checked, the reload waits."""
        s = self.state
        s.applied = _record(m)
        s.applied_token = m.token.as_dict()
        self._write_ready_file(True)
        self._pending_due = self._last_reload + self.settings.min_reload_interval
        due_at = time.time() + max(0.0, self._pending_due - time.monotonic())
        s.pending_reload = {"plan_id": m.plan_id, "due_at": round(due_at, 3)}
        self.journal.clear()
        return self._finish(m, PodAction.RELOAD_SCHEDULED, why, started)

    def pending_due_in(self) -> float | None:
        if self.state.pending_reload is None:
            return None
        return max(0.0, self._pending_due - time.monotonic())

    def run_pending_reload(self) -> None:
        """The follow-up of a paced apply: reload, and prove the worker took the plan."""
        with self.lock:
            s = self.state
            if s.pending_reload is None or time.monotonic() < self._pending_due:
                return
            applied = s.applied
            assert applied is not None
            outcome = self._reload_and_prove()
            if outcome.ok:
                s.running_plan_id = s.worker_operation_plan_id = applied.plan_id
                s.running_structure_digest = applied.structure_digest
                s.pending_reload = None
                s.invariant_violation = None
                self._set_lkg(applied)
                s.last_apply = dict(
                    s.last_apply or {}, result=PodAction.RELOAD.value, reload_confirmed=True
                )
            else:
                # Put last-known-good back on disk; the old worker never left it.
                s.pending_reload = None
                error = f"scheduled reload of {applied.plan_id} failed: {outcome.error}"
                self._restore_lkg_tree()
                s.last_apply = dict(s.last_apply or {}, result=outcome.kind, error=error)
                if outcome.kind is not ReloadFailure.REFUSED:
                    self._violate(error)
            self._save()

    def _restore_lkg_tree(self) -> None:
        lkg = self.state.last_known_good
        if lkg is None:
            write_atomic(self.layout.root_cfg, BOOTSTRAP_CFG, self.settings.durable)
            self.state.applied = None
            self._write_ready_file(False)
            return
        root = self.layout.config_root
        for entry in hash_tree(root):
            if entry not in lkg.files:
                (root / entry).unlink()
        for rel in sorted(lkg.files, key=lambda p: (p == ROOT_CONFIG, p)):
            target = root / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f".{target.name}.lkg")
            shutil.copy(self.lkg_dir / flat_name(rel), tmp)
            os.replace(tmp, target)
        self.state.applied = lkg

    def _lkg_manifest(self, m: Manifest) -> Manifest:
        lkg = self.state.last_known_good
        if lkg is None:
            raise ManifestError("no_last_known_good", "this pod has no last-known-good plan")
        if m.plan_id != lkg.plan_id:
            raise ManifestError("lkg_mismatch", f"last-known-good is {lkg.plan_id}")
        files = []
        for path, meta in sorted(lkg.files.items()):
            content = (self.lkg_dir / flat_name(path)).read_bytes()
            if sha256_hex(content) != meta["sha256"]:
                raise ManifestError("lkg_corrupt", f"{path} changed in the last-known-good store")
            files.append(FileEntry(path, meta["kind"], meta["sha256"], len(content), content))
        return Manifest(
            plan_id=lkg.plan_id,
            checksum=lkg.checksum,
            structure_digest=lkg.structure_digest,
            token=m.token,
            expected_previous_plan_id=m.expected_previous_plan_id,
            mode="revert_lkg",
            files=tuple(files),
            runtime_operations=(),
        )

    # ---- helpers ----------------------------------------------------------------------

    def _tree_problems(self, plan: PlanRecord) -> list[str]:
        disk = hash_tree(self.layout.config_root)
        problems = []
        for path, meta in sorted(plan.files.items()):
            found = disk.get(path)
            if found is None:
                problems.append(f"{path} missing")
            elif found.sha256 != meta["sha256"] or found.size != meta["size"]:
                problems.append(f"{path} sha256 {found.sha256} size {found.size} != applied")
        problems += [f"{p} not in the applied plan" for p in sorted(set(disk) - set(plan.files))]
        return problems

    def _write_ready_file(self, ready: bool) -> None:
        lines = ("ready 1\n" if ready else "") + ("draining 1\n" if self.draining else "")
        write_atomic(self.layout.ready_map, lines.encode(), durable=False)

    def _result(self, m: Manifest, result: str, detail: str, started: float) -> dict[str, Any]:
        return {
            "plan_id": m.plan_id,
            "mode": m.mode,
            "result": result,
            "detail": detail,
            "token": m.token.as_dict(),
            "at": round(time.time(), 3),
            "duration_ms": round((time.monotonic() - started) * 1000, 3),
        }

    def _finish(self, m: Manifest, result: str, why: str, started: float) -> dict[str, Any]:
        s = self.state
        if result != PodAction.NOOP:
            s.apply_count += 1
        s.last_apply = self._result(m, result, why, started)
        self._save()
        return {"result": result, "plan_id": m.plan_id, "why": why, "state": self.public_state()}

    def _save(self) -> None:
        save(self.state_path, self.state, self.settings.durable)

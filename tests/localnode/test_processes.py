"""Process groups for containers: group signalling and the leftover sweep (real processes)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from devstack.stack import wait_for
from localcluster.node.processes import MARKER_ENV, ContainerProcess, end, run_exec, sweep

from .support import pids_with_env


def test_group_kill_takes_grandchildren(tmp_path: Path) -> None:
    marker = str(tmp_path)
    env = dict(os.environ, **{MARKER_ENV: marker, "TEST_ROLE": "group"})
    proc = ContainerProcess(
        ["sh", "-c", "sleep 300 & sleep 300 & echo up; wait"], tmp_path, env, tmp_path / "c.log"
    )
    try:
        wait_for(lambda: len(pids_with_env(**{MARKER_ENV: marker})) >= 3, what="3 processes")
        assert os.getpgid(proc.pid) == proc.pid  # its own session and group
        assert wait_for(lambda: "up" in (tmp_path / "c.log").read_text(), what="log line")
        proc.kill()
        wait_for(lambda: not pids_with_env(**{MARKER_ENV: marker}), what="group gone")
        assert not proc.group_alive()
    finally:
        sweep(marker)


def test_sigterm_reaches_the_group(tmp_path: Path) -> None:
    marker = str(tmp_path)
    env = dict(os.environ, **{MARKER_ENV: marker})
    proc = ContainerProcess(["sleep", "300"], tmp_path, env, tmp_path / "c.log")
    try:
        proc.signal(signal.SIGTERM)
        assert wait_for(lambda: proc.poll() is not None, what="exit") is not None
        assert proc.poll() == -signal.SIGTERM
    finally:
        sweep(marker)


def test_sweep_kills_marked_processes_only(tmp_path: Path) -> None:
    marker = str(tmp_path / "a")
    other = str(tmp_path / "b")
    mine = ContainerProcess(
        ["sleep", "300"], tmp_path, dict(os.environ, **{MARKER_ENV: marker}), tmp_path / "1.log"
    )
    theirs = ContainerProcess(
        ["sleep", "300"], tmp_path, dict(os.environ, **{MARKER_ENV: other}), tmp_path / "2.log"
    )
    try:
        assert sweep(marker) == [mine.pid]
        wait_for(lambda: mine.poll() is not None, what="swept process exit")
        assert theirs.poll() is None
    finally:
        sweep(other)
        theirs.popen.wait(10)


def test_run_exec_times_out_and_kills(tmp_path: Path) -> None:
    assert run_exec(["true"], tmp_path, dict(os.environ), 5) == 0
    assert run_exec(["sh", "-c", "exit 4"], tmp_path, dict(os.environ), 5) == 4
    env = dict(os.environ, EXEC_TEST=str(tmp_path))
    assert run_exec(["sleep", "30"], tmp_path, env, 0.2) is None
    assert not pids_with_env(EXEC_TEST=str(tmp_path))


def test_main_process_exit_ends_the_whole_container(tmp_path: Path) -> None:
    marker = str(tmp_path)
    env = dict(os.environ, **{MARKER_ENV: marker})
    proc = ContainerProcess(
        ["sh", "-c", "sleep 300 & echo $! > child.pid; exit 7"], tmp_path, env, tmp_path / "c.log"
    )
    try:
        assert wait_for(lambda: proc.poll() is not None, what="main exit") is not None
        assert proc.poll() == 7
        child = int((tmp_path / "child.pid").read_text())
        wait_for(lambda: child not in pids_with_env(**{MARKER_ENV: marker}), what="child killed")
    finally:
        sweep(marker)


def test_no_signal_goes_to_the_id_of_a_reaped_container(tmp_path: Path, monkeypatch) -> None:
    # Once the leader is reaped its id is free: on a busy machine (pid_max 32768 wraps in
    # minutes) the next session leader may get it, and a probe kill or a stop signalling the
    # old id would hit that process (a benchmark's controller got SIGTERM from its node).
    marker = str(tmp_path)
    proc = ContainerProcess(
        ["true"], tmp_path, dict(os.environ, **{MARKER_ENV: marker}), tmp_path / "c.log"
    )
    try:
        assert wait_for(lambda: proc.poll() is not None, what="exit") is not None
        sent: list[tuple[int, int]] = []
        monkeypatch.setattr(os, "killpg", lambda pgid, sig: sent.append((pgid, sig)))
        proc.signal(signal.SIGTERM)
        proc.kill()
        assert sent == []
    finally:
        sweep(marker)


def test_end_stops_a_child_that_obeys_and_kills_one_that_does_not() -> None:
    obeys = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    assert end(obeys, timeout=10) == -signal.SIGTERM
    ignores = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import signal, sys, time\n"
            "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "print('ready', flush=True)\n"
            "time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
    )
    assert ignores.stdout is not None and ignores.stdout.readline() == b"ready\n"
    assert end(ignores, timeout=0.5) == -signal.SIGKILL
    assert end(ignores, timeout=0.5) == -signal.SIGKILL  # an ended child: its status again

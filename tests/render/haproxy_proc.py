"""A real haproxy serving a rendered tree on a loopback POD_IP, for the routing tests."""

from __future__ import annotations

import contextlib
import os
import random
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from controller.rendergate import haproxy_binary


def _listening(address: str, port: int) -> bool:
    try:
        with socket.create_connection((address, port), timeout=1):
            return True
    except OSError:
        return False


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def serving(
    configs: list[Path], ports: tuple[int, ...] = (8080,), stdout: Path | None = None
) -> Iterator[str]:
    """Run `haproxy -db -f ...` with a fresh POD_IP until every port listens; yield the IP.
    `stdout`: a file that receives HAProxy's standard output (its access log).

    Every HAProxy pod has its own loopback address; a random one in 127.100-250.x.y keeps
    clear of other processes on this shared machine, and a clash (haproxy exits at bind)
    is retried with another address.
    """
    last_error = ""
    for _ in range(5):
        pod_ip = f"127.{random.randint(100, 250)}.{random.randint(0, 255)}.{random.randint(2, 250)}"
        if any(_listening(pod_ip, p) for p in ports):
            continue
        args = [haproxy_binary(), "-db"]
        for cfg in configs:
            args += ["-f", str(cfg)]
        out = stdout.open("ab") if stdout else subprocess.DEVNULL
        proc = subprocess.Popen(
            args,
            env=dict(os.environ, POD_IP=pod_ip),
            stdout=out,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 30
            while proc.poll() is None and time.monotonic() < deadline:
                if all(_listening(pod_ip, p) for p in ports):
                    break
                time.sleep(0.05)
            else:
                last_error = proc.stderr.read() if proc.poll() is not None and proc.stderr else ""
                continue
            yield pod_ip
            return
        finally:
            _stop(proc)
            if proc.stderr:
                proc.stderr.close()
            if stdout:
                out.close()
    raise RuntimeError(f"haproxy did not start: {last_error}")

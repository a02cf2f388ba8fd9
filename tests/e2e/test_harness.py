"""The e2e harness's own waits: a controller that runs but does not listen yet must be
waited for, and one that never listens must fail with the connection error, not with a
harness bug (CI once failed `test_retained_configuration_recovery` with
`TypeError: 'bool' object is not callable` from the retry path)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import httpx
import pytest

from devstack import stack
from localcluster.ports import free_port
from tests.e2e.harness import System

# A stand-in controller: sleeps, then serves /healthz on the given port.
LATE_LISTENER = """
import http.server, sys, time
time.sleep(float(sys.argv[2]))
class Ok(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Ok).serve_forever()
"""


def _system_with(proc: stack.Process, port: int) -> System:
    # health() reads only the controllers and their health ports.
    system = System.__new__(System)
    system.controllers = {"c0": proc}
    system.health_ports = {"c0": port}
    return system


def _late_listener(tmp_path: Path, port: int, delay: float) -> stack.Process:
    argv = [sys.executable, "-c", LATE_LISTENER, str(port), str(delay)]
    return stack.Process("late", argv, {}, tmp_path / "late.log").start()


def test_health_waits_for_a_controller_that_listens_late(tmp_path: Path) -> None:
    port = free_port()
    proc = _late_listener(tmp_path, port, delay=1.0)
    try:
        assert _system_with(proc, port).health("c0", startup=30).text == "ok"
    finally:
        proc.stop(grace=5)


def test_health_gives_up_with_the_connection_error(tmp_path: Path) -> None:
    port = free_port()
    proc = _late_listener(tmp_path, port, delay=60.0)
    try:
        started = time.monotonic()
        with pytest.raises(httpx.ConnectError):
            _system_with(proc, port).health("c0", startup=0.5)
        assert time.monotonic() - started < 30
    finally:
        proc.stop(grace=5)

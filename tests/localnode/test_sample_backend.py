"""The sample backend as a real process on a loopback address."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

from devstack.stack import wait_for
from localcluster.ports import free_port

REPO = Path(__file__).resolve().parents[2]


def test_answers_with_pod_name_and_stops_on_sigterm(tmp_path: Path) -> None:
    ip = "127.77.0.5"
    port = free_port(ip)
    env = dict(os.environ, POD_IP=ip, POD_NAME="demo-123", PYTHONPATH=str(REPO))
    proc = subprocess.Popen(
        [sys.executable, "-m", "localcluster.sample_backend", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:

        def get(path: str) -> dict | None:
            try:
                with urllib.request.urlopen(f"http://{ip}:{port}{path}", timeout=2) as resp:
                    return json.loads(resp.read())
            except OSError:
                return None

        body = wait_for(lambda: get("/hello?x=1"), what="backend answer")
        assert body["pod"] == "demo-123"
        assert body["path"] == "/hello?x=1"
        assert body["host"] == f"{ip}:{port}"
        # Bound to the pod IP only: another loopback address is refused.
        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", port)) != 0
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
        assert b"draining for 0s" in proc.stdout.read()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        proc.stdout.close()


def test_drains_after_sigterm(tmp_path: Path) -> None:
    ip = "127.77.0.6"
    port = free_port(ip)
    env = dict(os.environ, POD_IP=ip, POD_NAME="drainer", PYTHONPATH=str(REPO))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "localcluster.sample_backend",
            "--port",
            str(port),
            "--drain-seconds",
            "30",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )

    def health() -> int | None:
        try:
            with urllib.request.urlopen(f"http://{ip}:{port}/healthz", timeout=2) as resp:
                return resp.status
        except urllib.error.HTTPError as exc:
            return exc.code
        except OSError:
            return None

    try:
        assert wait_for(health, what="backend up") == 200
        proc.send_signal(signal.SIGTERM)
        # While draining it still answers requests, but reports not healthy.
        assert wait_for(lambda: health() == 503, what="draining health") is True
        with urllib.request.urlopen(f"http://{ip}:{port}/x", timeout=2) as resp:
            assert json.loads(resp.read())["pod"] == "drainer"
            assert resp.headers["Connection"] == "close"
        assert proc.poll() is None
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

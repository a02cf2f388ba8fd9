"""Real processes for the agent tests: the agent (which runs a real haproxy), tiny HTTP
backends, free loopback addresses and ports, and a config renderer."""

from __future__ import annotations

import hashlib
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx

from agents.client import AgentClient
from agents.manifest import build_manifest
from devstack.stack import wait_for
from localcluster.ports import free_ports

REPO_ROOT = Path(__file__).resolve().parents[2]
TOKEN = "test-token-" + "x" * 24


def free_ip() -> str:
    """A random loopback address, so parallel runs of other engineers do not collide."""
    return f"127.{random.randint(64, 250)}.{random.randint(1, 250)}.{random.randint(2, 250)}"


def port_free_on(ips: Sequence[str]) -> int:
    """One port every loopback address can bind: the pool reaches every agent on one port,
    as the controller reaches POD_IP:8405."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind((ips[0], 0))
            port = probe.getsockname()[1]
        try:
            for ip in ips[1:]:
                with socket.socket() as other:
                    other.bind((ip, port))
        except OSError:
            continue
        return port
    raise RuntimeError("no common free port")


class Backend:
    """A tiny real HTTP backend answering its own name."""

    def __init__(self, name: str, ip: str = "127.0.0.1") -> None:
        body = name.encode()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.name = name
        self.server = ThreadingHTTPServer((ip, 0), Handler)
        self.server.daemon_threads = True
        self.ip, self.port = self.server.server_address[:2]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@dataclass
class Site:
    """What a test renders: backends with one server slot each, plus a host map."""

    frontend_port: int
    servers: dict[str, tuple[str, int]]  # backend -> (address, port)
    hosts: dict[str, str] = field(default_factory=dict)  # host -> backend
    extra_global: str = ""
    notes: dict[str, str] | None = None  # a second map (any printable values) when set

    def config(self) -> bytes:
        lines = [
            "global",
            "    default-path config",
            self.extra_global,
            "defaults",
            "    mode http",
            "    timeout connect 2s",
            "    timeout client 10s",
            "    timeout server 10s",
            "frontend http",
            f'    bind "${{POD_IP}}:{self.frontend_port}"',
            "    use_backend %[req.hdr(host),lower,map(maps/hosts.map,be_none)]",
            (
                "    http-request set-header X-Note %[req.hdr(host),map(maps/notes.map,none)]"
                if self.notes is not None
                else ""
            ),
            "backend be_none",
            "    http-request return status 404 content-type text/plain string nohost",
        ]
        for backend, (address, port) in sorted(self.servers.items()):
            lines += [f"backend {backend}", f"    server s1 {address}:{port} weight 100"]
        return ("\n".join(line for line in lines if line) + "\n").encode()

    def host_map(self) -> bytes:
        return "".join(f"{h} {b}\n" for h, b in sorted(self.hosts.items())).encode()

    def files(self) -> dict[str, tuple[str, bytes]]:
        files = {
            "haproxy.cfg": ("config", self.config()),
            "maps/hosts.map": ("map", self.host_map()),
        }
        if self.notes is not None:
            notes = "".join(f"{k} {v}\n" for k, v in sorted(self.notes.items())).encode()
            files["maps/notes.map"] = ("map", notes)
        return files


def structure_digest(cfg: bytes) -> str:
    """Controller-side digest: server address, port and weight masked."""
    masked = re.sub(rb"(?m)^(\s*server \S+) \S+( weight \d+)?", rb"\1 <masked>", cfg)
    return hashlib.sha256(masked).hexdigest()


def manifest_for(
    site: Site,
    plan_id: str,
    *,
    epoch: int = 1,
    sequence: int = 1,
    previous: str | None = None,
    mode: str = "auto",
    ops: list[dict] | None = None,
) -> dict:
    files = site.files()
    return build_manifest(
        plan_id=plan_id,
        files=files,
        structure_digest=structure_digest(files["haproxy.cfg"][1]),
        token={"holder": "controller-a", "epoch": epoch, "sequence": sequence},
        expected_previous_plan_id=previous,
        mode=mode,
        runtime_operations=ops,
    )


def haproxy_processes_for(marker: str) -> list[int]:
    """Live (non-zombie) processes whose command line mentions `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if marker in cmdline and "haproxy" in cmdline and stat[stat.rindex(")") + 2] != "Z":
            found.append(int(entry.name))
    return found


class AgentProcess:
    """`python -m agents serve` as a real process on its own loopback address."""

    def __init__(
        self,
        data_dir: Path,
        *,
        extra_args: list[str] | None = None,
        fsync: bool = False,
        env: dict[str, str] | None = None,
        entry: list[str] | None = None,
    ) -> None:
        self.env = env or {}
        # The module (and its leading arguments) that runs the agent: `agents`, or a test
        # wrapper around it that injects a fault (tests/agents/crashing_agent.py).
        self.entry = entry or ["agents"]
        self.data_dir = data_dir
        self.ip = free_ip()
        self.port, self.readiness_port, self.frontend_port = free_ports(self.ip, 3)
        data_dir.mkdir(parents=True, exist_ok=True)
        self.token_file = data_dir.parent / f"{data_dir.name}.token"
        self.token_file.write_text(TOKEN + "\n")
        self.extra_args = (extra_args or []) + (["--fsync"] if fsync else [])
        self.proc: subprocess.Popen | None = None
        self.url = f"http://{self.ip}:{self.port}"
        self.client = AgentClient(self.url, TOKEN, timeout=20.0)

    def start(self) -> AgentProcess:
        env = dict(os.environ, POD_NAME="pod-a", POD_UID="uid-a", POD_IP=self.ip, **self.env)
        self.log = open(self.data_dir.parent / f"{self.data_dir.name}.log", "ab")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                *self.entry,
                "serve",
                "--listen",
                f"{self.ip}:{self.port}",
                "--token-file",
                str(self.token_file),
                "--data-dir",
                str(self.data_dir),
                "--readiness-port",
                str(self.readiness_port),
                "--drain-seconds",
                "0.2",
                "--monitor-interval",
                "0.2",
                *self.extra_args,
            ],
            cwd=REPO_ROOT,
            env=env,
            stdout=self.log,
            stderr=self.log,
        )
        wait_for(self._healthy, 30, what="agent /healthz")
        return self

    def _healthy(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise RuntimeError(f"agent exited: {self.log_text()}")
        return httpx.get(f"{self.url}/healthz", timeout=1, verify=False).status_code == 200

    def log_text(self) -> str:
        return (self.data_dir.parent / f"{self.data_dir.name}.log").read_text(errors="replace")

    def readiness(self) -> httpx.Response:
        return httpx.get(f"http://{self.ip}:{self.readiness_port}/healthz", timeout=5)

    def get(self, host: str) -> httpx.Response:
        return httpx.get(
            f"http://{self.ip}:{self.frontend_port}/", headers={"Host": host}, timeout=5
        )

    def stop(self, sig: int = signal.SIGTERM) -> int:
        self.client.close()
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.log.close()
        # No stray haproxy: nothing that loaded this agent's config may outlive it.
        wait_for(
            lambda: not haproxy_processes_for(str(self.data_dir)),
            10,
            what="haproxy processes to exit",
        )
        return self.proc.returncode

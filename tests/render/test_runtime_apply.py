"""runtime_operations applied to a running haproxy through its runtime API change routing
exactly as the new render says, without a reload.

The translation of operations to runtime commands here is the test's own, minimal one (the
agent has the real one); what is under test is that the operations the render side computes
are complete and mean what the new configuration means.
"""

from __future__ import annotations

import dataclasses
import http.client
import socket
import tempfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from controller.render import RenderInput, render, runtime_operations
from controller.rendergate import write_tree
from tests.render import builders as b
from tests.render.haproxy_proc import serving


class _Named(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = self.server.label.encode()  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def _backends_on_one_port(labels: list[str]) -> tuple[list[ThreadingHTTPServer], int]:
    """One HTTP server per label on 127.0.0.(i+1), all on the same port (one slice port)."""
    for _ in range(20):
        servers: list[ThreadingHTTPServer] = []
        try:
            first = ThreadingHTTPServer(("127.0.0.1", 0), _Named)
            servers.append(first)
            port = first.server_address[1]
            for i in range(1, len(labels)):
                servers.append(ThreadingHTTPServer((f"127.0.0.{i + 1}", port), _Named))
        except OSError:
            for s in servers:
                s.server_close()
            continue
        for server, label in zip(servers, labels, strict=True):
            server.label = label  # type: ignore[attr-defined]
            threading.Thread(target=server.serve_forever, daemon=True).start()
        return servers, port
    raise RuntimeError("no free port for the test backends")


def _input(port: int, addresses: list[str], extra_path: bool) -> RenderInput:
    paths = [b.path("/", "app")]
    if extra_path:
        paths.append(b.path("/new", "app", 80, "Exact"))
    return RenderInput(
        b.template_config(),
        ingresses=[b.ingress("default", "app", [("app.example.test", paths)])],
        services=[b.service("default", "app", [(None, 80, port)])],
        endpointslices=[
            b.endpointslice("default", "app", [b.endpoint(a) for a in addresses], [(None, port)])
        ],
    )


def _runtime(sock_path: str, command: str) -> str:
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(10)
        s.connect(sock_path)
        s.sendall(command.encode() + b"\n")
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks).decode()


def _commands(op: dict) -> list[str]:
    if op["op"] == "set_server":
        target = f"{op['backend']}/{op['server']}"
        return [
            f"set server {target} addr {op['address']} port {op['port']}",
            f"set server {target} weight {op['weight']}",
            f"set server {target} state {op['state']}",
        ]
    if op["op"] == "map_set":
        return [
            f"del map {op['map']} {op['key']}",
            f"add map {op['map']} {op['key']} {op['value']}",
        ]
    return [f"del map {op['map']} {op['key']}"]


def _get(address: str, path: str) -> tuple[int, str]:
    conn = http.client.HTTPConnection(address, 8080, timeout=10)
    try:
        conn.request("GET", path, headers={"Host": "app.example.test"})
        resp = conn.getresponse()
        return resp.status, resp.read().decode()
    finally:
        conn.close()


@pytest.fixture
def workdir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="haptic-rt-") as tmp:
        yield Path(tmp)


def test_runtime_operations_change_routing_without_a_reload(workdir: Path) -> None:
    servers, port = _backends_on_one_port(["one", "two"])
    try:
        old = render(_input(port, ["127.0.0.1"], extra_path=False))
        config = workdir / "config"
        write_tree(old, config)
        sock = str(workdir / "rt.sock")
        # The agent adds its own fragment with the runtime socket; this stands in for it.
        (workdir / "agent.cfg").write_text(f"global\n    stats socket {sock} level admin\n")
        with serving([config / "haproxy.cfg", workdir / "agent.cfg"]) as pod_ip:
            assert _get(pod_ip, "/") == (200, "one")
            assert _get(pod_ip, "/new") == (200, "one")  # Prefix "/" covers it for now

            # Endpoint replaced (one -> two) and an Exact route added: runtime-only.
            new = render(
                dataclasses.replace(
                    _input(port, ["127.0.0.2"], extra_path=True), previous_plan=old.plan
                )
            )
            ops = runtime_operations(old.plan, new.plan)
            assert ops is not None and {op["op"] for op in ops} == {"set_server", "map_set"}
            for op in ops:
                for command in _commands(op):
                    _runtime(sock, command)
            # The same process (never reloaded) now routes as the new render says.
            assert _get(pod_ip, "/") == (200, "two")
            assert _get(pod_ip, "/new") == (200, "two")
            shown = _runtime(sock, "show map maps/path-exact.map")
            assert "app.example.test/new default_app_80" in shown
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()

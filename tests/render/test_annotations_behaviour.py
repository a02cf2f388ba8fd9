"""The backend and TLS annotations that test_annotations_routing.py does not exercise do what
docs/annotations.md says: a real haproxy serving a render to real backends (timeouts,
queues, maxconn, health-check timeouts, balance, snippets, unverified server TLS, the SSL
redirect port, HSTS preload, the rate-limit status code).

Timings are short and the bounds wide (a loaded 2-core machine): each test asserts an order
or a bound that the annotation's absence would break, never an exact time.
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from controller.render import RenderInput, render
from controller.rendergate import write_tree
from tests.render import builders as b
from tests.render.haproxy_proc import serving
from tests.render.test_annotations_routing import (
    _annotated,
    _Echo,
    _ing,
    _insecure,
    _request,
    _start,
)

NS = "default"
HOLD = 0.5  # seconds a /hold request stays at the backend


class _Backend(_Echo):
    """_Echo, counting the /hold (HOLD seconds) and /slow (2 s) requests in flight, with a
    health endpoint that can be slow (server.health_delay)."""

    counted = False  # this request is one of the /hold or /slow ones in flight

    def _answer(self) -> None:
        srv = self.server
        if self.path == "/healthz" and srv.health_delay:  # type: ignore[attr-defined]
            time.sleep(srv.health_delay)  # type: ignore[attr-defined]
        if self.path not in ("/hold", "/slow"):
            super()._answer()
            return
        with srv.lock:  # type: ignore[attr-defined]
            srv.inflight += 1  # type: ignore[attr-defined]
            srv.peak = max(srv.peak, srv.inflight)  # type: ignore[attr-defined]
        self.counted = True
        try:
            if self.path == "/hold":
                time.sleep(HOLD)
            super()._answer()  # /slow: 2 s there
        finally:
            self._leave()

    def _send(self, status: int, body: dict) -> None:
        # Leave the count before the answer goes out: once HAProxy has the response it frees
        # the slot and sends the next queued request, which must not find this one counted.
        self._leave()
        super()._send(status, body)

    def _leave(self) -> None:
        if self.counted:
            self.counted = False
            with self.server.lock:  # type: ignore[attr-defined]
                self.server.inflight -= 1  # type: ignore[attr-defined]

    do_GET = _answer
    do_POST = _answer


def _backend(label: str, address: str = "127.0.0.1", port: int = 0, health_delay: float = 0):
    server = ThreadingHTTPServer((address, port), _Backend)
    server.daemon_threads = True
    server.label, server.unhealthy = label, set()  # type: ignore[attr-defined]
    server.health_delay = health_delay  # type: ignore[attr-defined]
    server.lock, server.inflight, server.peak = threading.Lock(), 0, 0  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _backend_pair(slow_health_second: bool = False):
    """Two backends on one port number (127.0.0.1 and 127.0.0.2: one Service port)."""
    for _ in range(20):
        first = _backend("one")
        try:
            second = _backend(
                "two", "127.0.0.2", first.server_address[1], 1.5 if slow_health_second else 0
            )
            return first, second
        except OSError:
            first.shutdown()
            first.server_close()
    raise RuntimeError("no shared port for the pair")


_WS_KEY = b"dGhlIHNhbXBsZSBub25jZQ=="
# RFC 6455 section 1.3: base64(SHA-1(key + the protocol's GUID)).
_WS_ACCEPT = base64.b64encode(
    hashlib.sha1(_WS_KEY + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest()
)


class _Upgrading:
    """Answers any request with 101 Switching Protocols, then keeps the connection open
    without a byte until the peer closes it: an idle WebSocket."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    @staticmethod
    def _one(conn: socket.socket) -> None:
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                data += chunk
            conn.sendall(
                b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                b"Connection: Upgrade\r\nSec-WebSocket-Accept: " + _WS_ACCEPT + b"\r\n\r\n"
            )
            while conn.recv(4096):
                pass

    def close(self) -> None:
        self.sock.close()


def _blackhole() -> tuple[socket.socket, list[socket.socket]]:
    """A listening socket whose accept queue is full: the kernel drops further SYNs, so a
    connect to it hangs until the connecting side gives up (as an unreachable pod does)."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=0)
    filler = socket.create_connection(listener.getsockname(), timeout=2)
    return listener, [filler]


def _svc(name: str, port: int, addresses: list[str], **annotations: str) -> tuple[dict, dict]:
    svc = _annotated(b.service(NS, name, [(None, 80, port)]), **annotations)
    eps = b.endpointslice(NS, name, [b.endpoint(a) for a in addresses], [(None, port)])
    return svc, eps


def _tls_ing(name: str, service: str, **annotations: str) -> dict:
    host = f"{name}.test"
    obj = b.ingress(NS, name, [(host, [b.path("/", service)])], tls=[("site-tls", [host])])
    return _annotated(obj, **annotations)


def _input(s: dict) -> RenderInput:
    hole_port = s["hole"].getsockname()[1]
    hold_port = s["hold"].server_address[1]
    echo_port = s["echo"].server_address[1]
    tls_port = s["tls"].server_address[1]
    pairs = [
        _svc("blackhole", hole_port, ["127.0.0.1"], timeout_connect="300ms", check="false"),
        _svc("queued", hold_port, ["127.0.0.1"], maxconn="1", timeout_queue="500ms"),
        _svc("limited", hold_port, ["127.0.0.1"], maxconn="2"),
        _svc("slowreq", echo_port, ["127.0.0.1"], timeout_http_request="1s"),
        _svc("ws", s["ws"].port, ["127.0.0.1"], timeout_tunnel="1s", timeout_server="30s"),
        _svc(
            "slowcheck",
            s["health"][0].server_address[1],
            ["127.0.0.1", "127.0.0.2"],
            check_http="/healthz",
            check_interval="200ms",
            timeout_check="300ms",
        ),
        _svc("lb", s["lb"][0].server_address[1], ["127.0.0.1", "127.0.0.2"]),
        _svc("echo", echo_port, ["127.0.0.1"]),
        _svc("tlsnoca", tls_port, ["127.0.0.1"], server_ssl="true"),
    ]
    ingresses = [
        _ing("connect", "blackhole"),
        _ing("queue", "queued"),
        _ing("maxconn", "limited"),
        _ing("slowreq", "slowreq"),
        _ing("ws", "ws"),
        _ing("check", "slowcheck"),
        _ing("first", "lb", load_balance="first"),
        _ing("rr", "lb"),
        _ing("limit503", "echo", rate_limit_requests="2", rate_limit_status_code="503"),
        _ing("snippet", "echo", backend_config_snippet="http-response set-header X-Snippet yes"),
        _ing("tlsnoca", "tlsnoca"),
        _tls_ing("redirport", "echo", ssl_redirect="true", ssl_redirect_port="8443"),
        _tls_ing("preload", "echo", hsts_max_age="600", hsts_preload="true"),
    ]
    config = b.template_config()
    config["spec"]["templateLibraries"]["ingress"].update(
        {"debugHeaders": True, "allowSnippets": True}
    )
    return RenderInput(
        config,
        ingresses=ingresses,
        services=[svc for svc, _ in pairs],
        endpointslices=[eps for _, eps in pairs],
        secrets=[b.tls_secret(NS, "site-tls")],
    )


@pytest.fixture(scope="module")
def rendered() -> Iterator[tuple[str, str, ThreadingHTTPServer]]:
    """(pod IP, haproxy.cfg text, the /hold backend)."""
    hole, fillers = _blackhole()
    servers = {
        "hold": _backend("hold"),
        "echo": _backend("echo"),
        "tls": _start("tls", tls=True),
        "health": _backend_pair(slow_health_second=True),
        "lb": _backend_pair(),
    }
    upgrading = _Upgrading()
    http_servers = [servers["hold"], servers["echo"], servers["tls"], *servers["health"]]
    http_servers += servers["lb"]
    try:
        with tempfile.TemporaryDirectory(prefix="haptic-behaviour-") as tmp:
            out = render(_input({**servers, "hole": hole, "ws": upgrading}))
            assert out.warnings == (), [str(w) for w in out.warnings]
            write_tree(out, Path(tmp) / "tree")
            cfg = (Path(tmp) / "tree" / "haproxy.cfg").read_text()
            with serving([Path(tmp) / "tree" / "haproxy.cfg"], ports=(8080, 8443)) as pod_ip:
                yield pod_ip, cfg, servers["hold"]
    finally:
        for server in http_servers:
            server.shutdown()
            server.server_close()
        upgrading.close()
        for sock in [hole, *fillers]:
            sock.close()


@pytest.fixture
def pod(rendered: tuple) -> str:
    return rendered[0]


def _backend_block(cfg: str, name: str) -> str:
    start = cfg.index(f"\nbackend {name}\n")
    end = cfg.find("\nbackend ", start + 1)
    return cfg[start : end if end != -1 else len(cfg)]


def _timed(pod_ip: str, host: str, path: str = "/") -> tuple[int, float]:
    started = time.monotonic()
    status = _request(pod_ip, host, path)[0]
    return status, time.monotonic() - started


def test_timeout_connect_gives_503_after_the_connect_timeout(rendered: tuple) -> None:
    pod_ip, cfg, _ = rendered
    assert "timeout connect 300ms" in _backend_block(cfg, "default_blackhole_80")
    status, took = _timed(pod_ip, "connect.test")
    # 300 ms per attempt, 1 + 3 retries: about 1.2 s; the default 5s would take 20 s.
    assert status == 503
    assert 0.3 <= took < 4.5, took


def test_timeout_queue_with_maxconn_answers_503_to_who_waits_too_long(rendered: tuple) -> None:
    pod_ip, _, hold = rendered
    with ThreadPoolExecutor(1) as pool:
        holder = pool.submit(_timed, pod_ip, "queue.test", "/slow")  # 2 s at the only slot
        deadline = time.monotonic() + 10
        while hold.inflight < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert hold.inflight == 1
        status, took = _timed(pod_ip, "queue.test", "/")
        held_status, held = holder.result()
    assert held_status == 200
    assert status == 503  # waited its 500 ms in the queue, not until the slot was free
    assert took < held, (took, held)


def test_maxconn_bounds_the_concurrency_at_the_server(rendered: tuple) -> None:
    pod_ip, _, hold = rendered
    hold.peak = 0
    started = time.monotonic()
    with ThreadPoolExecutor(6) as pool:
        statuses = list(pool.map(lambda _: _request(pod_ip, "maxconn.test", "/hold")[0], range(6)))
    took = time.monotonic() - started
    assert statuses == [200] * 6
    assert 1 <= hold.peak <= 2, hold.peak
    assert took >= 3 * HOLD * 0.9, took  # six requests, two at a time


def test_timeout_http_request_answers_408_to_a_slow_request_body(rendered: tuple) -> None:
    # The backend is known once the headers are in, so a backend's http-request timeout
    # bounds the wait for the body (docs/annotations.md); a client that stops sending gets 408.
    pod_ip, cfg, _ = rendered
    block = _backend_block(cfg, "default_slowreq_80")
    assert "timeout http-request 1s\n    option http-buffer-request\n" in block
    with socket.create_connection((pod_ip, 8080), timeout=15) as sock:
        sock.sendall(
            b"POST / HTTP/1.1\r\nHost: slowreq.test\r\nContent-Length: 100\r\n\r\nonly-a-part"
        )
        started = time.monotonic()
        reply = sock.recv(4096)
        took = time.monotonic() - started
    assert reply.startswith(b"HTTP/1.1 408"), reply[:80]
    assert took < 8, took  # the frontend's default is 10 s


def test_timeout_tunnel_closes_an_idle_upgraded_connection(pod: str) -> None:
    with socket.create_connection((pod, 8080), timeout=15) as sock:
        sock.sendall(
            b"GET /ws HTTP/1.1\r\nHost: ws.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
            b"Sec-WebSocket-Key: " + _WS_KEY + b"\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        head = sock.recv(4096)
        assert head.startswith(b"HTTP/1.1 101"), head[:80]
        started = time.monotonic()
        rest = sock.recv(4096)  # b"" once HAProxy closes the tunnel
        took = time.monotonic() - started
    assert rest == b""
    assert 0.5 <= took < 8, took  # 1 s tunnel timeout; timeout-server is 30 s


def test_timeout_check_takes_a_slow_health_endpoint_out_of_rotation(pod: str) -> None:
    # Server two answers /healthz after 1.5 s: healthy for the default 2 s check timeout,
    # too slow for the 300 ms of timeout-check.
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        labels = [json.loads(_request(pod, "check.test")[2])["label"] for _ in range(6)]
        if labels == ["one"] * 6:
            break
        time.sleep(0.3)
    assert labels == ["one"] * 6


def test_rate_limit_status_code_replaces_429(rendered: tuple) -> None:
    pod_ip, cfg, _ = rendered
    assert "deny_status 503 if { sc_http_req_rate(0) gt 2 }" in _backend_block(
        cfg, "default_echo_80.limit503"
    )
    statuses = [_request(pod_ip, "limit503.test")[0] for _ in range(4)]
    assert statuses == [200, 200, 503, 503]


def test_load_balance_first_sends_everything_to_the_first_server(pod: str) -> None:
    spread = {_request(pod, "rr.test")[1]["x-haptic-server"] for _ in range(4)}
    assert spread == {"SRV_1", "SRV_2"}  # round robin without the annotation
    first = {_request(pod, "first.test")[1]["x-haptic-server"] for _ in range(6)}
    assert first == {"SRV_1"}


def test_backend_config_snippet_reaches_the_client(pod: str) -> None:
    status, headers, _ = _request(pod, "snippet.test")
    assert status == 200 and headers["x-snippet"] == "yes"
    assert "x-snippet" not in _request(pod, "limit503.test")[1]


def test_server_ssl_without_a_ca_reaches_a_self_signed_backend(rendered: tuple) -> None:
    pod_ip, cfg, _ = rendered
    assert "ssl verify none" in _backend_block(cfg, "default_tlsnoca_80")
    status, _, body = _request(pod_ip, "tlsnoca.test")
    assert status == 200 and json.loads(body)["label"] == "tls"


def test_ssl_redirect_port_is_in_the_location(pod: str) -> None:
    status, headers, _ = _request(pod, "redirport.test", "/x?y=1")
    assert status == 302
    assert headers["location"] == "https://redirport.test:8443/x?y=1"
    status, headers, _ = _request(pod, "redirport.test:8080", "/")
    assert headers["location"] == "https://redirport.test:8443/"  # the HTTP port is dropped


def test_hsts_preload_is_in_the_header(pod: str) -> None:
    conn = http.client.HTTPSConnection(pod, 8443, timeout=10, context=_insecure())
    try:
        conn.request("GET", "/", headers={"Host": "preload.test"})
        resp = conn.getresponse()
        resp.read()
    finally:
        conn.close()
    assert resp.status == 200
    assert resp.getheader("strict-transport-security") == "max-age=600; preload"

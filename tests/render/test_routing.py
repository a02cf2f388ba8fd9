"""The rendered routing really routes: a real haproxy serving a render, real HTTP backends.

Checks the ingress library's semantics that haproxy -c cannot: host and path precedence,
element-wise prefixes, wildcard hosts, host-less rules, the default backend, disabled slots.
"""

from __future__ import annotations

import http.client
import ssl
import tempfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from controller.render import RenderInput, render
from controller.rendergate import write_tree
from tests.render import builders as b
from tests.render.haproxy_proc import serving

SERVICES = ["front", "api", "health", "wild", "docs", "fallback", "down", "flaky"]
# An enabled endpoint nothing listens on (an endpoint going away before the update lands).
DEAD_ADDRESS = "127.0.0.9"


class _Named(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = self.server.label.encode()  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def _start_backend(label: str) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Named)
    server.label = label  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _routing_input(ports: dict[str, int]) -> RenderInput:
    ingresses = [
        b.ingress(
            "default",
            "site",
            [
                (
                    "a.example.test",
                    [
                        b.path("/", "front"),
                        b.path("/api/", "api"),
                        b.path("/api/health", "health", 80, "Exact"),
                        b.path("/down", "down"),
                        b.path("/flaky", "flaky"),
                    ],
                ),
                ("*.wild.example.test", [b.path("/", "wild")]),
            ],
            tls=[("site-tls", ["a.example.test"])],
        ),
        b.ingress("default", "docs", [(None, [b.path("/docs", "docs")])], default=("fallback", 80)),
    ]
    services = [b.service("default", name, [(None, 80, ports[name])]) for name in SERVICES]

    def endpoints(name: str) -> list[dict]:
        live = [b.endpoint("127.0.0.1", ready=name != "down")]
        return [*live, b.endpoint(DEAD_ADDRESS)] if name == "flaky" else live

    slices = [
        b.endpointslice("default", name, endpoints(name), [(None, ports[name])])
        for name in SERVICES
    ]
    return RenderInput(
        b.template_config(),
        ingresses=ingresses,
        services=services,
        endpointslices=slices,
        secrets=[b.tls_secret("default", "site-tls")],
    )


@pytest.fixture(scope="module")
def routed() -> Iterator[str]:
    backends = {name: _start_backend(name) for name in SERVICES}
    ports = {name: s.server_address[1] for name, s in backends.items()}
    try:
        out = render(_routing_input(ports))
        assert out.warnings == ()
        with tempfile.TemporaryDirectory(prefix="haptic-route-") as tmp:
            write_tree(out, Path(tmp))
            with serving([Path(tmp) / "haproxy.cfg"], ports=(8080, 8443)) as pod_ip:
                yield pod_ip
    finally:
        for server in backends.values():
            server.shutdown()
            server.server_close()


def _get(pod_ip: str, host: str, path: str) -> tuple[int, str]:
    conn = http.client.HTTPConnection(pod_ip, 8080, timeout=10)
    try:
        conn.request("GET", path, headers={"Host": host})
        resp = conn.getresponse()
        return resp.status, resp.read().decode()
    finally:
        conn.close()


@pytest.mark.parametrize(
    ("host", "path", "expected"),
    [
        ("a.example.test", "/", "front"),
        ("a.example.test", "/anything/else", "front"),
        ("a.example.test", "/api", "api"),  # Prefix "/api/" matches "/api" (element-wise)
        ("a.example.test", "/api/v1/users", "api"),
        ("a.example.test", "/apix", "front"),  # ...but not "/apix"
        ("a.example.test", "/api/health", "health"),  # Exact beats the shorter Prefix
        ("a.example.test", "/api/health/deep", "api"),  # Exact is exact
        ("A.Example.Test:8080", "/api", "api"),  # Host is case-insensitive, port ignored
        ("one.wild.example.test", "/x", "wild"),
        ("two.one.wild.example.test", "/docs", "docs"),  # wildcard covers one label only
        ("unknown.test", "/docs/intro", "docs"),  # host-less rule
        ("unknown.test", "/nothing", "fallback"),  # Ingress defaultBackend
        ("a.example.test", "/docs", "front"),  # a host's own rules win over host-less ones
    ],
)
def test_requests_reach_the_backend_the_ingress_names(
    routed: str, host: str, path: str, expected: str
) -> None:
    assert _get(routed, host, path) == (200, expected)


def test_a_refused_connection_is_retried_on_another_server(routed: str) -> None:
    # Round robin sends every other request to the dead endpoint; redispatch saves them all.
    assert [_get(routed, "a.example.test", "/flaky") for _ in range(8)] == [(200, "flaky")] * 8


def test_a_backend_with_only_disabled_servers_answers_503(routed: str) -> None:
    status, _ = _get(routed, "a.example.test", "/down")
    assert status == 503


class _SNIConnection(http.client.HTTPSConnection):
    """HTTPS to an IP address with a chosen SNI name (the pod IP is not the host name)."""

    def __init__(self, address: str, port: int, sni: str) -> None:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE  # self-signed test certificate
        super().__init__(address, port, timeout=10, context=ctx)
        self._sni = sni

    def connect(self) -> None:
        http.client.HTTPConnection.connect(self)
        self.sock = self._context.wrap_socket(self.sock, server_hostname=self._sni)


def test_https_serves_the_secret_certificate_and_routes_the_same(routed: str) -> None:
    conn = _SNIConnection(routed, 8443, "a.example.test")
    try:
        conn.request("GET", "/api/v1", headers={"Host": "a.example.test"})
        resp = conn.getresponse()
        assert (resp.status, resp.read().decode()) == (200, "api")
        presented = conn.sock.getpeercert(binary_form=True)
    finally:
        conn.close()
    expected = ssl.PEM_cert_to_DER_cert((b.FIXTURES / "tls.crt").read_text())
    assert presented == expected

"""The haproxy.org/* annotations and the ingress library's TLS and backend features do what
docs/annotations.md says: a real haproxy serving a render, real HTTP(S) backends.
"""

from __future__ import annotations

import base64
import http.client
import json
import socket
import ssl
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from controller.render import RenderInput, render
from controller.rendergate import write_tree
from tests.render import builders as b
from tests.render.haproxy_proc import serving

NS = "default"
PASSWORD = "s3cret"


class _Echo(BaseHTTPRequestHandler):
    """Answers with what it received: its label, the path, the headers."""

    protocol_version = "HTTP/1.1"

    def _answer(self) -> None:
        label = self.server.label  # type: ignore[attr-defined]
        if self.path == "/healthz":
            status = 500 if label in self.server.unhealthy else 200  # type: ignore[attr-defined]
            self._send(status, {"label": label})
            return
        if self.path.startswith("/slow"):
            time.sleep(2)
        self._send(200, {"label": label, "path": self.path, "headers": dict(self.headers)})

    def _send(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = _answer
    do_OPTIONS = _answer

    def log_message(self, *args: object) -> None:
        pass


def _start(label: str, address: str = "127.0.0.1", port: int = 0, tls: bool = False):
    server = ThreadingHTTPServer((address, port), _Echo)
    server.label = label  # type: ignore[attr-defined]
    server.unhealthy = {"sick"}  # type: ignore[attr-defined]
    if tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(b.FIXTURES / "tls.crt", b.FIXTURES / "tls.key")
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _pair() -> tuple[ThreadingHTTPServer, ThreadingHTTPServer]:
    """Two backends on one port number, on 127.0.0.1 and 127.0.0.2 (one Service port)."""
    for _ in range(20):
        first = _start("one")
        try:
            return first, _start("two", "127.0.0.2", first.server_address[1])
        except OSError:
            first.shutdown()
            first.server_close()
    raise RuntimeError("no shared port for the pair")


def _annotated(obj: dict, **annotations: str) -> dict:
    obj["metadata"]["annotations"] = {
        f"haproxy.org/{k.replace('_', '-')}": v for k, v in annotations.items()
    }
    return obj


HI = "haproxy-ingress.github.io/"


def _with(obj: dict, annotations: dict[str, str]) -> dict:
    obj["metadata"]["annotations"] = annotations
    return obj


def _ing(name: str, service: str, path: str = "/", **annotations: str) -> dict:
    rules = [(f"{name}.test", [b.path(path, service)])]
    return _annotated(b.ingress(NS, name, rules), **annotations)


def _crypt(password: str) -> str:
    out = subprocess.run(
        ["openssl", "passwd", "-6", password], capture_output=True, text=True, check=True
    )
    return out.stdout.strip()


def _default_cert(tmp: Path) -> dict:
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
         "-subj", "/CN=default.haptic", "-keyout", str(tmp / "d.key"), "-out", str(tmp / "d.crt")],
        capture_output=True, check=True,
    )  # fmt: skip
    secret = b.tls_secret(NS, "default-cert")
    secret["data"] = {
        "tls.crt": base64.b64encode((tmp / "d.crt").read_bytes()).decode(),
        "tls.key": base64.b64encode((tmp / "d.key").read_bytes()).decode(),
    }
    return secret


def _input(ports: dict[str, int], tmp: Path) -> RenderInput:
    ingresses = [
        _ing("rewrite", "echo", "/api", path_rewrite="/api/?(.*) /\\1"),
        _ing(
            "redirect",
            "echo",
            request_redirect="https://elsewhere.test",
            request_redirect_code="301",
        ),
        _ing(
            "headers",
            "echo",
            request_set_header="X-Tenant blue\nX-Client %[src]",
            response_set_header="X-Frame-Options DENY",
            set_host="internal.svc",
        ),
        _ing("timeout", "slowsvc"),
        _ing("ratelimit", "echo", rate_limit_requests="3", rate_limit_period="10s"),
        _ing("allowed", "echo", allow_list="127.0.0.0/8, 10.0.0.0/8"),
        _ing("notallowed", "echo", allow_list="10.0.0.0/8"),
        _ing("denied", "echo", deny_list="127.0.0.0/8"),
        _ing("auth", "echo", auth_type="basic-auth", auth_secret="users", auth_realm="Team only"),
        _ing(
            "cors",
            "echo",
            cors_enable="true",
            cors_allow_origin="https://app.test",
            cors_allow_methods="GET, POST",
            cors_allow_headers="X-Custom",
            cors_allow_credentials="true",
            cors_max_age="10m",
        ),
        _ing("sticky", "pair", cookie_persistence="HAPTICSRV"),
        _ing("roundrobin", "pair"),
        _ing("health", "mixed", check_http="/healthz", check_interval="200ms"),
        _ing("secure-backend", "tlsbackend"),
        _ing("passthrough", "tlsdirect", ssl_passthrough="true"),
        _annotated(
            b.ingress(
                NS,
                "https-only",
                [("https-only.test", [b.path("/", "echo")])],
                tls=[("site-tls", ["https-only.test"])],
            ),
            ssl_redirect="true",
            ssl_redirect_code="308",
            hsts_max_age="31536000",
            hsts_include_subdomains="true",
        ),
        _with(
            b.ingress(
                NS,
                "regex",
                [
                    (
                        "regex.test",
                        [
                            b.path("/api/v[0-9]+/", "echo", 80, "ImplementationSpecific"),
                            b.path("^/static/.*\\.png$", "echo", 80, "ImplementationSpecific"),
                            b.path("/", "pair", "web"),
                        ],
                    )
                ],
            ),
            {"haproxy.org/path-type": "regex"},
        ),
        _with(
            b.ingress(
                NS,
                "begin",
                [
                    (
                        "begin.test",
                        [
                            b.path("/doc", "echo", 80, "ImplementationSpecific"),
                        ],
                    )
                ],
            ),
            {"haproxy-ingress.github.io/path-type": "begin"},
        ),
        _with(_ing("hi-allow", "echo"), {HI + "allowlist-source-range": "10.0.0.0/8"}),
        _with(_ing("hi-auth", "echo"), {HI + "auth-secret": "users", HI + "auth-realm": "HI"}),
        _with(_ing("hi-limit", "echo"), {HI + "limit-rps": "2"}),
        b.ingress(
            NS,
            "paths",
            [
                (
                    "paths.test",
                    [
                        b.path("/prefix/", "echo"),
                        b.path("/exact/", "pair", 80, "Exact"),
                    ],
                )
            ],
            default=("slowsvc", 80),
        ),
    ]
    services = [
        b.service(NS, "echo", [(None, 80, ports["echo"])]),
        b.service(NS, "pair", [("web", 80, ports["pair"])]),
        b.service(NS, "mixed", [(None, 80, ports["mixed"])]),
        b.service(NS, "tlsbackend", [(None, 443, ports["tlsbackend"])]),
        b.service(NS, "tlsdirect", [(None, 80, ports["tlsbackend"])]),
        _annotated(b.service(NS, "slowsvc", [(None, 80, ports["echo"])]), timeout_server="1s"),
    ]
    services[3]["metadata"]["annotations"] = {
        "haproxy.org/server-ssl": "true",
        "haproxy.org/server-ca": "backend-ca",
    }
    services[3]["spec"]["ports"][0]["port"] = 80

    def ep(addresses: list[str], port: int) -> list[dict]:
        return [b.endpoint(a) for a in addresses], [(None, port)]

    slices = [
        b.endpointslice(NS, "echo", *ep(["127.0.0.1"], ports["echo"])),
        b.endpointslice(NS, "slowsvc", *ep(["127.0.0.1"], ports["echo"])),
        b.endpointslice(NS, "pair", [b.endpoint("127.0.0.1"), b.endpoint("127.0.0.2")],
                        [("web", ports["pair"])]),
        b.endpointslice(NS, "mixed", [b.endpoint("127.0.0.1"), b.endpoint("127.0.0.2")],
                        [(None, ports["mixed"])]),
        b.endpointslice(NS, "tlsbackend", *ep(["127.0.0.1"], ports["tlsbackend"])),
        b.endpointslice(NS, "tlsdirect", *ep(["127.0.0.1"], ports["tlsbackend"])),
    ]  # fmt: skip
    users = {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {"namespace": NS, "name": "users"},
        "data": {"alice": base64.b64encode(_crypt(PASSWORD).encode()).decode()},
    }
    ca = {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {"namespace": NS, "name": "backend-ca"},
        "data": {"ca.crt": base64.b64encode((b.FIXTURES / "tls.crt").read_bytes()).decode()},
    }
    config = b.template_config()
    config["spec"]["templateLibraries"]["ingress"].update(
        {"defaultCertificate": f"{NS}/default-cert", "debugHeaders": True}
    )
    return RenderInput(
        config,
        ingresses=ingresses,
        services=services,
        endpointslices=slices,
        secrets=[b.tls_secret(NS, "site-tls"), users, ca, _default_cert(tmp)],
    )


@pytest.fixture(scope="module")
def pod() -> Iterator[str]:
    servers = {"echo": _start("echo"), "tlsbackend": _start("tls", tls=True)}
    one, two = _pair()
    mixed_ok, mixed_sick = _pair()
    mixed_ok.label, mixed_sick.label = "healthy", "sick"  # type: ignore[attr-defined]
    ports = {name: s.server_address[1] for name, s in servers.items()}
    ports["pair"], ports["mixed"] = one.server_address[1], mixed_ok.server_address[1]
    everything = [*servers.values(), one, two, mixed_ok, mixed_sick]
    try:
        with tempfile.TemporaryDirectory(prefix="haptic-annotations-") as tmp:
            out = render(_input(ports, Path(tmp)))
            assert out.warnings == (), [str(w) for w in out.warnings]
            write_tree(out, Path(tmp) / "tree")
            with serving([Path(tmp) / "tree" / "haproxy.cfg"], ports=(8080, 8443)) as pod_ip:
                yield pod_ip
    finally:
        for server in everything:
            server.shutdown()
            server.server_close()


def _request(
    pod_ip: str, host: str, path: str = "/", method: str = "GET", headers: dict | None = None
) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection(pod_ip, 8080, timeout=10)
    try:
        conn.request(method, path, headers={"Host": host, **(headers or {})})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def _seen(pod_ip: str, host: str, path: str = "/", **kw) -> dict:
    status, _, body = _request(pod_ip, host, path, **kw)
    assert status == 200, (status, body)
    return json.loads(body)


def test_path_rewrite_changes_the_path_the_service_receives(pod: str) -> None:
    assert _seen(pod, "rewrite.test", "/api/users?id=1")["path"] == "/users?id=1"
    assert _seen(pod, "rewrite.test", "/api")["path"] == "/"


def test_request_redirect_sends_the_client_elsewhere_with_the_code(pod: str) -> None:
    status, headers, _ = _request(pod, "redirect.test", "/a/b?c=1")
    assert status == 301 and headers["location"] == "https://elsewhere.test/a/b?c=1"


def test_headers_and_host_are_set(pod: str) -> None:
    status, headers, body = _request(pod, "headers.test", "/")
    # HAProxy sends header names in lower case (HTTP/1.1 names are case-insensitive).
    seen = {k.lower(): v for k, v in json.loads(body)["headers"].items()}
    assert status == 200 and seen["x-tenant"] == "blue" and seen["host"] == "internal.svc"
    assert seen["x-client"] == "127.0.0.1"  # a sample expression, evaluated per request
    assert headers["x-frame-options"] == "DENY"


def test_service_timeout_answers_504_when_the_server_is_slower(pod: str) -> None:
    assert _request(pod, "timeout.test", "/slow")[0] == 504
    assert _request(pod, "timeout.test", "/fast")[0] == 200


def test_rate_limit_answers_429_after_n_requests(pod: str) -> None:
    statuses = [_request(pod, "ratelimit.test")[0] for _ in range(5)]
    assert statuses == [200, 200, 200, 429, 429]


def test_allow_and_deny_lists_answer_403(pod: str) -> None:
    assert _request(pod, "allowed.test")[0] == 200
    assert _request(pod, "notallowed.test")[0] == 403
    assert _request(pod, "denied.test")[0] == 403


def test_basic_auth_answers_401_then_200_with_the_password(pod: str) -> None:
    status, headers, _ = _request(pod, "auth.test")
    assert status == 401 and headers["www-authenticate"] == 'Basic realm="Team only"'

    def basic(user: str, password: str) -> dict:
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        return {"Authorization": f"Basic {token}"}

    assert _request(pod, "auth.test", headers=basic("alice", "wrong"))[0] == 401
    assert _request(pod, "auth.test", headers=basic("alice", PASSWORD))[0] == 200


def _basic(user: str, password: str) -> dict:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


def test_regex_paths_route_by_regex_after_exact_and_before_prefix(pod: str) -> None:
    _, headers, _ = _request(pod, "regex.test", "/api/v2/users")
    assert headers["x-haptic-backend"] == "default_echo_80.regex"
    assert _seen(pod, "regex.test", "/api/v10/")["path"] == "/api/v10/"
    assert _seen(pod, "regex.test", "/static/a/b.png")["label"] == "echo"
    # Not matched by a regex: the Prefix "/" of the same Ingress.
    for path in ("/api/vx/", "/api/v2", "/static/a.png.txt", "/x/api/v2/"):
        assert _seen(pod, "regex.test", path)["label"] in {"one", "two"}, path


def test_begin_paths_match_as_a_string_prefix(pod: str) -> None:
    assert _seen(pod, "begin.test", "/docsearch")["label"] == "echo"
    assert _seen(pod, "begin.test", "/doc/x")["label"] == "echo"
    assert _request(pod, "begin.test", "/do")[0] == 404


def test_haproxy_ingress_annotations_answer_403_401_and_429(pod: str) -> None:
    assert _request(pod, "hi-allow.test")[0] == 403
    status, headers, _ = _request(pod, "hi-auth.test")
    assert status == 401 and headers["www-authenticate"] == 'Basic realm="HI"'
    assert _request(pod, "hi-auth.test", headers=_basic("alice", PASSWORD))[0] == 200
    statuses = [_request(pod, "hi-limit.test")[0] for _ in range(4)]
    assert statuses[:2] == [200, 200] and statuses[-1] == 429


def test_cors_preflight_answers_with_the_configured_headers(pod: str) -> None:
    preflight = {"Origin": "https://app.test", "Access-Control-Request-Method": "POST"}
    status, headers, _ = _request(pod, "cors.test", method="OPTIONS", headers=preflight)
    assert status == 204
    assert headers["access-control-allow-origin"] == "https://app.test"
    assert headers["access-control-allow-methods"] == "GET, POST"
    assert headers["access-control-allow-headers"] == "X-Custom"
    assert headers["access-control-allow-credentials"] == "true"
    assert headers["access-control-max-age"] == "600"
    status, headers, _ = _request(pod, "cors.test", headers={"Origin": "https://app.test"})
    assert status == 200 and headers["access-control-allow-origin"] == "https://app.test"
    # An origin not on the list gets no CORS headers (and its preflight reaches the app).
    _, headers, _ = _request(pod, "cors.test", headers={"Origin": "https://evil.test"})
    assert "access-control-allow-origin" not in headers


def test_cookie_persistence_keeps_a_client_on_one_server(pod: str) -> None:
    spread = {_seen(pod, "roundrobin.test")["label"] for _ in range(4)}
    assert spread == {"one", "two"}  # round robin without the annotation
    status, headers, body = _request(pod, "sticky.test")
    cookie = headers["set-cookie"].split(";")[0]
    assert status == 200 and cookie.startswith("HAPTICSRV=")
    first = json.loads(body)["label"]
    labels = {_seen(pod, "sticky.test", headers={"Cookie": cookie})["label"] for _ in range(6)}
    assert labels == {first}


def test_http_health_check_takes_a_failing_server_out_of_rotation(pod: str) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        labels = [_seen(pod, "health.test")["label"] for _ in range(6)]
        if labels == ["healthy"] * 6:
            break
        time.sleep(0.2)
    assert labels == ["healthy"] * 6


def test_server_ssl_with_a_ca_reaches_an_https_backend(pod: str) -> None:
    assert _seen(pod, "secure-backend.test")["label"] == "tls"


def test_element_wise_prefix_exact_and_the_ingress_default_backend(pod: str) -> None:
    assert _seen(pod, "paths.test", "/prefix")["label"] == "echo"  # "/prefix/" matches
    assert _seen(pod, "paths.test", "/prefix/x")["label"] == "echo"
    assert _seen(pod, "paths.test", "/exact/")["label"] in {"one", "two"}
    status, headers, _ = _request(pod, "paths.test", "/exact")  # Exact "/exact/" only
    assert status == 200 and headers["x-haptic-backend"] == "default_slowsvc_80"
    status, headers, _ = _request(pod, "paths.test", "/prefixes")
    assert headers["x-haptic-backend"] == "default_slowsvc_80"  # the Ingress's default
    _, headers, _ = _request(pod, "unknown.test", "/")
    assert headers["x-haptic-backend"] == "haptic.not-found"


def test_debug_headers_name_backend_and_server(pod: str) -> None:
    _, headers, _ = _request(pod, "timeout.test", "/fast")
    assert headers["x-haptic-backend"] == "default_slowsvc_80"
    assert headers["x-haptic-server"] == "SRV_1"


def _tls(pod_ip: str, sni: str, alpn: list[str] | None = None) -> ssl.SSLSocket:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if alpn:
        ctx.set_alpn_protocols(alpn)
    raw = socket.create_connection((pod_ip, 8443), timeout=10)
    return ctx.wrap_socket(raw, server_hostname=sni)


def test_ssl_redirect_and_hsts(pod: str) -> None:
    status, headers, _ = _request(pod, "https-only.test", "/x?y=1")
    assert status == 308 and headers["location"] == "https://https-only.test/x?y=1"
    conn = http.client.HTTPSConnection(pod, 8443, timeout=10, context=_insecure())
    try:
        conn.request("GET", "/", headers={"Host": "https-only.test"})
        resp = conn.getresponse()
        resp.read()
        assert resp.status == 200
        assert resp.getheader("strict-transport-security") == (
            "max-age=31536000; includeSubDomains"
        )
    finally:
        conn.close()


def _insecure() -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def test_default_certificate_for_unknown_names_and_alpn_h2(pod: str) -> None:
    with _tls(pod, "unknown.test", ["h2", "http/1.1"]) as sock:
        cert = ssl.DER_cert_to_PEM_cert(sock.getpeercert(binary_form=True))
        assert sock.selected_alpn_protocol() == "h2"
    assert cert != (b.FIXTURES / "tls.crt").read_text()
    with _tls(pod, "https-only.test", ["http/1.1"]) as sock:
        presented = sock.getpeercert(binary_form=True)
        assert sock.selected_alpn_protocol() == "http/1.1"
    assert presented == ssl.PEM_cert_to_DER_cert((b.FIXTURES / "tls.crt").read_text())


def test_ssl_passthrough_hands_the_tls_connection_to_the_service(pod: str) -> None:
    # The backend terminates TLS itself: its answer carries no header HAProxy would add.
    with _tls(pod, "passthrough.test", ["http/1.1"]) as sock:
        sock.sendall(b"GET /direct HTTP/1.1\r\nHost: passthrough.test\r\nConnection: close\r\n\r\n")
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.") and b" 200 " in head.split(b"\r\n")[0]
    assert b"x-haptic-backend" not in head.lower()
    assert json.loads(body)["path"] == "/direct" and json.loads(body)["label"] == "tls"
    # Other names still reach the terminating HTTPS frontend behind the TCP one.
    conn = http.client.HTTPSConnection(pod, 8443, timeout=10, context=_insecure())
    try:
        conn.request("GET", "/", headers={"Host": "https-only.test"})
        resp = conn.getresponse()
        resp.read()
        assert resp.status == 200 and resp.getheader("x-haptic-backend")
    finally:
        conn.close()


def test_cluster_default_backend_and_access_log_on_stdout(tmp_path: Path) -> None:
    # templateLibraries.ingress.defaultBackend answers what no Ingress routes; every request
    # is logged in the httplog format on HAProxy's stdout.
    fallback = _start("fallback")
    try:
        port = fallback.server_address[1]
        config = b.template_config()
        config["spec"]["templateLibraries"]["ingress"]["defaultBackend"] = {
            "namespace": "infra",
            "service": {"name": "fallback", "port": {"name": "http"}},
        }
        out = render(
            RenderInput(
                config,
                ingresses=[_ing("routed", "echo")],
                services=[
                    b.service(NS, "echo", [(None, 80, port)]),
                    b.service("infra", "fallback", [("http", 80, port)]),
                ],
                endpointslices=[
                    b.endpointslice(NS, "echo", [b.endpoint("127.0.0.1")], [(None, port)]),
                    b.endpointslice(
                        "infra", "fallback", [b.endpoint("127.0.0.1")], [("http", port)]
                    ),
                ],
            )
        )
        assert out.warnings == ()
        write_tree(out, tmp_path / "tree")
        log = tmp_path / "haproxy.stdout"
        with serving([tmp_path / "tree" / "haproxy.cfg"], stdout=log) as pod_ip:
            assert _seen(pod_ip, "nobody.test", "/anything")["label"] == "fallback"
            assert _seen(pod_ip, "routed.test", "/logged-path")["label"] == "fallback"
            deadline = time.monotonic() + 5
            while "/logged-path" not in log.read_text() and time.monotonic() < deadline:
                time.sleep(0.05)
        lines = log.read_text().splitlines()
        logged = next(line for line in lines if "/logged-path" in line)
        # httplog: frontend, backend/server, status, request line.
        assert "http default_echo_80/SRV_1" in logged and " 200 " in logged
        assert '"GET /logged-path HTTP/1.1"' in logged
        assert any("http infra_fallback_http/SRV_1" in line for line in lines)
    finally:
        fallback.shutdown()
        fallback.server_close()


def test_server_proto_h2_speaks_http2_to_the_endpoints(tmp_path: Path) -> None:
    # The endpoint is a second haproxy that accepts only cleartext HTTP/2 and answers with
    # the HTTP version it received.
    from controller.rendergate import haproxy_binary

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    (tmp_path / "h2.cfg").write_text(
        "defaults\n    mode http\n    timeout client 5s\n    timeout server 5s\n"
        "    timeout connect 5s\n"
        f"frontend h2only\n    bind 127.0.0.1:{port} proto h2\n"
        '    http-request return status 200 content-type text/plain lf-string "v%[req.ver]"\n'
    )
    endpoint = subprocess.Popen(
        [haproxy_binary(), "-db", "-f", str(tmp_path / "h2.cfg")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        svc = _annotated(b.service(NS, "grpc", [(None, 80, port)]), server_proto="h2")
        out = render(
            RenderInput(
                b.template_config(),
                ingresses=[_ing("grpc", "grpc")],
                services=[svc],
                endpointslices=[
                    b.endpointslice(NS, "grpc", [b.endpoint("127.0.0.1")], [(None, port)])
                ],
            )
        )
        assert out.warnings == ()
        write_tree(out, tmp_path / "tree")
        with serving([tmp_path / "tree" / "haproxy.cfg"]) as pod_ip:
            deadline = time.monotonic() + 10
            while True:
                status, _, body = _request(pod_ip, "grpc.test")
                if status == 200 or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
        assert (status, body) == (200, b"v2.0")
    finally:
        endpoint.terminate()
        endpoint.wait(timeout=10)


class _Failing(BaseHTTPRequestHandler):
    """Answers 500 to everything: an endpoint a default HTTP check takes out of rotation."""

    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        data = b'{"label": "failing"}'
        self.send_response(500)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


def _two_endpoints(service: dict, port: int, tmp_path: Path):
    """Render one Ingress to `service` with endpoints 127.0.0.1 and 127.0.0.2 on `port`."""
    out = render(
        RenderInput(
            b.template_config(),
            ingresses=[_ing("two", "two")],
            services=[service],
            endpointslices=[
                b.endpointslice(
                    NS, "two", [b.endpoint("127.0.0.1"), b.endpoint("127.0.0.2")], [(None, port)]
                )
            ],
        )
    )
    assert out.warnings == ()
    write_tree(out, tmp_path / "tree")
    return out


def _answers(pod_ip: str, count: int) -> list[str]:
    """Who answered `count` requests to two.test: a label, or "timeout"."""
    got = []
    for _ in range(count):
        conn = http.client.HTTPConnection(pod_ip, 8080, timeout=1.5)
        try:
            conn.request("GET", "/", headers={"Host": "two.test"})
            got.append(json.loads(conn.getresponse().read())["label"])
        except (TimeoutError, OSError):
            got.append("timeout")
        finally:
            conn.close()
    return got


def test_default_health_check_takes_a_hung_endpoint_out_of_rotation(tmp_path: Path) -> None:
    # The hung pod accepts TCP (the kernel completes the handshake) and never answers: a
    # TCP check passes it, the default HTTP check (docs/annotations.md "Backends, health
    # checks, logs") takes it out within a few intervals of the default 2 s.
    healthy = _start("healthy")
    port = healthy.server_address[1]
    hung = socket.socket()
    hung.bind(("127.0.0.2", port))
    hung.listen(64)
    try:
        _two_endpoints(b.service(NS, "two", [(None, 80, port)]), port, tmp_path)
        with serving([tmp_path / "tree" / "haproxy.cfg"]) as pod_ip:
            start = time.monotonic()
            while time.monotonic() - start < 20:
                if _answers(pod_ip, 6) == ["healthy"] * 6:
                    break
            took = time.monotonic() - start
            assert _answers(pod_ip, 10) == ["healthy"] * 10, f"after {took:.1f}s"
            print(f"hung endpoint out of rotation after {took:.1f}s")
    finally:
        hung.close()
        healthy.shutdown()
        healthy.server_close()


def test_check_false_renders_no_check_and_keeps_every_endpoint_in_rotation(
    tmp_path: Path,
) -> None:
    healthy = _start("healthy")
    port = healthy.server_address[1]
    failing = ThreadingHTTPServer(("127.0.0.2", port), _Failing)
    threading.Thread(target=failing.serve_forever, daemon=True).start()
    try:
        svc = _annotated(b.service(NS, "two", [(None, 80, port)]), check="false")
        out = _two_endpoints(svc, port, tmp_path)
        text = out.config.decode()
        assert " check" not in text.split("\nbackend default_two_80\n")[1].split("\nbackend ")[0]
        with serving([tmp_path / "tree" / "haproxy.cfg"]) as pod_ip:
            time.sleep(3)  # more than the default interval: no check would have run either
            assert set(_answers(pod_ip, 10)) == {"healthy", "failing"}
    finally:
        for server in (healthy, failing):
            server.shutdown()
            server.server_close()

"""templateLibraries.ingress.sslRedirect through a real haproxy: every Ingress with `tls` is
redirected to HTTPS (with its own code and port annotations), except one that opts out and
one whose TLS Secret is missing (docs/annotations.md "TLS")."""

from __future__ import annotations

import http.client
import json
from pathlib import Path

from controller.render import RenderInput, render
from controller.rendergate import write_tree
from tests.render import builders as b
from tests.render.haproxy_proc import serving
from tests.render.test_annotations_routing import _annotated, _start

NS = "default"


def _tls_ingress(name: str, secret: str, **annotations: str) -> dict:
    host = f"{name}.test"
    ing = b.ingress(NS, name, [(host, [b.path("/", "echo")])], tls=[(secret, [host])])
    return _annotated(ing, **annotations)


def _get(pod_ip: str, host: str, path: str) -> tuple[int, str | None, bytes]:
    conn = http.client.HTTPConnection(pod_ip, 8080, timeout=10)
    try:
        conn.request("GET", path, headers={"Host": host})
        resp = conn.getresponse()
        return resp.status, resp.getheader("location"), resp.read()
    finally:
        conn.close()


def test_global_ssl_redirect_with_code_and_port_and_not_to_an_https_that_cannot_serve(
    tmp_path: Path,
) -> None:
    echo = _start("echo")
    port = echo.server_address[1]
    config = b.template_config()
    config["spec"]["templateLibraries"]["ingress"]["sslRedirect"] = True
    ingresses = [
        _tls_ingress("plain-default", "site-tls"),
        _tls_ingress("coded", "site-tls", ssl_redirect_code="308", ssl_redirect_port="8443"),
        _tls_ingress("opted-out", "site-tls", ssl_redirect="false"),
        _tls_ingress("no-secret", "missing-tls"),
        _annotated(b.ingress(NS, "no-tls", [("no-tls.test", [b.path("/", "echo")])])),
    ]
    try:
        out = render(
            RenderInput(
                config,
                ingresses=ingresses,
                services=[b.service(NS, "echo", [(None, 80, port)])],
                endpointslices=[
                    b.endpointslice(NS, "echo", [b.endpoint("127.0.0.1")], [(None, port)])
                ],
                secrets=[b.tls_secret(NS, "site-tls")],
            )
        )
        assert [(w.name, w.reason) for w in out.warnings] == [("no-secret", "SecretNotFound")]
        write_tree(out, tmp_path / "tree")
        with serving([tmp_path / "tree" / "haproxy.cfg"], ports=(8080, 8443)) as pod_ip:
            status, location, _ = _get(pod_ip, "plain-default.test", "/a?b=1")
            assert (status, location) == (302, "https://plain-default.test/a?b=1")
            status, location, _ = _get(pod_ip, "coded.test", "/a?b=1")
            assert (status, location) == (308, "https://coded.test:8443/a?b=1")
            for host in ("opted-out.test", "no-secret.test", "no-tls.test"):
                status, location, body = _get(pod_ip, host, "/x")
                assert status == 200 and location is None, host
                assert json.loads(body)["label"] == "echo"
        assert "not redirected to HTTPS" in out.warnings[0].message
    finally:
        echo.shutdown()
        echo.server_close()

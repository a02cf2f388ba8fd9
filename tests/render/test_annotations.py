"""Every haproxy.org/* annotation renders what docs/annotations.md says, haproxy -c accepts it,
and an invalid value skips only the Ingress (or the routes to the Service) it is on."""

from __future__ import annotations

import base64

import pytest

from controller.render import RenderInput, render
from controller.render.annotations import KNOWN
from controller.rendergate import check_output
from tests.render import builders as b

NS = "default"
CA = {
    "apiVersion": "v1",
    "kind": "Secret",
    "type": "Opaque",
    "metadata": {"namespace": NS, "name": "ca"},
    "data": {"ca.crt": base64.b64encode((b.FIXTURES / "tls.crt").read_bytes()).decode()},
}
USERS = {
    "apiVersion": "v1",
    "kind": "Secret",
    "type": "Opaque",
    "metadata": {"namespace": NS, "name": "users"},
    # openssl passwd -6 -salt abcdefgh secret
    "data": {
        "bob": base64.b64encode(
            b"$6$abcdefgh$ltjgWl6579NluT/Vi1nwEvcil.G5Nbc4NiXZaNGStk8PSwGf"
            b"Qv72N2CKPPrVACtLtip/cZ/1GM/O6IND4WQhG."
        ).decode()
    },
}


def _with(obj: dict, annotations: dict[str, str]) -> dict:
    obj["metadata"]["annotations"] = {f"haproxy.org/{k}": v for k, v in annotations.items()}
    return obj


def _render(
    ingress_annotations: dict[str, str],
    service_annotations: dict[str, str] | None = None,
    config: dict | None = None,
):
    ing = _with(b.ingress(NS, "app", [("app.test", [b.path("/", "web")])]), ingress_annotations)
    plain = b.ingress(NS, "plain", [("plain.test", [b.path("/", "web")])])
    svc = _with(b.service(NS, "web", [(None, 80, 8080)]), service_annotations or {})
    inp = RenderInput(
        config or b.template_config(),
        ingresses=[ing, plain],
        services=[svc],
        endpointslices=[b.endpointslice(NS, "web", [b.endpoint("10.0.0.1")], [(None, 8080)])],
        secrets=[CA, USERS],
    )
    return render(inp)


def _backend(out, name: str) -> str:
    """The lines of one backend section."""
    text = out.config.decode()
    start = text.index(f"\nbackend {name}\n")
    end = text.find("\nbackend ", start + 1)
    return text[start : end if end > 0 else len(text)]


# annotation -> value -> what its backend must contain
RENDERED = [
    ("ssl-redirect", "true", "http-request redirect scheme https code 302 if !{ ssl_fc }"),
    ("path-rewrite", "/old/(.*) /new/\\1", "http-request replace-path /old/(.*) /new/\\1"),
    ("request-redirect", "example.org", "redirect prefix %[ssl_fc,iif(https,http)]://example.org"),
    ("request-set-header", "X-A 1", 'http-request set-header X-A "1"'),
    ("response-set-header", "X-B 2", 'http-response set-header X-B "2"'),
    ("set-host", "in.svc", "http-request set-header Host in.svc"),
    ("rate-limit-requests", "10", "if { sc_http_req_rate(0) gt 10 }"),
    ("allow-list", "10.0.0.0/8", "deny_status 403 unless { src 10.0.0.0/8 }"),
    ("deny-list", "192.0.2.1", "deny_status 403 if { src 192.0.2.1/32 }"),
    ("cors-enable", "true", "http-request return status 204 hdr Access-Control-Allow-Origin"),
    ("hsts-max-age", "600", 'Strict-Transport-Security "max-age=600" if { ssl_fc }'),
    ("load-balance", "leastconn", "balance leastconn"),
    ("cookie-persistence", "SRV", "cookie SRV insert indirect nocache dynamic"),
    ("check", "false", None),
    ("check-http", "/healthz", "option httpchk GET /healthz"),
    ("check-interval", "500ms", "default-server check inter 500ms"),
    ("server-proto", "h2", "default-server check inter 2s proto h2"),
    ("server-ssl", "true", "default-server check inter 2s ssl verify none"),
    ("server-ca", "ca", "ssl verify required ca-file certs/ca.default_ca.pem"),
    ("maxconn", "50", "default-server check inter 2s maxconn 50"),
    ("timeout-server", "2m", "timeout server 2m"),
    ("timeout-connect", "3s", "timeout connect 3s"),
    ("timeout-queue", "4s", "timeout queue 4s"),
    ("timeout-tunnel", "1h", "timeout tunnel 1h"),
    ("timeout-http-request", "5s", "timeout http-request 5s"),
    ("timeout-check", "1s", "timeout check 1s"),
]


@pytest.mark.parametrize(("key", "value", "expected"), RENDERED)
def test_each_ingress_annotation_renders_into_its_own_backend(key, value, expected) -> None:
    out = _render({key: value})
    assert out.warnings == ()
    own = _backend(out, "default_web_80.app")
    if expected is None:
        assert "default-server" not in own  # check: false drops the health check
    else:
        assert expected in own
    # The Ingress without annotations keeps the shared backend, untouched.
    assert out.plan["maps"]["maps/path-prefix.map"]["plain.test/"] == "default_web_80"
    assert out.plan["maps"]["maps/path-prefix.map"]["app.test/"] == "default_web_80.app"
    shared = _backend(out, "default_web_80")
    assert "http-request" not in shared and "    default-server check inter 2s\n" in shared


def test_every_rendered_annotation_is_accepted_by_haproxy() -> None:
    # One Ingress carrying them all (where they combine), through the real haproxy -c.
    annotations = {k: v for k, v, _ in RENDERED if k not in ("check",)}
    annotations.update(
        {
            "auth-type": "basic-auth",
            "auth-secret": "users",
            "auth-realm": "Inner Circle",
            "ssl-redirect-port": "8443",
            "ssl-redirect-code": "301",
            "request-redirect-code": "307",
            "rate-limit-period": "1m",
            "rate-limit-status-code": "503",
            "cors-allow-origin": "https://a.test https://b.test",
            "cors-allow-credentials": "true",
            "hsts-preload": "true",
        }
    )
    out = _render(annotations)
    assert out.warnings == ()
    own = _backend(out, "default_web_80.app")
    assert 'http-request auth realm "Inner Circle" unless { http_auth(auth.default.users) }' in own
    assert "userlist auth.default.users\n    user bob password $6$" in out.config.decode()
    assert ":8443%[capture.req.uri] code 301" in own
    verdict = check_output(out)
    assert verdict.accepted, verdict.output


def test_service_annotations_apply_to_its_backends_and_beat_the_ingress() -> None:
    out = _render(
        {"load-balance": "source", "timeout-server": "1s", "timeout-queue": "9s"},
        {"load-balance": "leastconn", "timeout-server": "30s"},
    )
    assert out.warnings == ()
    own = _backend(out, "default_web_80.app")
    assert "balance leastconn" in own  # Service wins
    assert "timeout server 30s" in own and "timeout queue 9s" in own  # merged per timeout
    assert "balance leastconn" in _backend(out, "default_web_80")  # for every route to it


def test_template_config_defaults_for_backends() -> None:
    config = b.template_config()
    config["spec"]["templateLibraries"]["kubernetesBackends"].update(
        {"balance": "leastconn", "healthChecks": {"enabled": True, "interval": "5s"}}
    )
    out = _render({}, config=config)
    shared = _backend(out, "default_web_80")
    assert "balance leastconn" in shared and "default-server check inter 5s" in shared


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("ssl-redirect", "maybe"),
        ("ssl-redirect-code", "200"),
        ("path-rewrite", "a b c"),
        ("path-rewrite", "/(unclosed /x"),
        ("request-redirect", "not a host"),
        ("request-set-header", 'X-A "quoted"'),
        ("request-set-header", "Bad:Name v"),
        ("set-host", "in valid"),
        ("rate-limit-requests", "many"),
        ("rate-limit-period", "soon"),
        ("allow-list", "10.0.0.0/33"),
        ("auth-type", "digest"),
        ("auth-type", "basic-auth"),  # without auth-secret
        ("cors-allow-origin", "javascript:alert(1)"),
        ("load-balance", "fastest"),
        ("cookie-persistence", "a b"),
        ("check-interval", "2 s"),
        ("server-proto", "h3"),
        ("maxconn", "0"),
        ("timeout-server", "forever"),
        ("timeout-client", "5s"),  # frontend only: refused with the reason
        ("not-an-annotation", "x"),
        ("backend-config-snippet", "http-request deny"),  # snippets are off by default
    ],
)
def test_an_invalid_annotation_skips_that_ingress_only(key: str, value: str) -> None:
    out = _render({key: value})
    assert [(w.kind, w.name, w.reason) for w in out.warnings] == [
        ("Ingress", "app", "InvalidAnnotation")
    ]
    assert f"haproxy.org/{key}" in out.warnings[0].message
    hosts = set(out.plan["maps"]["maps/hosts.map"])
    assert hosts == {"plain.test"}
    assert check_output(out).accepted


def test_an_invalid_service_annotation_skips_the_routes_to_it() -> None:
    out = _render({}, {"server-ca": "missing-secret"})
    reasons = {(w.kind, w.name, w.reason) for w in out.warnings}
    assert reasons == {("Service", "web", "SecretNotFound")}
    assert out.plan["maps"]["maps/path-prefix.map"] == {}
    out = _render({}, {"maxconn": "-1"})
    assert {(w.kind, w.reason) for w in out.warnings} == {("Service", "InvalidAnnotation")}


def test_a_missing_auth_secret_skips_the_ingress_rather_than_serving_it_open() -> None:
    out = _render({"auth-type": "basic-auth", "auth-secret": "nobody"})
    assert [(w.name, w.reason) for w in out.warnings] == [("app", "SecretNotFound")]
    assert set(out.plan["maps"]["maps/hosts.map"]) == {"plain.test"}


def test_snippets_render_only_when_the_template_config_allows_them() -> None:
    config = b.template_config()
    config["spec"]["templateLibraries"]["ingress"]["allowSnippets"] = True
    out = _render({"backend-config-snippet": "http-response set-header X-Snip yes"}, config=config)
    assert out.warnings == ()
    assert "    http-response set-header X-Snip yes\n" in _backend(out, "default_web_80.app")
    assert check_output(out).accepted


def test_the_documentation_lists_every_annotation() -> None:
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "annotations.md").read_text()
    for key in sorted(KNOWN):
        assert f"`haproxy.org/{key}`" in doc, key


def test_ssl_passthrough_renders_a_tcp_frontend_haproxy_accepts_without_warnings() -> None:
    config = b.template_config()
    config["spec"]["templateLibraries"]["ingress"]["defaultCertificate"] = f"{NS}/site-tls"
    ing = _with(
        b.ingress(NS, "app", [("app.test", [b.path("/", "web")])]), {"ssl-passthrough": "true"}
    )
    wild = _with(
        b.ingress(NS, "wild", [("*.wild.test", [b.path("/", "web")])]), {"ssl-passthrough": "true"}
    )
    out = render(
        RenderInput(
            config,
            ingresses=[ing, wild],
            services=[b.service(NS, "web", [(None, 80, 8080)])],
            secrets=[b.tls_secret(NS, "site-tls")],
        )
    )
    assert [(w.name, w.reason) for w in out.warnings] == [("wild", "InvalidAnnotation")]
    assert out.plan["maps"]["maps/sni-passthrough.map"] == {
        "app.test": "default_web_80.app.passthrough"
    }
    assert out.plan["maps"]["maps/hosts.map"] == {}  # not served over plain HTTP
    text = out.config.decode()
    assert '    bind "abns@haptic-https-${POD_IP}" accept-proxy ssl crt' in text
    assert "    mode tcp\n" in _backend(out, "default_web_80.app.passthrough")
    verdict = check_output(out)
    assert verdict.accepted and "[WARNING]" not in verdict.output, verdict.output

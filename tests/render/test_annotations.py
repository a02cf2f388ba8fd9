"""Every haproxy.org/* annotation renders what docs/annotations.md says, haproxy -c accepts it,
and an invalid value skips only the Ingress (or the routes to the Service) it is on."""

from __future__ import annotations

import base64

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from controller.render import RenderInput, render
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
    ("path-rewrite", "/old/(.*) /new/\\1", "http-request replace-path '/old/(.*)' '/new/\\1'"),
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
        ("path-rewrite", "/a\\'b /x"),  # an escaped quote would end replace-path's quoted word
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


def test_a_path_rewrite_regex_haproxy_cannot_compile_skips_the_ingress() -> None:
    out = _render({"path-rewrite": "/caf\\u00e9(.*) /cafe\\1"})
    assert [(w.name, w.reason) for w in out.warnings] == [("app", "InvalidAnnotation")]
    assert "not in PCRE" in out.warnings[0].message


def test_an_invalid_service_annotation_skips_the_routes_to_it() -> None:
    out = _render({}, {"server-ca": "missing-secret"})
    reasons = {(w.kind, w.name, w.reason) for w in out.warnings}
    assert reasons == {("Service", "web", "SecretNotFound")}
    assert out.plan["maps"]["maps/path-prefix.map"] == {}
    out = _render({}, {"maxconn": "-1"})
    assert {(w.kind, w.reason) for w in out.warnings} == {("Service", "InvalidAnnotation")}


@pytest.mark.parametrize(
    ("key", "value", "why"),
    [
        ("not-an-annotation", "x", "unknown annotation"),
        ("timeout-client", "5s", "applies to the frontend"),
        ("rate-limit-requests", "5", "set it on the Ingress"),
        ("allow-list", "10.0.0.0/8", "set it on the Ingress"),
        ("ssl-redirect", "true", "set it on the Ingress"),
        ("cors-enable", "true", "set it on the Ingress"),
    ],
)
def test_a_service_annotation_haptic_does_not_apply_to_a_backend_is_refused(
    key: str, value: str, why: str
) -> None:
    # Never dropped silently (docs/annotations.md "Where they apply"): the warning names
    # the annotation and the Service, and the routes to that Service are skipped.
    out = _render({}, {key: value})
    assert [(w.kind, w.name, w.reason) for w in out.warnings] == [
        ("Service", "web", "InvalidAnnotation")
    ]
    assert f"haproxy.org/{key}" in out.warnings[0].message and why in out.warnings[0].message
    assert out.plan["maps"]["maps/path-prefix.map"] == {}
    assert check_output(out).accepted


def test_a_missing_default_certificate_is_reported_as_secret_not_found() -> None:
    config = b.template_config()
    config["spec"]["templateLibraries"]["ingress"]["defaultCertificate"] = f"{NS}/nowhere"
    out = _render({}, config=config)
    assert [(w.kind, w.name, w.reason) for w in out.warnings] == [
        ("Secret", "nowhere", "SecretNotFound")
    ]


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


def _annotations_read() -> set[str]:
    """Every annotation name the render code reads, from its own tables."""
    from controller.render import annotations as ann
    from controller.render.ingress import DEFAULT_CLASS_ANNOTATION
    from controller.render.libraries import INGRESS_CLASS_ANNOTATION

    return (
        {ann.PREFIX + key for key in ann.KNOWN}
        | {ann.HI_PREFIX + key for key in ann.HAPROXY_INGRESS}
        | {INGRESS_CLASS_ANNOTATION, DEFAULT_CLASS_ANNOTATION}
    )


def test_the_documentation_has_a_row_for_exactly_the_annotations_the_code_reads() -> None:
    import re
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    doc = (repo / "docs" / "annotations.md").read_text()
    rows = set(re.findall(r"^\| `([a-z0-9.-]+\.[a-z]+/[a-z0-9.-]+)` \|", doc, re.M))
    read = _annotations_read()
    assert read - rows == set(), "read by the code, no row in docs/annotations.md"
    assert rows - read == set(), "a row in docs/annotations.md, not read by the code"
    # No name read outside those tables: every such literal in the render code and the
    # bundled templates is one of them.
    pattern = re.compile(r"\b(?:haproxy\.org|haproxy-ingress\.github\.io)/[a-z0-9][a-z0-9-]*")
    sources = [*(repo / "controller" / "render").glob("*.py"), *(repo / "templates").rglob("*.j2")]
    literals = {name for f in sources for name in pattern.findall(f.read_text())}
    assert literals - read == set()


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


def _routes(paths: list[dict], annotations: dict[str, str], host: str | None = "app.test"):
    ing = b.ingress(NS, "app", [(host, paths)])
    ing["metadata"]["annotations"] = annotations
    inp = RenderInput(
        b.template_config(),
        ingresses=[ing],
        services=[b.service(NS, "web", [(None, 80, 8080)]), b.service(NS, "api", [(None, 80, 80)])],
        secrets=[CA, USERS],
    )
    return render(inp)


def test_regex_paths_render_as_ordered_rules_that_haproxy_accepts() -> None:
    out = _routes(
        [
            b.path("/api/v[0-9]+/", "api", 80, "ImplementationSpecific"),
            b.path("^/(img|css)/.*\\.(png|css)$", "web", 80, "ImplementationSpecific"),
            b.path("/exact", "web", 80, "Exact"),
        ],
        {"haproxy.org/path-type": "regex"},
    )
    assert out.warnings == ()
    text = out.config.decode()
    api = text.index("str(default_api_80.app) if !{ var(txn.backend) -m found } "
                     "{ var(txn.pathkey) -m reg '^app\\.test/api/v[0-9]+/' }")  # fmt: skip
    web = text.index("{ var(txn.pathkey) -m reg '^app\\.test/(img|css)/.*\\.(png|css)$' }")
    # In the Ingress's order, after the exact map and before the prefix maps.
    assert text.index("map_str(maps/path-exact.map) if { var(txn.pathkey)") < api < web
    assert web < text.index("map_str(maps/path-prefix-exact.map) if { var(txn.pathkey)")
    # An explicit pathType keeps its Ingress API meaning.
    assert out.plan["maps"]["maps/path-exact.map"] == {"app.test/exact": "default_web_80.app"}
    assert out.plan["maps"]["maps/path-prefix.map"] == {}
    assert check_output(out).accepted


def test_rules_without_a_host_get_regex_routes_against_the_any_host_key() -> None:
    out = _routes([b.path("/v[12]/", "api", 80, "ImplementationSpecific")],
                  {"haproxy.org/path-type": "regex"}, host=None)  # fmt: skip
    assert "{ var(txn.anykey) -m reg '^\\*/v[12]/' }" in out.config.decode()
    assert check_output(out).accepted


@pytest.mark.parametrize(
    ("path_type", "table", "key"),
    [
        (None, "maps/path-prefix.map", "app.test/docs/"),  # ImplementationSpecific: as Prefix
        ("prefix", "maps/path-prefix.map", "app.test/docs/"),
        ("begin", "maps/path-prefix.map", "app.test/docs"),  # string prefix: /docsearch too
        ("exact", "maps/path-exact.map", "app.test/docs"),
    ],
)
def test_path_type_decides_how_implementation_specific_paths_match(path_type, table, key):
    annotations = {"haproxy.org/path-type": path_type} if path_type else {}
    out = _routes([b.path("/docs", "web", 80, "ImplementationSpecific")], annotations)
    assert out.warnings == ()
    assert out.plan["maps"][table] == {key: "default_web_80.app" if path_type else "default_web_80"}


@pytest.mark.parametrize(
    ("path", "annotations", "why"),
    [
        ("/api/[0-9", {"haproxy.org/path-type": "regex"}, "invalid regex path"),
        ("/api/[0-9]+", {}, "a regex needs haproxy.org/path-type: regex"),
        ("/api/v1", {"haproxy.org/path-type": "glob"}, "haproxy.org/path-type"),
        # Python's re accepts these, HAProxy's PCRE refuses them (and with them the render).
        ("/\\N{BULLET}", {"haproxy.org/path-type": "regex"}, "not in PCRE"),
        ("/caf\\u00e9", {"haproxy.org/path-type": "regex"}, "not in PCRE"),
    ],
)
def test_a_path_that_cannot_match_as_asked_skips_the_ingress(path, annotations, why) -> None:
    out = _routes([b.path(path, "web", 80, "ImplementationSpecific")], annotations)
    assert [(w.kind, w.name) for w in out.warnings] == [("Ingress", "app")]
    assert why in out.warnings[0].message
    assert out.plan["maps"]["maps/hosts.map"] == {}


# haproxy-ingress.github.io/* annotation -> the haproxy.org/* annotations that mean the same.
HAPROXY_INGRESS = [
    ({"ssl-redirect": "true", "ssl-redirect-code": "308"},
     {"ssl-redirect": "true", "ssl-redirect-code": "308"}),
    ({"allowlist-source-range": "10.0.0.0/8"}, {"allow-list": "10.0.0.0/8"}),
    ({"whitelist-source-range": "10.0.0.0/8"}, {"allow-list": "10.0.0.0/8"}),
    ({"denylist-source-range": "192.0.2.0/24"}, {"deny-list": "192.0.2.0/24"}),
    ({"auth-secret": "users", "auth-realm": "Team"},
     {"auth-type": "basic-auth", "auth-secret": "users", "auth-realm": "Team"}),
    ({"auth-type": "basic", "auth-secret": "users"},
     {"auth-type": "basic-auth", "auth-secret": "users"}),
    ({"cors-enable": "true", "cors-allow-origin": "https://a.test", "cors-allow-methods": "GET",
      "cors-allow-headers": "X-A", "cors-allow-credentials": "true", "cors-max-age": "60"},
     {"cors-enable": "true", "cors-allow-origin": "https://a.test", "cors-allow-methods": "GET",
      "cors-allow-headers": "X-A", "cors-allow-credentials": "true", "cors-max-age": "60"}),
    ({"hsts": "true"}, {"hsts-max-age": "15768000"}),
    ({"hsts": "true", "hsts-max-age": "60", "hsts-include-subdomains": "true",
      "hsts-preload": "true"},
     {"hsts-max-age": "60", "hsts-include-subdomains": "true", "hsts-preload": "true"}),
    ({"hsts": "false", "hsts-max-age": "60"}, {}),
    ({"balance-algorithm": "leastconn"}, {"load-balance": "leastconn"}),
    ({"maxconn-server": "20"}, {"maxconn": "20"}),
    ({"health-check-interval": "5s", "health-check-uri": "/ping"},
     {"check-interval": "5s", "check-http": "/ping"}),
    ({"backend-protocol": "h2"}, {"server-proto": "h2"}),
    ({"backend-protocol": "h1"}, {"server-proto": "h1"}),
    ({"backend-protocol": "h1-ssl"}, {"server-ssl": "true"}),
    ({"backend-protocol": "h2-ssl"}, {"server-ssl": "true", "server-proto": "h2"}),
    ({"secure-backends": "true", "secure-verify-ca-secret": "ca"},
     {"server-ssl": "true", "server-ca": "ca"}),
    ({"affinity": "cookie"}, {"cookie-persistence": "INGRESSCOOKIE"}),
    ({"affinity": "cookie", "session-cookie-name": "S"}, {"cookie-persistence": "S"}),
    ({"limit-rps": "5"}, {"rate-limit-requests": "5", "rate-limit-period": "1s"}),
    ({"timeout-connect": "1s", "timeout-server": "2s", "timeout-queue": "3s",
      "timeout-tunnel": "4s", "timeout-http-request": "5s"},
     {"timeout-connect": "1s", "timeout-server": "2s", "timeout-queue": "3s",
      "timeout-tunnel": "4s", "timeout-http-request": "5s"}),
]  # fmt: skip


def _prefixed(prefix: str, annotations: dict[str, str]) -> dict[str, str]:
    return {prefix + k: v for k, v in annotations.items()}


@pytest.mark.parametrize(("theirs", "ours"), HAPROXY_INGRESS)
def test_haproxy_ingress_annotations_render_as_their_haproxy_org_equivalents(theirs, ours):
    path = [b.path("/", "web")]
    got = _routes(path, _prefixed("haproxy-ingress.github.io/", theirs))
    want = _routes(path, _prefixed("haproxy.org/", ours))
    assert got.warnings == () and want.warnings == ()
    assert got.config == want.config


def test_haproxy_ingress_regex_paths_and_snippets() -> None:
    out = _routes([b.path("/v[0-9]/", "api", 80, "ImplementationSpecific")],
                  {"haproxy-ingress.github.io/path-type": "regex"})  # fmt: skip
    assert "-m reg '^app\\.test/v[0-9]/'" in out.config.decode()
    out = _routes([b.path("/", "web")], {"haproxy-ingress.github.io/config-backend": "retries 1"})
    assert "snippets are off" in out.warnings[0].message


def test_haproxy_org_wins_over_its_haproxy_ingress_twin() -> None:
    out = _routes(
        [b.path("/", "web")],
        {
            "haproxy.org/load-balance": "source",
            "haproxy-ingress.github.io/balance-algorithm": "first",
        },
    )
    assert "    balance source\n" in _backend(out, "default_web_80.app")


@pytest.mark.parametrize(
    ("name", "value", "why"),
    [
        ("rewrite-target", "/", "not supported by haptic"),
        ("backend-protocol", "fcgi", "expected one of h1, h2, h1-ssl, h2-ssl"),
        ("affinity", "ip", "only cookie is supported"),
        ("session-cookie-name", "S", "needs affinity: cookie"),
        ("auth-type", "digest", "only basic is supported"),
        ("hsts", "maybe", "expected true or false"),
    ],
)
def test_a_haproxy_ingress_annotation_haptic_cannot_honour_skips_the_ingress(name, value, why):
    out = _routes([b.path("/", "web")], {f"haproxy-ingress.github.io/{name}": value})
    assert [(w.kind, w.name, w.reason) for w in out.warnings] == [
        ("Ingress", "app", "InvalidAnnotation")
    ]
    assert f"haproxy-ingress.github.io/{name}" in out.warnings[0].message
    assert why in out.warnings[0].message


_REGEX_ALPHABET = "ab/.^$*+?()[]{}|-:,=!<>\\PNuUdwsZ019x"


@settings(max_examples=15, deadline=None)
@given(st.lists(st.text(_REGEX_ALPHABET, max_size=12), min_size=1, max_size=60))
@example(["\\\\"])  # a path-rewrite matching a literal backslash (found by hypothesis)
def test_every_regex_haptic_accepts_compiles_in_haproxy(texts: list[str]) -> None:
    # Python's re decides what the render accepts; the real haproxy (PCRE) must compile each
    # of those as the templates use them (a regex path's pattern after its host key, a
    # path-rewrite as replace-path's regex), or one Ingress could fail the whole render.
    import subprocess
    import tempfile

    from controller.render.annotations import InvalidAnnotation, regex_problem, route_policy
    from controller.render.ingress import regex_key
    from controller.render.libraries import valid_regex_path
    from controller.rendergate import haproxy_binary

    lines = []
    for path in ("/" + t for t in texts):
        if valid_regex_path(path) and regex_problem(path) is None:
            lines.append(
                f"    http-request deny if {{ path -m reg '{regex_key('h.test', path)}' }}"
            )
        try:
            rewrite = route_policy((("path-rewrite", f"{path} /x"),)).path_rewrite
        except InvalidAnnotation:
            continue
        lines.append(f"    http-request replace-path '{rewrite[0]}' '{rewrite[1]}'")
    config = "defaults\n    mode http\n    timeout client 1s\n    timeout server 1s\n"
    config += "    timeout connect 1s\nfrontend f\n    bind 127.0.0.1:1\n" + "\n".join(lines)
    with tempfile.NamedTemporaryFile("w", suffix=".cfg") as f:
        f.write(config + "\n")
        f.flush()
        proc = subprocess.run(
            [haproxy_binary(), "-c", "-f", f.name], capture_output=True, text=True, timeout=60
        )
    assert proc.returncode == 0, proc.stdout + proc.stderr

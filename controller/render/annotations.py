"""`haproxy.org/*` (and `haproxy-ingress.github.io/*`) annotations -> route and backend
policies (pure).

Ingress annotations shape its routes (redirects, rewrites, headers, access control, auth,
CORS, rate limits, HSTS); annotations on a Service shape the backend of that Service
(balance, health checks, persistence, server TLS, timeouts), and the same backend keys on an
Ingress apply to the backends of its routes unless the Service sets them: Service beats
Ingress beats the template config's default (docs/annotations.md).

The `haproxy-ingress.github.io/*` names haptic supports are translated to their
`haproxy.org/*` equivalents first (`HAPROXY_INGRESS`); when both name one setting, the
`haproxy.org/*` one wins. A `haproxy-ingress.github.io/*` name haptic does not support is an
invalid annotation like an unknown `haproxy.org/*` one: never ignored silently.

Every value is validated here, because it becomes HAProxy configuration text: an invalid
value raises InvalidAnnotation and the render skips that Ingress (or the routes to that
Service) with a warning rather than rendering something haproxy refuses or misreads.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

PREFIX = "haproxy.org/"
HI_PREFIX = "haproxy-ingress.github.io/"
# Timeouts and periods as HAProxy reads them: a number and an optional unit.
_DURATION_RE = re.compile(r"^[0-9]{1,9}(us|ms|s|m|h|d)?$")
_HEADER_NAME_RE = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}$")
# Header values end up inside a double-quoted HAProxy word: no quotes, backslashes or
# control characters; "%[...]" sample expressions are allowed on purpose (log-format).
_HEADER_VALUE_RE = re.compile(r'^[^"\\\x00-\x1f\x7f]{0,1024}$')
_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_HOST_RE = re.compile(rf"^{_LABEL}(\.{_LABEL})*(:[0-9]{{1,5}})?$")
_URL_RE = re.compile(r"^https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*)?$")
_TOKEN_RE = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
# No whitespace and no quote, not even escaped: path-rewrite's arguments are single-quoted in
# replace-path, where HAProxy reads a backslash literally and a quote ends the word.
_REGEX_ARG_RE = re.compile(r"^[^\s\"'\\]*(\\[^\s\"'][^\s\"'\\]*)*$")
_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
_METHODS_RE = re.compile(r"^(\*|[A-Z]+(\s*,\s*[A-Z]+)*)$")
_HEADERS_LIST_RE = re.compile(r"^(\*|[A-Za-z0-9-]+(\s*,\s*[A-Za-z0-9-]+)*)$")
BALANCE = ("roundrobin", "static-rr", "leastconn", "first", "source", "random")
BALANCE_ARG = ("uri", "url_param", "hdr", "random")
REDIRECT_CODES = (301, 302, 303, 307, 308)
# How an ImplementationSpecific path matches (haproxy.org/path-type); prefix by default.
PATH_MATCHES = ("prefix", "exact", "begin", "regex")
# timeout-<name> on a backend; client and http-keep-alive belong to the frontend.
BACKEND_TIMEOUTS = ("server", "connect", "queue", "tunnel", "http-request", "check")
GLOBAL_ONLY = {
    "timeout-client": "timeout client applies to the frontend: set extraContext.timeoutClient",
    "timeout-http-keep-alive": "applies to the frontend: set extraContext.timeoutHttpKeepAlive",
}


class InvalidAnnotation(ValueError):
    def __init__(self, key: str, value: Any, why: str) -> None:
        super().__init__(f"annotation {key}={value!r}: {why}")
        self.key = key


@dataclass(frozen=True)
class Cors:
    origins: tuple[str, ...] = ("*",)
    methods: str = "*"
    headers: str = "*"
    credentials: bool = False
    max_age: int = 5


@dataclass(frozen=True)
class RoutePolicy:
    """What an Ingress's annotations do to its requests (rules in its routes' backends)."""

    ssl_redirect: bool = False
    ssl_passthrough: bool = False  # TLS to the Service as is, routed by SNI
    ssl_redirect_code: int = 302
    ssl_redirect_port: int | None = None
    path_rewrite: tuple[str, str] | None = None
    request_redirect: str | None = None
    request_redirect_code: int = 302
    request_headers: tuple[tuple[str, str], ...] = ()
    response_headers: tuple[tuple[str, str], ...] = ()
    set_host: str | None = None
    rate_limit_requests: int | None = None
    rate_limit_period: str = "1s"
    rate_limit_status: int = 429
    allow_list: tuple[str, ...] = ()
    deny_list: tuple[str, ...] = ()
    auth_secret: str | None = None  # Secret name in the Ingress's namespace
    auth_realm: str = "Protected"
    cors: Cors | None = None
    hsts: str | None = None  # the Strict-Transport-Security value
    path_type: str | None = None  # one of PATH_MATCHES, for ImplementationSpecific paths


@dataclass(frozen=True)
class BackendPolicy:
    """What annotations do to a backend; the defaults are the library's defaults."""

    balance: str = "roundrobin"
    cookie: str | None = None
    check: bool = True
    check_http: str | None = None
    check_interval: str = "2s"
    server_proto: str | None = None
    server_ssl: bool = False
    server_ca: str | None = None  # Secret name in the Service's namespace
    maxconn: int | None = None
    timeouts: tuple[tuple[str, str], ...] = ()
    snippet: tuple[str, ...] = ()

    def server_options(self, ca_file: str | None) -> str:
        """The `default-server` options every server line of the backend inherits."""
        opts = []
        if self.check:
            opts.append(f"check inter {self.check_interval}")
        if self.server_ssl or self.server_ca:
            opts.append(f"ssl verify required ca-file {ca_file}" if ca_file else "ssl verify none")
            if self.server_proto == "h2":
                opts.append("alpn h2")
        elif self.server_proto == "h2":
            opts.append("proto h2")
        if self.maxconn is not None:
            opts.append(f"maxconn {self.maxconn}")
        return " ".join(opts)


DEFAULT_ROUTE = RoutePolicy()
DEFAULT_BACKEND = BackendPolicy()


# -- value parsers ---------------------------------------------------------------------------


def _bool(key: str, value: str) -> bool:
    low = value.strip().lower()
    if low in ("true", "1", "yes", "on", "enabled"):
        return True
    if low in ("false", "0", "no", "off", "disabled"):
        return False
    raise InvalidAnnotation(key, value, "expected true or false")


def _int(key: str, value: str, low: int, high: int) -> int:
    try:
        number = int(value.strip())
    except ValueError:
        raise InvalidAnnotation(key, value, "expected an integer") from None
    if not low <= number <= high:
        raise InvalidAnnotation(key, value, f"expected {low}..{high}")
    return number


def _code(key: str, value: str, allowed: tuple[int, ...]) -> int:
    code = _int(key, value, 100, 599)
    if code not in allowed:
        raise InvalidAnnotation(key, value, f"expected one of {', '.join(map(str, allowed))}")
    return code


def parse_duration(key: str, value: str) -> str:
    value = value.strip()
    if not _DURATION_RE.fullmatch(value):
        raise InvalidAnnotation(key, value, "expected a duration such as 500ms, 30s or 5m")
    return value


def _headers(key: str, value: str) -> tuple[tuple[str, str], ...]:
    out = []
    for line in value.splitlines():
        line = line.strip()
        if not line:
            continue
        name, _, val = line.partition(" ")
        val = val.strip()
        if not _HEADER_NAME_RE.fullmatch(name) or not _HEADER_VALUE_RE.fullmatch(val):
            raise InvalidAnnotation(key, value, f"invalid header line {line!r}")
        out.append((name, val))
    if not out:
        raise InvalidAnnotation(key, value, "expected lines of 'Header-Name value'")
    return tuple(out)


def _networks(key: str, value: str) -> tuple[str, ...]:
    out = []
    for item in re.split(r"[\s,]+", value.strip()):
        if not item:
            continue
        try:
            out.append(str(ipaddress.ip_network(item, strict=False)))
        except ValueError:
            raise InvalidAnnotation(key, value, f"{item!r} is not an IP address or CIDR") from None
    if not out:
        raise InvalidAnnotation(key, value, "expected IP addresses or CIDRs")
    return tuple(out)


# Escapes Python's re accepts and HAProxy's PCRE refuses: a regex haproxy cannot compile
# would fail the whole render at the gate, not just its Ingress.
_NOT_PCRE_RE = re.compile(r"\\[NuU]")


def regex_problem(pattern: str) -> str | None:
    """Why HAProxy would refuse a regex (checked with Python's re, which is close to PCRE
    but accepts a few escapes PCRE does not), or None."""
    try:
        re.compile(pattern)
    except re.error as exc:
        return f"invalid regex ({exc})"
    if _NOT_PCRE_RE.search(pattern):
        return "the escapes \\N, \\u and \\U are not in PCRE"
    return None


def _path_rewrite(key: str, value: str) -> tuple[str, str]:
    parts = value.split()
    if len(parts) == 1:
        parts = ["(.*)", parts[0]]  # one value: every path becomes that path
    if len(parts) != 2 or not all(_REGEX_ARG_RE.fullmatch(p) for p in parts):
        raise InvalidAnnotation(key, value, "expected 'REGEX REPLACEMENT' or one path")
    problem = regex_problem(parts[0])
    if problem:
        raise InvalidAnnotation(key, value, problem)
    return parts[0], parts[1]


def _request_redirect(key: str, value: str) -> str:
    value = value.strip()
    if _URL_RE.fullmatch(value):
        return value.rstrip("/")
    if _HOST_RE.fullmatch(value.lower()):
        # Host only: keep the scheme the request came with.
        return "%[ssl_fc,iif(https,http)]://" + value.lower()
    raise InvalidAnnotation(key, value, "expected a host[:port] or an http(s):// URL")


def _set_host(key: str, value: str) -> str:
    value = value.strip().lower()
    if not _HOST_RE.fullmatch(value):
        raise InvalidAnnotation(key, value, "expected a host name")
    return value


def _secret_name(key: str, value: str) -> str:
    name = value.strip()
    if "/" in name:
        raise InvalidAnnotation(key, value, "the Secret must be in the object's own namespace")
    if len(name) > 253 or not _NAME_RE.fullmatch(name):
        raise InvalidAnnotation(key, value, "invalid Secret name")
    return name


def _realm(key: str, value: str) -> str:
    if not value.strip() or not _HEADER_VALUE_RE.fullmatch(value) or len(value) > 128:
        raise InvalidAnnotation(key, value, "expected printable text without quotes")
    return value.strip()


def parse_balance(key: str, value: str) -> str:
    words = value.split()
    if words and words[0] in BALANCE and len(words) == 1:
        return words[0]
    if words and words[0] in BALANCE_ARG and len(words) == 2 and _TOKEN_RE.fullmatch(words[1]):
        return " ".join(words)
    raise InvalidAnnotation(key, value, f"expected one of {', '.join(BALANCE)}")


def _token(key: str, value: str) -> str:
    value = value.strip()
    if not _TOKEN_RE.fullmatch(value):
        raise InvalidAnnotation(key, value, "expected letters, digits, '.', '_' or '-'")
    return value


def _check_path(key: str, value: str) -> str:
    value = value.strip()
    if not re.fullmatch(r"/[A-Za-z0-9._~!$&'()*+,;=:@%/?-]*", value):
        raise InvalidAnnotation(key, value, "expected a request path such as /healthz")
    return value


def _proto(key: str, value: str) -> str | None:
    value = value.strip().lower()
    if value not in ("h2", "h1", "http/1.1"):
        raise InvalidAnnotation(key, value, "expected h2 or h1")
    return "h2" if value == "h2" else None


def _snippet(key: str, value: str) -> tuple[str, ...]:
    lines = tuple(line.strip() for line in value.splitlines() if line.strip())
    for line in lines:
        if line.split()[0] in ("backend", "frontend", "listen", "global", "defaults", "server"):
            raise InvalidAnnotation(key, value, f"{line.split()[0]!r} is not allowed in a snippet")
    return lines


def _origins(key: str, value: str) -> tuple[str, ...]:
    items = tuple(v for v in re.split(r"[\s,]+", value.strip()) if v)
    for item in items:
        if item != "*" and not _URL_RE.fullmatch(item):
            raise InvalidAnnotation(key, value, f"{item!r} is not * or an http(s) origin")
    if not items:
        raise InvalidAnnotation(key, value, "expected * or origins")
    return items


def _listed(pattern: re.Pattern[str]) -> Callable[[str, str], str]:
    def parse(key: str, value: str) -> str:
        value = value.strip()
        if not pattern.fullmatch(value):
            raise InvalidAnnotation(key, value, "expected * or a comma-separated list")
        return re.sub(r"\s*,\s*", ", ", value)

    return parse


def _path_type(key: str, value: str) -> str:
    value = value.strip().lower()
    if value not in PATH_MATCHES:
        raise InvalidAnnotation(key, value, f"expected one of {', '.join(PATH_MATCHES)}")
    return value


def _seconds(key: str, value: str) -> int:
    value = value.strip()
    m = re.fullmatch(r"([0-9]{1,9})(s|m|h)?", value)
    if not m:
        raise InvalidAnnotation(key, value, "expected seconds, or a number with s, m or h")
    return int(m.group(1)) * {"s": 1, "m": 60, "h": 3600, None: 1}[m.group(2)]


# key (without the prefix) -> (field, parser). Route keys come from Ingresses only.
_ROUTE_KEYS: dict[str, tuple[str, Callable[[str, str], Any]]] = {
    "ssl-redirect": ("ssl_redirect", _bool),
    "ssl-passthrough": ("ssl_passthrough", _bool),
    "ssl-redirect-code": ("ssl_redirect_code", lambda k, v: _code(k, v, REDIRECT_CODES)),
    "ssl-redirect-port": ("ssl_redirect_port", lambda k, v: _int(k, v, 1, 65535)),
    "path-rewrite": ("path_rewrite", _path_rewrite),
    "request-redirect": ("request_redirect", _request_redirect),
    "request-redirect-code": ("request_redirect_code", lambda k, v: _code(k, v, REDIRECT_CODES)),
    "request-set-header": ("request_headers", _headers),
    "response-set-header": ("response_headers", _headers),
    "set-host": ("set_host", _set_host),
    "rate-limit-requests": ("rate_limit_requests", lambda k, v: _int(k, v, 1, 10**9)),
    "rate-limit-period": ("rate_limit_period", parse_duration),
    "rate-limit-status-code": ("rate_limit_status", lambda k, v: _int(k, v, 400, 599)),
    "allow-list": ("allow_list", _networks),
    "deny-list": ("deny_list", _networks),
    "auth-secret": ("auth_secret", _secret_name),
    "auth-realm": ("auth_realm", _realm),
    "hsts-max-age": ("hsts", lambda k, v: str(_seconds(k, v))),
    "path-type": ("path_type", _path_type),
}
_CORS_KEYS: dict[str, tuple[str, Callable[[str, str], Any]]] = {
    "cors-allow-origin": ("origins", _origins),
    "cors-allow-methods": ("methods", _listed(_METHODS_RE)),
    "cors-allow-headers": ("headers", _listed(_HEADERS_LIST_RE)),
    "cors-allow-credentials": ("credentials", _bool),
    "cors-max-age": ("max_age", _seconds),
}
_BACKEND_KEYS: dict[str, tuple[str, Callable[[str, str], Any]]] = {
    "load-balance": ("balance", parse_balance),
    "cookie-persistence": ("cookie", _token),
    "check": ("check", _bool),
    "check-http": ("check_http", _check_path),
    "check-interval": ("check_interval", parse_duration),
    "server-proto": ("server_proto", _proto),
    "server-ssl": ("server_ssl", _bool),
    "server-ca": ("server_ca", _secret_name),
    "maxconn": ("maxconn", lambda k, v: _int(k, v, 1, 10**6)),
    "backend-config-snippet": ("snippet", _snippet),
}
_HSTS_FLAGS = ("hsts-include-subdomains", "hsts-preload")
_OTHER_KEYS = {"auth-type", "cors-enable", *_HSTS_FLAGS}
KNOWN = frozenset(
    [*_ROUTE_KEYS, *_CORS_KEYS, *_BACKEND_KEYS, *_OTHER_KEYS, *GLOBAL_ONLY]
    + [f"timeout-{t}" for t in BACKEND_TIMEOUTS]
)


# haproxy-ingress.github.io/<name> -> the haproxy.org/<name> it means, value unchanged.
_HI_SAME = (
    "ssl-redirect", "ssl-redirect-code", "ssl-passthrough", "path-type", "auth-secret",
    "auth-realm", "cors-enable", "cors-allow-origin", "cors-allow-methods", "cors-allow-headers",
    "cors-allow-credentials", "cors-max-age", "hsts-max-age", "hsts-include-subdomains",
    "hsts-preload", "timeout-connect", "timeout-server", "timeout-queue", "timeout-tunnel",
    "timeout-http-request",
)  # fmt: skip
HI_RENAMES = {
    **{name: name for name in _HI_SAME},
    "allowlist-source-range": "allow-list",
    "whitelist-source-range": "allow-list",
    "denylist-source-range": "deny-list",
    "balance-algorithm": "load-balance",
    "maxconn-server": "maxconn",
    "health-check-interval": "check-interval",
    "health-check-uri": "check-http",
    "secure-backends": "server-ssl",
    "secure-verify-ca-secret": "server-ca",
    "config-backend": "backend-config-snippet",
}
# backend-protocol -> haproxy.org settings.
_HI_PROTOCOLS = {
    "h1": (("server-proto", "h1"),),
    "h2": (("server-proto", "h2"),),
    "h1-ssl": (("server-ssl", "true"),),
    "h2-ssl": (("server-ssl", "true"), ("server-proto", "h2")),
}
HI_DEFAULT_COOKIE = "INGRESSCOOKIE"
HI_HSTS_MAX_AGE = "15768000"
# Names translated by _haproxy_ingress beyond the renames; every other name is refused.
HI_SPECIAL = (
    "backend-protocol",
    "affinity",
    "session-cookie-name",
    "limit-rps",
    "hsts",
    "auth-type",
)
HAPROXY_INGRESS = frozenset([*HI_RENAMES, *HI_SPECIAL])
# Why _check_value refuses a haproxy-ingress.github.io/* name left untranslated.
_HI_WHY = {
    "backend-protocol": f"expected one of {', '.join(_HI_PROTOCOLS)}",
    "affinity": "only cookie is supported",
    "session-cookie-name": "needs affinity: cookie",
    "hsts": "expected true or false",
    "auth-type": "only basic is supported",
}


def _refuse(name: str, value: str) -> tuple[str, str]:
    """A pair that _check_value refuses, under the annotation's own name."""
    return HI_PREFIX + name, value


def _haproxy_ingress(given: dict[str, str]) -> list[tuple[str, str]]:
    """haproxy.org/* pairs for an object's haproxy-ingress.github.io/* annotations."""
    out: list[tuple[str, str]] = []
    for name, value in given.items():
        if name in HI_RENAMES:
            out.append((HI_RENAMES[name], value))
        elif name == "backend-protocol":
            pairs = _HI_PROTOCOLS.get(value.strip().lower() if isinstance(value, str) else "")
            out.extend(pairs or [_refuse(name, value)])
        elif name == "affinity":
            if value != "cookie":
                out.append(_refuse(name, value))
            else:
                out.append(
                    ("cookie-persistence", given.get("session-cookie-name", HI_DEFAULT_COOKIE))
                )
        elif name == "session-cookie-name":
            if "affinity" not in given:
                out.append(_refuse(name, value))
        elif name == "limit-rps":
            out += [("rate-limit-requests", value), ("rate-limit-period", "1s")]
        elif name == "hsts":
            if value not in ("true", "false"):
                out.append(_refuse(name, value))
            elif value == "true" and "hsts-max-age" not in given:
                out.append(("hsts-max-age", HI_HSTS_MAX_AGE))
        elif name == "auth-type":
            if value != "basic":
                out.append(_refuse(name, value))
        else:
            out.append(_refuse(name, value))
    if "auth-secret" in given:
        out.append(("auth-type", "basic-auth"))  # haproxy-ingress: the Secret enables it
    if given.get("hsts") == "false":
        out = [(k, v) for k, v in out if not k.startswith("hsts-")]
    return out


def ours(annotations: Any) -> tuple[tuple[str, str], ...]:
    """The `haproxy.org/*` annotations of an object (with its `haproxy-ingress.github.io/*`
    ones translated), sorted: the cache key of the parsers."""
    if not annotations or not isinstance(annotations, Mapping):
        return ()
    items = tuple(annotations.items())
    try:
        return _ours(items)
    except TypeError:  # an unhashable value (not a string): validation refuses it later
        return _ours.__wrapped__(items)


# Cached per annotation set: the same annotations come back render after render.
@functools.lru_cache(maxsize=1 << 13)
def _ours(items: tuple[tuple[Any, Any], ...]) -> tuple[tuple[str, str], ...]:
    found: dict[str, str] = {}
    theirs: dict[str, str] = {}
    for k, v in items:
        if not isinstance(k, str):
            continue
        if k.startswith(PREFIX):
            found[k[len(PREFIX) :]] = v
        elif k.startswith(HI_PREFIX):
            theirs[k[len(HI_PREFIX) :]] = v
    if theirs:
        for k, v in _haproxy_ingress(theirs):
            found.setdefault(k, v)  # haproxy.org/* wins
    return tuple(sorted(found.items()))


def _check_value(key: str, value: Any) -> str:
    if key.startswith(HI_PREFIX):
        name = key[len(HI_PREFIX) :]
        raise InvalidAnnotation(
            key, value, _HI_WHY.get(name, "not supported by haptic (docs/annotations.md)")
        )
    if not isinstance(value, str):
        raise InvalidAnnotation(PREFIX + key, value, "not a string")
    if key not in KNOWN:
        raise InvalidAnnotation(PREFIX + key, value, "unknown annotation")
    if key in GLOBAL_ONLY:
        raise InvalidAnnotation(PREFIX + key, value, GLOBAL_ONLY[key])
    return value


@functools.lru_cache(maxsize=1 << 12)
def route_policy(items: tuple[tuple[str, str], ...]) -> RoutePolicy:
    """The route policy of an Ingress's `haproxy.org/*` annotations (ours() of them)."""
    values: dict[str, Any] = {}
    cors_values: dict[str, Any] = {}
    given = dict(items)
    for key, raw in items:
        value = _check_value(key, raw)
        full = PREFIX + key
        if key in _ROUTE_KEYS:
            name, parse = _ROUTE_KEYS[key]
            values[name] = parse(full, value)
        elif key in _CORS_KEYS:
            name, parse = _CORS_KEYS[key]
            cors_values[name] = parse(full, value)
        elif key == "auth-type" and value.strip() != "basic-auth":
            raise InvalidAnnotation(full, value, "only basic-auth is supported")
        elif key in (*_HSTS_FLAGS, "cors-enable"):
            _bool(full, value)
    if "auth-type" in given and "auth-secret" not in given:
        raise InvalidAnnotation(PREFIX + "auth-type", given["auth-type"], "needs auth-secret")
    if "auth-secret" in given and "auth-type" not in given:
        raise InvalidAnnotation(PREFIX + "auth-secret", given["auth-secret"], "needs auth-type")
    if "auth-realm" in given and "auth-type" not in given:
        raise InvalidAnnotation(PREFIX + "auth-realm", given["auth-realm"], "needs auth-type")
    if _bool("cors-enable", given.get("cors-enable", "false")):
        values["cors"] = Cors(**cors_values)
    if "hsts" in values:
        flags = [
            flag
            for key, flag in zip(_HSTS_FLAGS, ("includeSubDomains", "preload"), strict=True)
            if _bool(key, given.get(key, "false"))
        ]
        values["hsts"] = "; ".join([f"max-age={values['hsts']}", *flags])
    return RoutePolicy(**values)


@functools.lru_cache(maxsize=1 << 12)
def backend_values(
    items: tuple[tuple[str, str], ...], allow_snippets: bool
) -> tuple[tuple[str, Any], ...]:
    """The backend settings an object's annotations make, as (field, value) pairs."""
    values: dict[str, Any] = {}
    timeouts: dict[str, str] = {}
    for key, raw in items:
        if key in _BACKEND_KEYS:
            value = _check_value(key, raw)
            name, parse = _BACKEND_KEYS[key]
            if name == "snippet" and not allow_snippets:
                why = "snippets are off (templateLibraries.ingress.allowSnippets)"
                raise InvalidAnnotation(PREFIX + key, "...", why)
            values[name] = parse(PREFIX + key, value)
        elif key.startswith("timeout-") and key[8:] in BACKEND_TIMEOUTS:
            timeouts[key[8:]] = parse_duration(PREFIX + key, _check_value(key, raw))
        elif key.startswith(HI_PREFIX):
            _check_value(key, raw)  # a haproxy-ingress.github.io/* name haptic refuses
    if timeouts:
        values["timeouts"] = tuple(sorted(timeouts.items()))
    return tuple(sorted(values.items()))


@functools.lru_cache(maxsize=1 << 12)
def service_values(
    items: tuple[tuple[str, str], ...], allow_snippets: bool
) -> tuple[tuple[str, Any], ...]:
    """backend_values for a Service's annotations, refusing every name that does not shape a
    backend: an unknown or frontend-only name as on an Ingress, and a route annotation
    (redirects, access control, rate limits, CORS...), which haptic reads from Ingresses
    only (docs/annotations.md "Where they apply"). Never dropped silently."""
    for key, raw in items:
        value = _check_value(key, raw)
        if key not in _BACKEND_KEYS and not key.startswith("timeout-"):
            why = "a route annotation: set it on the Ingress, haptic reads it from Ingresses only"
            raise InvalidAnnotation(PREFIX + key, value, why)
    return backend_values(items, allow_snippets)


@functools.lru_cache(maxsize=1 << 12)
def merge_backend(
    defaults: BackendPolicy,
    ingress: tuple[tuple[str, Any], ...],
    service: tuple[tuple[str, Any], ...],
) -> BackendPolicy:
    """Service beats Ingress beats the defaults; timeouts merge per timeout name."""
    merged = dict(ingress)
    merged.update(service)
    timeouts = dict(dict(ingress).get("timeouts", ()))
    timeouts.update(dict(service).get("timeouts", ()))
    if timeouts:
        merged["timeouts"] = tuple(sorted(timeouts.items()))
    return replace(defaults, **merged) if merged else defaults

"""The data side of the template libraries: Kubernetes objects -> routes, backends, certs.

The Jinja2 templates in templates/ turn these models into text; the extraction lives here
because it has to validate and isolate each watched object (a broken Ingress is skipped with
a warning, the rest still render) and because 3,000 Ingresses must render quickly. Pure.
"""

from __future__ import annotations

import base64
import binascii
import functools
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from contract import GATE_CONDITION
from controller.render import annotations as ann
from controller.render import model as m
from controller.render.model import RenderWarning

SERVICE_NAME_LABEL = "kubernetes.io/service-name"
INGRESS_CLASS_ANNOTATION = "kubernetes.io/ingress.class"
# Unused slots point here, disabled: a later endpoint fills the slot at runtime.
PLACEHOLDER_ADDRESS = "127.0.0.1"
PLACEHOLDER_PORT = 1
# Namespaces and Service names cannot contain "." so this never collides with ns_svc_port.
NOT_FOUND_BACKEND = "haptic.not-found"
PATH_TYPES = ("Exact", "Prefix", "ImplementationSpecific")
HOST_ANY = "*"

_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_HOST_RE = re.compile(rf"^(\*\.)?({_DNS_LABEL}\.)*{_DNS_LABEL}$")
_SERVICE_RE = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_PORT_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
# Characters RFC 3986 allows in a path; anything else (spaces, newlines, "#", quotes) would
# break a map file line or the config, so such an Ingress is refused rather than rendered.
# Every pattern here is used with fullmatch: "$" alone would accept a trailing newline.
_PATH_RE = re.compile(r"^/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*$")
# An ImplementationSpecific path may be a regex (haproxy.org/path-type: regex); it becomes a
# single-quoted HAProxy word, so no quotes, whitespace, '#' or control characters.
_REGEX_PATH_RE = re.compile(r"^\^?/[^\s\"'#\x00-\x1f\x7f]*$")


def is_map(value: Any) -> bool:
    # dict first: isinstance against the Mapping ABC is slow and objects are dicts.
    return type(value) is dict or isinstance(value, Mapping)


class InvalidObject(ValueError):
    """A watched object the library cannot use; the render skips it with a warning.

    `reason` is the RenderWarning reason code."""

    def __init__(self, message: str, reason: str = m.INVALID_OBJECT) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class LibrarySettings:
    """spec.templateLibraries resolved with the CRD defaults."""

    base: bool = True
    ingress: bool = True
    ingress_class: str | None = None
    kubernetes_backends: bool = True
    server_slots: int = 10
    readiness_gate: bool = False
    # templateLibraries.ingress: cluster defaults of the ingress library.
    default_backend: ServiceRef | None = None
    default_certificate: tuple[str, str] | None = None  # (namespace, Secret name)
    ssl_redirect: bool = False
    allow_snippets: bool = False
    debug_headers: bool = False
    access_logs: bool = True
    # templateLibraries.kubernetesBackends: what a backend gets without annotations.
    backend_defaults: ann.BackendPolicy = ann.DEFAULT_BACKEND

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> LibrarySettings:
        libs = spec.get("templateLibraries") or {}
        base = libs.get("base") or {}
        ing = libs.get("ingress") or {}
        kb = libs.get("kubernetesBackends") or {}
        gate = kb.get("podReadinessGate") or {}
        slots = kb.get("serverSlots", 10)
        if isinstance(slots, bool) or not isinstance(slots, int) or not 1 <= slots <= 1000:
            raise ValueError(f"templateLibraries.kubernetesBackends.serverSlots {slots!r}")
        return cls(
            base=bool(base.get("enabled", True)),
            ingress=bool(ing.get("enabled", True)),
            ingress_class=ing.get("ingressClassName") or None,
            kubernetes_backends=bool(kb.get("enabled", True)),
            server_slots=slots,
            readiness_gate=bool(gate.get("enabled", False)),
            default_backend=_default_backend_setting(ing.get("defaultBackend")),
            default_certificate=_secret_setting(ing.get("defaultCertificate")),
            ssl_redirect=ing.get("sslRedirect", False) is True,
            allow_snippets=ing.get("allowSnippets", False) is True,
            debug_headers=ing.get("debugHeaders", False) is True,
            access_logs=ing.get("accessLogs", True) is not False,
            backend_defaults=_backend_defaults(kb),
        )


def _default_backend_setting(value: Any) -> ServiceRef | None:
    if not value:
        return None
    if not is_map(value):
        raise ValueError("templateLibraries.ingress.defaultBackend is not an object")
    namespace = value.get("namespace")
    if not isinstance(namespace, str) or not _valid_label(namespace):
        raise ValueError(f"templateLibraries.ingress.defaultBackend.namespace {namespace!r}")
    try:
        return _service_ref(namespace, value, "templateLibraries.ingress.defaultBackend")
    except InvalidObject as exc:
        raise ValueError(str(exc)) from None


def _secret_setting(value: Any) -> tuple[str, str] | None:
    if not value:
        return None
    namespace, _, name = str(value).partition("/")
    if not (_valid_label(namespace) and _valid_name(name)):
        raise ValueError(f"templateLibraries.ingress.defaultCertificate {value!r}: not ns/name")
    return namespace, name


def _backend_defaults(kb: Mapping[str, Any]) -> ann.BackendPolicy:
    checks = kb.get("healthChecks") or {}
    values: dict[str, Any] = {}
    if "enabled" in checks:
        values["check"] = checks["enabled"] is True
    try:
        if "interval" in checks:
            values["check_interval"] = ann.parse_duration(
                "healthChecks.interval", str(checks["interval"])
            )
        if kb.get("balance"):
            values["balance"] = ann.parse_balance("balance", str(kb["balance"]))
    except ann.InvalidAnnotation as exc:
        raise ValueError(f"templateLibraries.kubernetesBackends: {exc}") from None
    return replace(ann.DEFAULT_BACKEND, **values) if values else ann.DEFAULT_BACKEND


@dataclass(frozen=True, order=True)
class ServiceRef:
    """A Service port an Ingress points at; one HAProxy backend each."""

    namespace: str
    service: str
    port: int | str

    @property
    def backend_name(self) -> str:
        return f"{self.namespace}_{self.service}_{self.port}"


@dataclass(frozen=True)
class Route:
    host_key: str
    path: str
    path_type: str
    backend: str
    source: str


@dataclass(frozen=True)
class Certificate:
    """A TLS Secret as one PEM file (certificate chain then key) and its SNI filters."""

    namespace: str
    secret: str
    content: bytes
    sni: tuple[str, ...]

    @property
    def path(self) -> str:
        return f"certs/{self.namespace}_{self.secret}.pem"


@dataclass(frozen=True)
class RouteBackend:
    """What routes point at: one HAProxy backend for a Service port and a set of policies.

    Routes of Ingresses without `haproxy.org/*` annotations share the Service port's backend
    (`ns_svc_port`); an annotated Ingress gets backends of its own (`ns_svc_port.<ingress>`),
    since its rules and settings must not leak onto other Ingresses' routes.
    """

    name: str
    ref: ServiceRef
    route: ann.RoutePolicy
    policy: ann.BackendPolicy
    source: str  # "namespace/name" of the first Ingress routing here
    userlist: str | None = None  # basic auth
    ca_file: str | None = None  # server-ca
    mode: str = "http"  # "tcp" for SSL passthrough


@dataclass(frozen=True)
class Userlist:
    name: str
    users: tuple[tuple[str, str], ...]  # (user, crypt(3) hash)


@dataclass(frozen=True)
class IngressModel:
    """What the ingress library renders: map entries (sorted), default backend, certs."""

    hosts: tuple[tuple[str, str], ...] = ()
    hosts_wildcard: tuple[tuple[str, str], ...] = ()
    path_exact: tuple[tuple[str, str], ...] = ()
    path_prefix_exact: tuple[tuple[str, str], ...] = ()
    path_prefix: tuple[tuple[str, str], ...] = ()
    # Regex routes (pattern over host key + path, backend), in order: first match wins.
    path_regex: tuple[tuple[str, str], ...] = ()
    path_regex_any: tuple[tuple[str, str], ...] = ()  # the same for rules without a host
    sni_passthrough: tuple[tuple[str, str], ...] = ()  # SNI host -> TCP backend
    default_backend: str | None = None
    certificates: tuple[Certificate, ...] = ()
    default_certificate: Certificate | None = None
    services: tuple[RouteBackend, ...] = ()
    routes: tuple[Route, ...] = ()
    userlists: tuple[Userlist, ...] = ()
    ca_files: tuple[tuple[str, bytes], ...] = ()  # (path, PEM)
    served: tuple[str, ...] = ()  # "ns/name" of the Ingresses with a route or default
    # (namespace, name) of every Secret the model looked up, found or not.
    secrets_read: frozenset[tuple[str, str]] = frozenset()


class Server(NamedTuple):
    # A NamedTuple rather than a frozen dataclass: 30,000 of these per render at 3,000
    # Ingresses, and tuple construction is several times cheaper.
    name: str
    address: str
    port: int
    weight: int
    enabled: bool


def server_params(server: Server) -> str:
    """`ADDR:PORT weight W[ disabled]`: the runtime-changeable part of a server line.

    A template filter (`{{ s | server_params }}`) so the libraries and the plan parser
    (controller.render.plan) agree on one textual form.
    """
    params = f"{server.address}:{server.port} weight {server.weight}"
    return params if server.enabled else params + " disabled"


@functools.lru_cache(maxsize=1 << 12)
def _placeholder(index: int) -> Server:
    return Server(f"SRV_{index}", PLACEHOLDER_ADDRESS, PLACEHOLDER_PORT, 1, False)


@dataclass(frozen=True)
class Backend:
    name: str
    namespace: str
    service: str
    port: int | str
    servers: tuple[Server, ...]
    policy: ann.BackendPolicy = ann.DEFAULT_BACKEND
    route: ann.RoutePolicy | None = None  # None: no route rules to render
    server_options: str = ""  # the default-server line's options
    userlist: str | None = None
    mode: str = "http"


KINDS = {
    "ingresses": "Ingress",
    "services": "Service",
    "endpointslices": "EndpointSlice",
    "secrets": "Secret",
    "pods": "Pod",
    "ingressclasses": "IngressClass",
}


def warn(
    warnings: list[RenderWarning], kind: str, key: tuple[str, str], reason: str, message: str
) -> None:
    """Record one skipped or degraded object (RenderWarning)."""
    warnings.append(RenderWarning(kind, key[0], key[1], reason, message))


def usable_objects(
    objs: Iterable[Any], kind: str, warnings: list[RenderWarning]
) -> list[Mapping[str, Any]]:
    """The objects with an object `metadata` and a string name; the rest skipped (warned).

    Everything after this may rely on obj_key working.
    """
    out = []
    for i, obj in enumerate(objs):
        meta = obj.get("metadata") if is_map(obj) else None
        if is_map(meta) and isinstance(meta.get("name"), str):
            out.append(obj)
        else:
            warn(
                warnings,
                KINDS.get(kind, kind),
                ("", f"{kind}[{i}]"),
                m.INVALID_OBJECT,
                "no metadata.name; skipped",
            )
    return out


def obj_key(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return (str(meta.get("namespace") or ""), str(meta.get("name") or ""))


def ingress_order(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    # Oldest first decides conflicts, as ingress controllers usually do; names break ties.
    meta = obj.get("metadata") or {}
    return (str(meta.get("creationTimestamp") or ""), *obj_key(obj))


def _service_ref(namespace: str, backend: Any, where: str) -> ServiceRef:
    if not is_map(backend):
        raise InvalidObject(f"{where}: backend is not an object")
    if "resource" in backend:
        raise InvalidObject(f"{where}: resource backends are not supported", m.UNSUPPORTED_BACKEND)
    svc = backend.get("service")
    if not is_map(svc):
        raise InvalidObject(f"{where}: backend has no service")
    name = svc.get("name")
    if not isinstance(name, str) or len(name) > 63 or not _valid_service(name):
        raise InvalidObject(f"{where}: invalid service name {name!r}")
    port = svc.get("port")
    if not is_map(port):
        raise InvalidObject(f"{where}: service {name} has no port")
    number, pname = port.get("number"), port.get("name")
    if number is not None:
        if isinstance(number, bool) or not isinstance(number, int) or not 1 <= number <= 65535:
            raise InvalidObject(f"{where}: invalid port number {number!r}")
        return ServiceRef(namespace, name, number)
    if isinstance(pname, str) and len(pname) <= 15 and _valid_label(pname):
        return ServiceRef(namespace, name, pname)
    raise InvalidObject(f"{where}: invalid service port {dict(port)!r}")


@functools.lru_cache(maxsize=1 << 14)
def _valid_host(raw: str) -> str | None:
    # Cached: the same hosts come back render after render.
    host = raw.lower()
    return host if len(host) <= 253 and _HOST_RE.fullmatch(host) else None


@functools.lru_cache(maxsize=1 << 14)
def valid_path(path: str) -> bool:
    return len(path) <= 1024 and _PATH_RE.fullmatch(path) is not None


def valid_regex_path(path: str) -> bool:
    """Whether an ImplementationSpecific path can be rendered as a regex route."""
    return len(path) <= 1024 and _REGEX_PATH_RE.fullmatch(path) is not None


# Cached per string (the same names come back render after render). One function per
# pattern: keying a cache on a compiled pattern would hash its whole program every call.
@functools.lru_cache(maxsize=1 << 14)
def _valid_service(value: str) -> bool:
    return _SERVICE_RE.fullmatch(value) is not None


@functools.lru_cache(maxsize=1 << 14)
def _valid_label(value: str) -> bool:
    return _PORT_NAME_RE.fullmatch(value) is not None


@functools.lru_cache(maxsize=1 << 14)
def _valid_name(value: str) -> bool:
    return _NAME_RE.fullmatch(value) is not None


def _host(raw: Any, where: str) -> str:
    if raw is None or raw == "":
        return HOST_ANY
    if not isinstance(raw, str):
        raise InvalidObject(f"{where}: host is not a string")
    host = _valid_host(raw)
    if host is None:
        raise InvalidObject(f"{where}: invalid host {raw!r}")
    return host


@dataclass(frozen=True)
class _ParsedIngress:
    source: str
    routes: tuple[tuple[str, str, str, ServiceRef], ...]
    default: ServiceRef | None
    tls: tuple[tuple[str, tuple[str, ...]], ...]


def parse_ingress(obj: Mapping[str, Any]) -> _ParsedIngress:
    """Validate one networking.k8s.io/v1 Ingress completely; raise InvalidObject if unusable.

    All or nothing per Ingress: half of an Ingress would route some of its paths elsewhere.
    """
    namespace, name = obj_key(obj)
    if not (name and namespace and _valid_name(name) and _valid_label(namespace)):
        raise InvalidObject("invalid metadata")
    source = f"{namespace}/{name}"
    spec = obj.get("spec") or {}
    if not is_map(spec):
        raise InvalidObject("spec is not an object")
    routes: list[tuple[str, str, str, ServiceRef]] = []
    rules = spec.get("rules") or []
    if not isinstance(rules, list):
        raise InvalidObject("rules is not a list")
    for i, rule in enumerate(rules):
        where = f"rules[{i}]"
        if not is_map(rule):
            raise InvalidObject(f"{where}: not an object")
        host = _host(rule.get("host"), where)
        http = rule.get("http") or {}
        paths = http.get("paths") if is_map(http) else None
        if not isinstance(paths, list):
            if http:
                raise InvalidObject(f"{where}: http.paths is not a list")
            continue
        for j, p in enumerate(paths):
            pwhere = f"{where}.http.paths[{j}]"
            if not is_map(p):
                raise InvalidObject(f"{pwhere}: not an object")
            ptype = p.get("pathType")
            if ptype not in PATH_TYPES:
                raise InvalidObject(f"{pwhere}: invalid pathType {ptype!r}")
            path = p.get("path")
            if path is None and ptype == "ImplementationSpecific":
                path = "/"
            # ImplementationSpecific paths that are not plain paths are checked against
            # the Ingress's haproxy.org/path-type once its annotations are read.
            plain = isinstance(path, str) and valid_path(path)
            lax = ptype == "ImplementationSpecific" and isinstance(path, str)
            if not plain and not (lax and valid_regex_path(path)):
                raise InvalidObject(f"{pwhere}: invalid path {path!r}")
            routes.append((host, path, ptype, _service_ref(namespace, p.get("backend"), pwhere)))
    default = None
    if spec.get("defaultBackend") is not None:
        default = _service_ref(namespace, spec["defaultBackend"], "defaultBackend")
    tls: list[tuple[str, tuple[str, ...]]] = []
    tls_list = spec.get("tls") or []
    if not isinstance(tls_list, list):
        raise InvalidObject("tls is not a list")
    for i, entry in enumerate(tls_list):
        where = f"tls[{i}]"
        if not is_map(entry):
            raise InvalidObject(f"{where}: not an object")
        secret = entry.get("secretName")
        if not isinstance(secret, str) or not _valid_name(secret):
            raise InvalidObject(f"{where}: invalid secretName {secret!r}")
        hosts = entry.get("hosts") or []
        if not isinstance(hosts, list):
            raise InvalidObject(f"{where}: hosts is not a list")
        parsed = tuple(sorted({_host(h, where) for h in hosts} - {HOST_ANY}))
        tls.append((secret, parsed))
    return _ParsedIngress(source, tuple(routes), default, tuple(tls))


def ingress_class_of(obj: Mapping[str, Any]) -> str | None:
    spec = obj.get("spec") or {}
    cls = spec.get("ingressClassName") if is_map(spec) else None
    if cls:
        return str(cls)
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    return annotations.get(INGRESS_CLASS_ANNOTATION) or None


def tls_certificate(secret: Mapping[str, Any] | None, where: str) -> bytes:
    """PEM bytes (chain then key) of a kubernetes.io/tls Secret, or InvalidObject.

    Only a structural check: haproxy -c in the render gate is the real validation, but a
    missing or undecodable Secret must not take the whole configuration down with it.
    """
    if secret is None:
        raise InvalidObject(f"{where}: secret not found", m.SECRET_NOT_FOUND)
    if secret.get("type", "kubernetes.io/tls") != "kubernetes.io/tls":
        raise InvalidObject(
            f"{where}: secret type {secret.get('type')!r} is not kubernetes.io/tls",
            m.INVALID_SECRET,
        )
    data = secret.get("data") or {}
    try:
        crt = base64.b64decode(data["tls.crt"], validate=True)
        key = base64.b64decode(data["tls.key"], validate=True)
    except (KeyError, TypeError, binascii.Error) as exc:
        raise InvalidObject(
            f"{where}: tls.crt/tls.key missing or not base64", m.INVALID_SECRET
        ) from exc
    if b"-----BEGIN CERTIFICATE-----" not in crt or b"PRIVATE KEY-----" not in key:
        raise InvalidObject(
            f"{where}: tls.crt/tls.key are not PEM certificate and key", m.INVALID_SECRET
        )
    return crt.rstrip(b"\n") + b"\n" + key.rstrip(b"\n") + b"\n"


def _condition_true(obj: Mapping[str, Any], ctype: str) -> bool:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if is_map(cond) and cond.get("type") == ctype:
            return cond.get("status") == "True"
    return False


def holds_gate(pod: Mapping[str, Any] | None) -> bool:
    """Whether a pod lists the load-balancer-ready condition under spec.readinessGates."""
    try:
        gates = ((pod or {}).get("spec") or {}).get("readinessGates") or []
        return any(is_map(g) and g.get("conditionType") == GATE_CONDITION for g in gates)
    except (AttributeError, TypeError):
        return False  # a malformed pod never holds the gate


def gate_admits(pod: Mapping[str, Any] | None) -> bool:
    """ADR-0034: a not-ready endpoint renders enabled when its pod holds the readiness gate
    and its containers are ready; otherwise the gate would wait for routing and routing for
    Ready. A deleted pod never qualifies."""
    try:
        if not pod or (pod.get("metadata") or {}).get("deletionTimestamp"):
            return False
        return holds_gate(pod) and _condition_true(pod, "ContainersReady")
    except (AttributeError, TypeError):
        return False


@dataclass(frozen=True)
class _Endpoint:
    address: str
    port: int
    enabled: bool
    sort_key: tuple[int, ...]
    gated_pod: str | None = None  # "ns/name" of a pod holding the gate, when enabled


def _slice_endpoints(
    sl: Mapping[str, Any],
    port_name: str,
    pods: Mapping[tuple[str, str], Mapping[str, Any]],
    gate: bool,
) -> list[_Endpoint]:
    if sl.get("addressType", "IPv4") != "IPv4":
        return []  # the other family of a dual-stack Service; FQDN slices are not routed
    port = None
    for p in sl.get("ports") or []:
        if (p.get("name") or "") == port_name and p.get("port") is not None:
            port = p["port"]
            break
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        return []
    namespace = obj_key(sl)[0]
    out = []
    for ep in sl.get("endpoints") or []:
        addresses = ep.get("addresses") or []
        if not addresses:
            continue
        address = addresses[0]  # consumers use the first address (EndpointSlice API)
        key = _ipv4_key(address)  # raises ValueError for anything but a dotted-quad IPv4
        conditions = ep.get("conditions") or {}
        ready = conditions.get("ready")
        enabled = ready is None or ready is True  # nil means ready (EndpointSlice API)
        gated_pod = None
        ref = ep.get("targetRef") or {}
        if gate and ref.get("kind", "Pod") == "Pod" and ref.get("name"):
            pod_key = (ref.get("namespace") or namespace, ref["name"])
            pod = pods.get(pod_key)
            if not enabled and conditions.get("terminating") is not True:
                enabled = gate_admits(pod)
            if enabled and holds_gate(pod):
                gated_pod = "/".join(pod_key)
        out.append(_Endpoint(address, port, enabled, key, gated_pod))
    return out


_IPV4_RE = re.compile(
    r"^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$"
)


@functools.lru_cache(maxsize=1 << 16)
def _ipv4_key(address: str) -> tuple[int, ...]:
    # ipaddress.IPv4Address is correct but slow for tens of thousands of endpoints per render;
    # the same addresses come back render after render, hence the cache.
    if not isinstance(address, str) or not _IPV4_RE.fullmatch(address):
        raise ValueError(f"invalid IPv4 address {address!r}")
    return tuple(int(p) for p in address.split("."))


def slot_count(endpoints: int, slots: int) -> int:
    """Servers a backend renders: whole blocks of `slots`, at least one block."""
    return max(1, math.ceil(endpoints / slots)) * slots


_PLACEHOLDER_KEY = (PLACEHOLDER_ADDRESS, PLACEHOLDER_PORT)


@functools.lru_cache(maxsize=1 << 12)
def _slot_index(name: str) -> int:
    """0 for SRV_1, ...; -1 for a name that is not a library slot."""
    if name.startswith("SRV_") and name[4:].isdigit():
        return int(name[4:]) - 1
    return -1


def _assign_slots(
    ordered: Sequence[tuple[str, int]],
    total: int,
    previous: Mapping[str, Mapping[str, Any]] | None,
) -> list[tuple[str, int] | None]:
    """Endpoint per slot (index 0 is SRV_1), None for an unused slot.

    Endpoints that held a slot in the previous plan keep it; the others fill the free slots
    lowest first in address order. Without a previous plan that is plain address order.
    """
    slots: list[tuple[str, int] | None] = [None] * total
    rest = list(ordered)
    if previous and is_map(previous):
        held: dict[tuple[str, int], int] = {}
        for name, server in previous.items():
            index = _slot_index(name)
            if not 0 <= index < total:
                continue
            try:
                key = (server["address"], server["port"])
            except (TypeError, KeyError):
                continue  # not a plan we wrote; ignore the slot
            if key != _PLACEHOLDER_KEY:
                held.setdefault(key, index)
        rest = []
        for key in ordered:
            index = held.get(key)
            if index is not None and slots[index] is None:
                slots[index] = key
            else:
                rest.append(key)
    free = (i for i, key in enumerate(slots) if key is None)
    for key, index in zip(rest, free, strict=False):
        slots[index] = key
    return slots


def _service_port_name(
    svc: Mapping[str, Any] | None, spec: RouteBackend, warnings: list[RenderWarning]
) -> str | None:
    """Name ("" when unnamed) of the Service port a route means, or None (warned on the
    Ingress that routes there: that is the object whose owner can fix it)."""
    ref = spec.ref
    owner = "Ingress" if spec.source else "Service"
    ingress = tuple(spec.source.split("/", 1)) if spec.source else (ref.namespace, ref.service)
    svc_name = f"{ref.namespace}/{ref.service}"
    if svc is None:
        warn(
            warnings,
            owner,
            ingress,
            m.SERVICE_NOT_FOUND,
            f"service {svc_name} not found: backend {spec.name} has no servers",
        )
        return None
    try:
        svc_spec = svc.get("spec") or {}
        if svc_spec.get("type") == "ExternalName":
            warn(
                warnings,
                owner,
                ingress,
                m.UNSUPPORTED_SERVICE,
                f"service {svc_name}: ExternalName services are not supported",
            )
            return None
        for p in svc_spec.get("ports") or []:
            if (isinstance(ref.port, int) and p.get("port") == ref.port) or (
                isinstance(ref.port, str) and p.get("name") == ref.port
            ):
                return str(p.get("name") or "")
    except (AttributeError, TypeError) as exc:
        warn(
            warnings,
            "Service",
            (ref.namespace, ref.service),
            m.INVALID_OBJECT,
            f"malformed ({exc})",
        )
        return None
    warn(
        warnings,
        owner,
        ingress,
        m.SERVICE_PORT_NOT_FOUND,
        f"service {svc_name} has no port {ref.port}",
    )
    return None


def _slice_index(
    endpointslices: Iterable[Mapping[str, Any]], warnings: list[RenderWarning]
) -> dict[tuple[str, str], list[Mapping[str, Any]]]:
    index: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for sl in endpointslices:
        try:
            owner = slice_owner(sl)
        except AttributeError:
            warn(
                warnings,
                "EndpointSlice",
                obj_key(sl),
                m.INVALID_ENDPOINTSLICE,
                "malformed labels; skipped",
            )
            continue
        if owner is not None:
            index.setdefault(owner, []).append(sl)
    return index


def slice_owner(sl: Mapping[str, Any]) -> tuple[str, str] | None:
    """(namespace, Service name) an EndpointSlice belongs to by its service-name label, or
    None without one. Raises AttributeError for malformed labels."""
    owner = ((sl.get("metadata") or {}).get("labels") or {}).get(SERVICE_NAME_LABEL)
    if isinstance(owner, str) and owner:
        return obj_key(sl)[0], owner
    return None


def _endpoints(
    spec: RouteBackend,
    svc: Mapping[str, Any] | None,
    slices: Sequence[Mapping[str, Any]],
    pods: Mapping[tuple[str, str], Mapping[str, Any]],
    settings: LibrarySettings,
    warnings: list[RenderWarning],
    gated_pods: set[str] | None,
) -> tuple[list[tuple[str, int]], dict[tuple[str, int], bool]]:
    """The endpoints of a backend's Service port in address order, and which are enabled."""
    endpoints: dict[tuple[str, int], bool] = {}
    sort_keys: dict[tuple[str, int], tuple[int, ...]] = {}
    port_name = _service_port_name(svc, spec, warnings)
    if port_name is not None:
        for sl in sorted(slices, key=obj_key):
            try:
                found = _slice_endpoints(sl, port_name, pods, settings.readiness_gate)
            except (AttributeError, TypeError, KeyError, ValueError) as exc:
                warn(
                    warnings,
                    "EndpointSlice",
                    obj_key(sl),
                    m.INVALID_ENDPOINTSLICE,
                    f"skipped for backend {spec.name} ({exc})",
                )
                continue
            for ep in found:
                key = (ep.address, ep.port)
                endpoints[key] = endpoints.get(key, False) or ep.enabled
                sort_keys[key] = ep.sort_key
                if ep.gated_pod is not None and gated_pods is not None:
                    gated_pods.add(ep.gated_pod)
    return sorted(endpoints, key=lambda k: (sort_keys[k], k[1])), endpoints


def backend_servers(
    ordered: Sequence[tuple[str, int]],
    endpoints: Mapping[tuple[str, int], bool],
    server_slots: int,
    previous: Mapping[str, Mapping[str, Any]] | None,
) -> tuple[Server, ...]:
    """A backend's servers: its endpoints in slots (kept from `previous`, the backend's
    servers in the last plan), unused slots as disabled placeholders."""
    total = slot_count(len(ordered), server_slots)
    servers = []
    for i, key in enumerate(_assign_slots(ordered, total, previous), start=1):
        if key is None:
            servers.append(_placeholder(i))
        else:
            servers.append(Server(f"SRV_{i}", key[0], key[1], 1, endpoints[key]))
    return tuple(servers)


def service_endpoints(
    spec: RouteBackend,
    services: Mapping[tuple[str, str], Mapping[str, Any]],
    slices: Mapping[tuple[str, str], Sequence[Mapping[str, Any]]],
    pods: Mapping[tuple[str, str], Mapping[str, Any]],
    settings: LibrarySettings,
    gated_pods: set[str] | None = None,
) -> tuple[list[tuple[str, int]], dict[tuple[str, int], bool], tuple[RenderWarning, ...]]:
    """The endpoints of `spec`'s Service port (address order), which are enabled, and the
    warnings about them: the part of a backend an EndpointSlice change touches
    (controller.render.incremental recomputes exactly this)."""
    ref = spec.ref
    warnings: list[RenderWarning] = []
    key = (ref.namespace, ref.service)
    ordered, endpoints = _endpoints(
        spec, services.get(key), slices.get(key, ()), pods, settings, warnings, gated_pods
    )
    return ordered, endpoints, tuple(warnings)


def build_backends(
    specs: Sequence[RouteBackend],
    services: Iterable[Mapping[str, Any]],
    endpointslices: Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]],
    settings: LibrarySettings,
    warnings: list[RenderWarning],
    previous: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None,
    gated_pods: set[str] | None = None,
    ref_warnings: dict[ServiceRef, tuple[RenderWarning, ...]] | None = None,
) -> tuple[Backend, ...]:
    """One backend per route backend, servers from its Service's EndpointSlices in slots.

    `previous` is the backends part of the last render's plan: an endpoint keeps the slot
    it had, so a change touches only the slots of the endpoints that changed. With the
    readiness gate on, `gated_pods` collects the pods holding the gate whose endpoints render
    enabled: once every HAProxy pod runs this render, they may get the condition.
    `ref_warnings`, when given, receives the warnings of each Service port in the order they
    were added to `warnings` (the incremental path replaces one port's share).
    """
    svc_index = {obj_key(s): s for s in services}
    slice_index = _slice_index(endpointslices, warnings)
    pod_index = {obj_key(p): p for p in pods} if settings.readiness_gate else {}
    # Backends of one Service port share its endpoints: compute them once.
    found: dict[ServiceRef, tuple[list[tuple[str, int]], dict[tuple[str, int], bool]]] = {}
    backends = []
    for spec in sorted(specs, key=lambda s: s.name):
        ref = spec.ref
        if ref not in found:
            ordered, endpoints, ref_warned = service_endpoints(
                spec, svc_index, slice_index, pod_index, settings, gated_pods
            )
            found[ref] = ordered, endpoints
            warnings.extend(ref_warned)
            if ref_warnings is not None:
                ref_warnings[ref] = ref_warned
        ordered, endpoints = found[ref]
        backends.append(
            Backend(
                spec.name,
                ref.namespace,
                ref.service,
                ref.port,
                backend_servers(
                    ordered, endpoints, settings.server_slots, (previous or {}).get(spec.name)
                ),
                spec.policy,
                None if spec.route == ann.DEFAULT_ROUTE or spec.mode == "tcp" else spec.route,
                _server_options(spec.policy, spec.ca_file),
                spec.userlist,
                spec.mode,
            )
        )
    return tuple(backends)


@functools.lru_cache(maxsize=1 << 10)
def _server_options(policy: ann.BackendPolicy, ca_file: str | None) -> str:
    return policy.server_options(ca_file)

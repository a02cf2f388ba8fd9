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
from dataclasses import dataclass
from typing import Any, NamedTuple

GATE_CONDITION = "haproxy-haptic.org/load-balancer-ready"
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


def _is_map(value: Any) -> bool:
    # dict first: isinstance against the Mapping ABC is slow and objects are dicts.
    return type(value) is dict or isinstance(value, Mapping)


class InvalidObject(ValueError):
    """A watched object the library cannot use; the render skips it with a warning."""


@dataclass(frozen=True)
class LibrarySettings:
    """spec.templateLibraries resolved with the CRD defaults."""

    base: bool = True
    ingress: bool = True
    ingress_class: str | None = None
    kubernetes_backends: bool = True
    server_slots: int = 10
    readiness_gate: bool = False

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
        )


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
class IngressModel:
    """What the ingress library renders: map entries (sorted), default backend, certs."""

    hosts: tuple[tuple[str, str], ...] = ()
    hosts_wildcard: tuple[tuple[str, str], ...] = ()
    path_exact: tuple[tuple[str, str], ...] = ()
    path_prefix_exact: tuple[tuple[str, str], ...] = ()
    path_prefix: tuple[tuple[str, str], ...] = ()
    default_backend: str | None = None
    certificates: tuple[Certificate, ...] = ()
    services: tuple[ServiceRef, ...] = ()
    routes: tuple[Route, ...] = ()


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


def usable_objects(objs: Iterable[Any], kind: str, warnings: list[str]) -> list[Mapping[str, Any]]:
    """The objects with an object `metadata` and a string name; the rest skipped (warned).

    Everything after this may rely on obj_key working.
    """
    out = []
    for i, obj in enumerate(objs):
        meta = obj.get("metadata") if _is_map(obj) else None
        if _is_map(meta) and isinstance(meta.get("name"), str):
            out.append(obj)
        else:
            warnings.append(f"{kind}[{i}]: no metadata.name; skipped")
    return out


def obj_key(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return (str(meta.get("namespace") or ""), str(meta.get("name") or ""))


def _ingress_order(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    # Oldest first decides conflicts, as ingress controllers usually do; names break ties.
    meta = obj.get("metadata") or {}
    return (str(meta.get("creationTimestamp") or ""), *obj_key(obj))


def _service_ref(namespace: str, backend: Any, where: str) -> ServiceRef:
    if not _is_map(backend):
        raise InvalidObject(f"{where}: backend is not an object")
    if "resource" in backend:
        raise InvalidObject(f"{where}: resource backends are not supported")
    svc = backend.get("service")
    if not _is_map(svc):
        raise InvalidObject(f"{where}: backend has no service")
    name = svc.get("name")
    if not isinstance(name, str) or len(name) > 63 or not _valid_service(name):
        raise InvalidObject(f"{where}: invalid service name {name!r}")
    port = svc.get("port")
    if not _is_map(port):
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
def _valid_path(path: str) -> bool:
    return len(path) <= 1024 and _PATH_RE.fullmatch(path) is not None


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
        raise InvalidObject(f"ingress {namespace}/{name}: invalid metadata")
    source = f"{namespace}/{name}"
    spec = obj.get("spec") or {}
    if not _is_map(spec):
        raise InvalidObject(f"ingress {source}: spec is not an object")
    routes: list[tuple[str, str, str, ServiceRef]] = []
    rules = spec.get("rules") or []
    if not isinstance(rules, list):
        raise InvalidObject(f"ingress {source}: rules is not a list")
    for i, rule in enumerate(rules):
        where = f"ingress {source} rules[{i}]"
        if not _is_map(rule):
            raise InvalidObject(f"{where}: not an object")
        host = _host(rule.get("host"), where)
        http = rule.get("http") or {}
        paths = http.get("paths") if _is_map(http) else None
        if not isinstance(paths, list):
            if http:
                raise InvalidObject(f"{where}: http.paths is not a list")
            continue
        for j, p in enumerate(paths):
            pwhere = f"{where}.http.paths[{j}]"
            if not _is_map(p):
                raise InvalidObject(f"{pwhere}: not an object")
            ptype = p.get("pathType")
            if ptype not in PATH_TYPES:
                raise InvalidObject(f"{pwhere}: invalid pathType {ptype!r}")
            path = p.get("path")
            if path is None and ptype == "ImplementationSpecific":
                path = "/"
            if not isinstance(path, str) or not _valid_path(path):
                raise InvalidObject(f"{pwhere}: invalid path {path!r}")
            routes.append((host, path, ptype, _service_ref(namespace, p.get("backend"), pwhere)))
    default = None
    if spec.get("defaultBackend") is not None:
        default = _service_ref(
            namespace, spec["defaultBackend"], f"ingress {source} defaultBackend"
        )
    tls: list[tuple[str, tuple[str, ...]]] = []
    tls_list = spec.get("tls") or []
    if not isinstance(tls_list, list):
        raise InvalidObject(f"ingress {source}: tls is not a list")
    for i, entry in enumerate(tls_list):
        where = f"ingress {source} tls[{i}]"
        if not _is_map(entry):
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
    cls = spec.get("ingressClassName") if _is_map(spec) else None
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
        raise InvalidObject(f"{where}: secret not found")
    if secret.get("type", "kubernetes.io/tls") != "kubernetes.io/tls":
        raise InvalidObject(f"{where}: secret type {secret.get('type')!r} is not kubernetes.io/tls")
    data = secret.get("data") or {}
    try:
        crt = base64.b64decode(data["tls.crt"], validate=True)
        key = base64.b64decode(data["tls.key"], validate=True)
    except (KeyError, TypeError, binascii.Error) as exc:
        raise InvalidObject(f"{where}: tls.crt/tls.key missing or not base64") from exc
    if b"-----BEGIN CERTIFICATE-----" not in crt or b"PRIVATE KEY-----" not in key:
        raise InvalidObject(f"{where}: tls.crt/tls.key are not PEM certificate and key")
    return crt.rstrip(b"\n") + b"\n" + key.rstrip(b"\n") + b"\n"


def _wildcard_regex(host: str) -> str:
    # "*.example.com" matches exactly one label in front, as the Ingress API defines.
    return "^[^.]+" + re.escape(host[1:]) + "$"


def build_ingress_model(
    ingresses: Iterable[Mapping[str, Any]],
    secrets: Iterable[Mapping[str, Any]],
    settings: LibrarySettings,
    warnings: list[str],
) -> IngressModel:
    """Routes, map entries, default backend and certificates from every usable Ingress."""
    secret_index = {obj_key(s): s for s in secrets}
    exact: dict[str, tuple[str, str]] = {}
    prefix_exact: dict[str, tuple[str, str]] = {}
    prefix: dict[str, tuple[str, str]] = {}
    hosts: set[str] = set()
    refs: set[ServiceRef] = set()
    routes: list[Route] = []
    default: tuple[str, str] | None = None
    certs: dict[tuple[str, str], tuple[bytes, set[str]]] = {}

    def claim(table: dict[str, tuple[str, str]], key: str, backend: str, source: str) -> bool:
        held = table.get(key)
        if held is None:
            table[key] = (backend, source)
            return True
        if held[0] != backend:
            warnings.append(f"ingress {source}: route {key} already taken by ingress {held[1]}")
        return False

    for obj in sorted(ingresses, key=_ingress_order):
        try:
            if settings.ingress_class and ingress_class_of(obj) != settings.ingress_class:
                continue
            parsed = parse_ingress(obj)
            namespace = obj_key(obj)[0]
            tls_files = []
            for secret_name, tls_hosts in parsed.tls:
                where = f"ingress {parsed.source} tls secret {secret_name}"
                try:
                    pem = tls_certificate(secret_index.get((namespace, secret_name)), where)
                except InvalidObject as exc:
                    warnings.append(f"{exc}; TLS for it skipped")
                    continue
                tls_files.append(((namespace, secret_name), pem, tls_hosts))
        except InvalidObject as exc:
            warnings.append(f"{exc}; ingress skipped")
            continue
        except (AttributeError, TypeError, KeyError, ValueError) as exc:
            warnings.append(f"ingress {'/'.join(obj_key(obj))}: malformed ({exc}); skipped")
            continue
        for host, path, ptype, ref in parsed.routes:
            backend = ref.backend_name
            used = False
            if ptype == "Exact":
                used = claim(exact, host + path, backend, parsed.source)
            else:
                trimmed = path.rstrip("/")
                if trimmed:
                    used = claim(prefix_exact, host + trimmed, backend, parsed.source) or used
                used = claim(prefix, host + trimmed + "/", backend, parsed.source) or used
            if used:
                refs.add(ref)
                hosts.add(host)
                routes.append(Route(host, path, ptype, backend, parsed.source))
        if parsed.default is not None:
            if default is None:
                default = (parsed.default.backend_name, parsed.source)
                refs.add(parsed.default)
            elif default[0] != parsed.default.backend_name:
                warnings.append(
                    f"ingress {parsed.source}: defaultBackend ignored, "
                    f"ingress {default[1]} already sets it"
                )
        for key, pem, tls_hosts in tls_files:
            if key in certs:
                certs[key][1].update(tls_hosts)
            else:
                certs[key] = (pem, set(tls_hosts))

    return IngressModel(
        hosts=tuple((h, h) for h in sorted(hosts) if h != HOST_ANY and not h.startswith("*.")),
        hosts_wildcard=tuple((_wildcard_regex(h), h) for h in sorted(hosts) if h.startswith("*.")),
        path_exact=tuple((k, v[0]) for k, v in sorted(exact.items())),
        path_prefix_exact=tuple((k, v[0]) for k, v in sorted(prefix_exact.items())),
        path_prefix=tuple((k, v[0]) for k, v in sorted(prefix.items())),
        default_backend=default[0] if default else None,
        certificates=tuple(
            Certificate(ns, name, pem, tuple(sorted(h)))
            for (ns, name), (pem, h) in sorted(certs.items())
        ),
        services=tuple(sorted(refs, key=lambda r: (r.namespace, r.service, str(r.port)))),
        routes=tuple(routes),
    )


def _condition_true(obj: Mapping[str, Any], ctype: str) -> bool:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if _is_map(cond) and cond.get("type") == ctype:
            return cond.get("status") == "True"
    return False


def holds_gate(pod: Mapping[str, Any] | None) -> bool:
    """Whether a pod lists the load-balancer-ready condition under spec.readinessGates."""
    try:
        gates = ((pod or {}).get("spec") or {}).get("readinessGates") or []
        return any(_is_map(g) and g.get("conditionType") == GATE_CONDITION for g in gates)
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
    if previous and _is_map(previous):
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
    svc: Mapping[str, Any] | None, ref: ServiceRef, warnings: list[str]
) -> str | None:
    """Name ("" when unnamed) of the Service port an Ingress means, or None (warned)."""
    where = f"backend {ref.backend_name}"
    if svc is None:
        warnings.append(f"{where}: service {ref.namespace}/{ref.service} not found")
        return None
    try:
        spec = svc.get("spec") or {}
        if spec.get("type") == "ExternalName":
            warnings.append(f"{where}: ExternalName services are not supported")
            return None
        for p in spec.get("ports") or []:
            if (isinstance(ref.port, int) and p.get("port") == ref.port) or (
                isinstance(ref.port, str) and p.get("name") == ref.port
            ):
                return str(p.get("name") or "")
    except (AttributeError, TypeError) as exc:
        warnings.append(f"{where}: service {ref.namespace}/{ref.service} malformed ({exc})")
        return None
    warnings.append(f"{where}: service has no port {ref.port}")
    return None


def build_backends(
    refs: Sequence[ServiceRef],
    services: Iterable[Mapping[str, Any]],
    endpointslices: Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]],
    settings: LibrarySettings,
    warnings: list[str],
    previous: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None,
    gated_pods: set[str] | None = None,
) -> tuple[Backend, ...]:
    """One backend per referenced Service port, servers from its EndpointSlices in slots.

    `previous` is the backends part of the last render's plan: an endpoint keeps the slot
    it had, so a change touches only the slots of the endpoints that changed. With the
    readiness gate on, `gated_pods` collects the pods holding the gate whose endpoints render
    enabled: once every HAProxy pod runs this render, they may get the condition.
    """
    svc_index = {obj_key(s): s for s in services}
    slice_index: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for sl in endpointslices:
        try:
            owner = ((sl.get("metadata") or {}).get("labels") or {}).get(SERVICE_NAME_LABEL)
        except AttributeError:
            warnings.append(f"endpointslice {'/'.join(obj_key(sl))}: malformed labels; skipped")
            continue
        if isinstance(owner, str) and owner:
            slice_index.setdefault((obj_key(sl)[0], owner), []).append(sl)
    pod_index = {obj_key(p): p for p in pods} if settings.readiness_gate else {}

    backends = []
    for ref in sorted(set(refs), key=lambda r: r.backend_name):
        endpoints: dict[tuple[str, int], bool] = {}
        sort_keys: dict[tuple[str, int], tuple[int, ...]] = {}
        where = f"backend {ref.backend_name}"
        port_name = _service_port_name(svc_index.get((ref.namespace, ref.service)), ref, warnings)
        if port_name is not None:
            for sl in sorted(slice_index.get((ref.namespace, ref.service), ()), key=obj_key):
                try:
                    found = _slice_endpoints(sl, port_name, pod_index, settings.readiness_gate)
                except (AttributeError, TypeError, KeyError, ValueError) as exc:
                    warnings.append(f"{where}: endpointslice {obj_key(sl)[1]} skipped ({exc})")
                    continue
                for ep in found:
                    key = (ep.address, ep.port)
                    endpoints[key] = endpoints.get(key, False) or ep.enabled
                    sort_keys[key] = ep.sort_key
                    if ep.gated_pod is not None and gated_pods is not None:
                        gated_pods.add(ep.gated_pod)
        ordered = sorted(endpoints, key=lambda k: (sort_keys[k], k[1]))
        total = slot_count(len(ordered), settings.server_slots)
        slots = _assign_slots(ordered, total, (previous or {}).get(ref.backend_name))
        servers = []
        for i, key in enumerate(slots, start=1):
            if key is None:
                servers.append(_placeholder(i))
            else:
                servers.append(Server(f"SRV_{i}", key[0], key[1], 1, endpoints[key]))
        backends.append(
            Backend(ref.backend_name, ref.namespace, ref.service, ref.port, tuple(servers))
        )
    return tuple(backends)

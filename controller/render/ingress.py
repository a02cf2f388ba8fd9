"""The ingress library's model: which Ingresses are ours, their routes, policies and TLS (pure).

An Ingress is ours when `spec.ingressClassName` (else the deprecated
`kubernetes.io/ingress.class` annotation) names an IngressClass whose `spec.controller` is
CONTROLLER, or when it names no class and one of our IngressClasses carries
`ingressclass.kubernetes.io/is-default-class: "true"`. Everything else belongs to another
controller and is ignored without a warning.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from contract import INGRESS_CONTROLLER
from controller.render import annotations as ann
from controller.render import model as m
from controller.render.libraries import (
    HOST_ANY,
    Certificate,
    IngressModel,
    InvalidObject,
    LibrarySettings,
    Route,
    RouteBackend,
    ServiceRef,
    Userlist,
    ingress_class_of,
    ingress_order,
    is_map,
    obj_key,
    parse_ingress,
    tls_certificate,
    valid_path,
    valid_regex_path,
    warn,
)
from controller.render.model import RenderWarning

CONTROLLER = INGRESS_CONTROLLER
DEFAULT_CLASS_ANNOTATION = "ingressclass.kubernetes.io/is-default-class"
_CRYPT_RE = re.compile(r"^\$[0-9a-z]+\$[./0-9A-Za-z$=,+-]+$")
_USER_RE = re.compile(r"^[A-Za-z0-9._@-]{1,128}$")


@dataclass(frozen=True)
class ClassSet:
    """Our IngressClasses: their names, and whether one of them is the cluster default."""

    names: frozenset[str]
    default: bool


def our_classes(
    classes: Iterable[Mapping[str, Any]] | None, settings: LibrarySettings
) -> ClassSet | None:
    """The IngressClasses of our controller (only `ingressClassName` when the template config
    names one); None when the caller has no class information."""
    if classes is None:
        return None
    names: set[str] = set()
    default = False
    for cls in classes:
        spec = cls.get("spec") if is_map(cls) else None
        if not is_map(spec) or spec.get("controller") != CONTROLLER:
            continue
        name = obj_key(cls)[1]
        if settings.ingress_class and name != settings.ingress_class:
            continue
        names.add(name)
        meta_annotations = (cls.get("metadata") or {}).get("annotations") or {}
        default = default or meta_annotations.get(DEFAULT_CLASS_ANNOTATION) == "true"
    return ClassSet(frozenset(names), default)


def is_ours(obj: Mapping[str, Any], classes: ClassSet | None, settings: LibrarySettings) -> bool:
    cls = ingress_class_of(obj)
    if classes is None:
        return not settings.ingress_class or cls == settings.ingress_class
    return cls in classes.names if cls else classes.default


def _secret_data(secret: Mapping[str, Any], key: str) -> bytes | None:
    raw = (secret.get("data") or {}).get(key)
    if raw is None:
        return None
    try:
        return base64.b64decode(raw, validate=True)
    except (TypeError, binascii.Error, ValueError):
        raise InvalidObject(f"data.{key} is not base64", m.INVALID_SECRET) from None


def auth_users(secret: Mapping[str, Any] | None, where: str) -> tuple[tuple[str, str], ...]:
    """Users of a basic-auth Secret: each data key a user name, its value a crypt(3) hash
    (as `openssl passwd -6` prints), or an `auth` key holding htpasswd lines."""
    if secret is None:
        raise InvalidObject(f"{where}: secret not found", m.SECRET_NOT_FOUND)
    lines: list[tuple[str, str]] = []
    for key in sorted(secret.get("data") or {}):
        value = (_secret_data(secret, key) or b"").decode("utf-8", "replace").strip()
        if key == "auth":
            for line in value.splitlines():
                user, _, hashed = line.strip().partition(":")
                if user:
                    lines.append((user, hashed))
        else:
            lines.append((key, value))
    for user, hashed in lines:
        if not _USER_RE.fullmatch(user) or not _CRYPT_RE.fullmatch(hashed):
            raise InvalidObject(
                f"{where}: user {user!r} has no crypt(3) password hash", m.INVALID_SECRET
            )
    if not lines:
        raise InvalidObject(f"{where}: no users", m.INVALID_SECRET)
    return tuple(lines)


def ca_bundle(secret: Mapping[str, Any] | None, where: str) -> bytes:
    """The CA certificates of a Secret (`ca.crt`, else `tls.crt`), PEM."""
    if secret is None:
        raise InvalidObject(f"{where}: secret not found", m.SECRET_NOT_FOUND)
    pem = _secret_data(secret, "ca.crt") or _secret_data(secret, "tls.crt")
    if not pem or b"-----BEGIN CERTIFICATE-----" not in pem:
        raise InvalidObject(f"{where}: no PEM ca.crt", m.INVALID_SECRET)
    return pem.rstrip(b"\n") + b"\n"


def _wildcard_regex(host: str) -> str:
    # "*.example.com" matches exactly one label in front, as the Ingress API defines.
    return "^[^.]+" + re.escape(host[1:]) + "$"


def path_match(path_type: str, annotated: str | None, path: str) -> str:
    """How one path matches (one of ann.PATH_MATCHES): Exact and Prefix as the Ingress API
    says; ImplementationSpecific as haproxy.org/path-type says, prefix without it."""
    if path_type == "Exact":
        return "exact"
    if path_type == "Prefix":
        return "prefix"
    match = annotated or "prefix"
    if match == "regex":
        problem = None if valid_regex_path(path) else "characters a regex path may not hold"
        problem = problem or ann.regex_problem(path)
        if problem:
            raise InvalidObject(f"invalid regex path {path!r}: {problem}")
    elif not valid_path(path):
        raise InvalidObject(f"invalid path {path!r} (a regex needs haproxy.org/path-type: regex)")
    return match


def regex_key(host_key: str, path: str) -> str:
    """The pattern a regex route matches against host key + path: the path regex anchored
    right after the host key (a leading '^' in the path is that anchor)."""
    return "^" + re.escape(host_key) + (path[1:] if path.startswith("^") else path)


class _LookupRecord(dict):
    """The Secret index, noting every key looked up (found or not): a change to any other
    Secret cannot change the render (controller.render.incremental)."""

    def __init__(self, items: Iterable[tuple[Any, Any]]) -> None:
        super().__init__(items)
        self.read: set[Any] = set()

    def get(self, key: Any, default: Any = None) -> Any:
        self.read.add(key)
        return super().get(key, default)


class _Builder:
    """Accumulates one render's routes; a class only to share the tables between steps."""

    def __init__(
        self,
        services: Iterable[Mapping[str, Any]],
        secrets: Iterable[Mapping[str, Any]],
        settings: LibrarySettings,
        warnings: list[RenderWarning],
    ) -> None:
        self.settings = settings
        self.warnings = warnings
        self.svc_index = {obj_key(s): s for s in services}
        self.secret_index = _LookupRecord((obj_key(s), s) for s in secrets)
        self.tables: dict[str, dict[str, tuple[str, str]]] = {
            "exact": {},
            "prefix_exact": {},
            "prefix": {},
            "regex": {},  # insertion order is match order
            "regex_any": {},
            "sni": {},
        }
        self.hosts: set[str] = set()
        self.backends: dict[str, RouteBackend] = {}
        self.routes: list[Route] = []
        self.certs: dict[tuple[str, str], tuple[bytes, set[str]]] = {}
        self.userlists: dict[str, Userlist] = {}
        self.ca_files: dict[str, bytes] = {}
        self.used: set[str] = set()  # backends some route or default points at
        self.served: set[str] = set()  # Ingresses that hold a route
        self.host_defaults: list[tuple[str, str, str]] = []  # (host, backend, source)
        self.catch_all: tuple[str, str] | None = None
        # None: the Service's annotations are invalid (warned once).
        self._svc_values: dict[tuple[str, str], tuple[tuple[str, Any], ...] | None] = {}

    def claim(self, table: str, key: str, backend: str, source: str, quiet: bool = False) -> bool:
        held = self.tables[table].get(key)
        if held is None:
            self.tables[table][key] = (backend, source)
            self.used.add(backend)
            self.served.add(source)
            return True
        if held[0] != backend and not quiet:
            ns, name = source.split("/", 1)
            warn(
                self.warnings,
                "Ingress",
                (ns, name),
                m.ROUTE_CONFLICT,
                f"route {key} already taken by ingress {held[1]}",
            )
        return False

    def service_values(self, ref: ServiceRef) -> tuple[tuple[str, Any], ...] | None:
        key = (ref.namespace, ref.service)
        if key not in self._svc_values:
            svc = self.svc_index.get(key)
            meta = (svc.get("metadata") or {}) if svc is not None else {}
            try:
                self._svc_values[key] = ann.service_values(
                    ann.ours(meta.get("annotations")), self.settings.allow_snippets
                )
            except ann.InvalidAnnotation as exc:
                warn(
                    self.warnings,
                    "Service",
                    key,
                    m.INVALID_ANNOTATION,
                    f"{exc}; routes to this service skipped",
                )
                self._svc_values[key] = None
        return self._svc_values[key]

    def route_backend(
        self,
        ref: ServiceRef,
        source: str,
        route: ann.RoutePolicy,
        ingress_values: tuple[tuple[str, Any], ...] | None,
        userlist: str | None,
        mode: str = "http",
    ) -> str | None:
        """The backend name a route of `source` to `ref` uses (registered), None if the
        Service's annotations are invalid (the route is skipped, warned)."""
        svc_values = self.service_values(ref)
        if svc_values is None:
            return None
        policy = ann.merge_backend(self.settings.backend_defaults, ingress_values or (), svc_values)
        ca_file = None
        if policy.server_ca:
            ca_file = f"certs/ca.{ref.namespace}_{policy.server_ca}.pem"
            if ca_file not in self.ca_files:
                where = f"server-ca secret {policy.server_ca}"
                try:
                    secret = self.secret_index.get((ref.namespace, policy.server_ca))
                    self.ca_files[ca_file] = ca_bundle(secret, where)
                except InvalidObject as exc:
                    warn(
                        self.warnings,
                        "Service",
                        (ref.namespace, ref.service),
                        exc.reason,
                        f"{exc}; routes to this service skipped",
                    )
                    return None
        own = ingress_values is not None
        name = f"{ref.backend_name}.{source.split('/', 1)[1]}" if own else ref.backend_name
        if mode == "tcp":
            name += ".passthrough"
        if name not in self.backends:
            self.backends[name] = RouteBackend(
                name, ref, route, policy, source, userlist, ca_file, mode
            )
        return name

    def add_ingress(self, obj: Mapping[str, Any]) -> None:
        key = obj_key(obj)
        parsed = parse_ingress(obj)
        namespace = key[0]
        items = ann.ours((obj.get("metadata") or {}).get("annotations"))
        try:
            route = ann.route_policy(items)
            values = ann.backend_values(items, self.settings.allow_snippets)
        except ann.InvalidAnnotation as exc:
            raise InvalidObject(str(exc), m.INVALID_ANNOTATION) from None
        if self.settings.ssl_redirect and parsed.tls and "ssl-redirect" not in dict(items):
            route = replace(route, ssl_redirect=True)
        userlist = None
        if route.auth_secret:
            userlist = f"auth.{namespace}.{route.auth_secret}"
            if userlist not in self.userlists:
                secret = self.secret_index.get((namespace, route.auth_secret))
                users = auth_users(secret, f"auth-secret {route.auth_secret}")
                self.userlists[userlist] = Userlist(userlist, users)
        tls_files = []
        for secret_name, tls_hosts in parsed.tls:
            where = f"tls secret {secret_name}"
            try:
                pem = tls_certificate(self.secret_index.get((namespace, secret_name)), where)
            except InvalidObject as exc:
                # Never redirect to an HTTPS that cannot serve the host (docs/annotations.md
                # "TLS"): the Ingress stays on HTTP until its Secret loads.
                why = "; HTTP is not redirected to HTTPS" if route.ssl_redirect else ""
                warn(self.warnings, "Ingress", key, exc.reason, f"{exc}; TLS for it skipped{why}")
                route = replace(route, ssl_redirect=False)
                continue
            tls_files.append(((namespace, secret_name), pem, tls_hosts))
        own = items or route != ann.DEFAULT_ROUTE
        ingress_values = values if own else None
        source = parsed.source
        if route.ssl_passthrough:
            self._add_passthrough(parsed, ingress_values)
            return
        # Every path's match first: an invalid one skips the whole Ingress, before any claim.
        matches = [path_match(pt, route.path_type, p) for _h, p, pt, _r in parsed.routes]
        for (host, path, ptype, ref), match in zip(parsed.routes, matches, strict=True):
            backend = self.route_backend(ref, source, route, ingress_values, userlist)
            if backend is not None and self._claim_path(host, path, match, backend, source):
                self.hosts.add(host)
                self.routes.append(Route(host, path, ptype, backend, source))
        if parsed.default is not None:
            backend = self.route_backend(parsed.default, source, route, ingress_values, userlist)
            if backend is not None:
                self._add_default(parsed, backend)
        for cert_key, pem, tls_hosts in tls_files:
            if cert_key in self.certs:
                self.certs[cert_key][1].update(tls_hosts)
            else:
                self.certs[cert_key] = (pem, set(tls_hosts))

    def _claim_path(self, host: str, path: str, match: str, backend: str, source: str) -> bool:
        if match == "exact":
            return self.claim("exact", host + path, backend, source)
        if match == "begin":  # a plain string prefix: "/foo" matches "/foobar"
            return self.claim("prefix", host + path, backend, source)
        if match == "regex":
            table = "regex_any" if host == HOST_ANY else "regex"
            return self.claim(table, regex_key(host, path), backend, source)
        # Prefix: element-wise, so "/foo" and "/foo/" both match "/foo" and "/foo/bar" but
        # not "/foobar".
        trimmed = path.rstrip("/")
        used = False
        if trimmed:
            used = self.claim("prefix_exact", host + trimmed, backend, source)
        return self.claim("prefix", host + trimmed + "/", backend, source) or used

    def _add_passthrough(
        self, parsed: Any, ingress_values: tuple[tuple[str, Any], ...] | None
    ) -> None:
        # TLS is not terminated: the SNI name picks the Service, so paths cannot matter (the
        # first path of a host names it) and HTTP-level annotations do not apply.
        for host, *_ in parsed.routes:
            if host == HOST_ANY or host.startswith("*."):
                raise InvalidObject(
                    f"ssl-passthrough needs exact hosts, not {host!r}", m.INVALID_ANNOTATION
                )
        for host, _path, _ptype, ref in parsed.routes:
            if self.tables["sni"].get(host, ("", ""))[1] == parsed.source:
                continue
            backend = self.route_backend(
                ref, parsed.source, ann.DEFAULT_ROUTE, ingress_values, None, mode="tcp"
            )
            if backend is not None:
                self.claim("sni", host, backend, parsed.source)

    def _add_default(self, parsed: Any, backend: str) -> None:
        # Requests to this Ingress's hosts that match none of its paths; an Ingress without
        # host rules offers the cluster-wide catch-all (the oldest such Ingress wins).
        hosts = sorted({h for h, *_ in parsed.routes} - {HOST_ANY})
        for host in hosts:
            self.host_defaults.append((host, backend, parsed.source))
        if hosts:
            return
        if self.catch_all is None:
            self.catch_all = (backend, parsed.source)
        elif self.catch_all[0] != backend:
            ns, name = parsed.source.split("/", 1)
            warn(
                self.warnings,
                "Ingress",
                (ns, name),
                m.DEFAULT_BACKEND_CONFLICT,
                f"defaultBackend ignored, ingress {self.catch_all[1]} already sets it",
            )

    def finish_defaults(self) -> str | None:
        # After every explicit route: a host's own paths, from any Ingress, win.
        for host, backend, source in self.host_defaults:
            if self.claim("prefix", host + "/", backend, source, quiet=True):
                self.hosts.add(host)
        if self.catch_all is not None:
            self.used.add(self.catch_all[0])
            self.served.add(self.catch_all[1])
            return self.catch_all[0]
        ref = self.settings.default_backend
        if ref is None:
            return None
        # No source Ingress: warnings about it name the Service itself.
        backend = self.route_backend(ref, "", ann.DEFAULT_ROUTE, None, None)
        if backend is not None:
            self.used.add(backend)
        return backend

    def default_certificate(self) -> Certificate | None:
        where = self.settings.default_certificate
        if where is None:
            return None
        try:
            pem = tls_certificate(self.secret_index.get(where), "default certificate")
        except InvalidObject as exc:
            warn(
                self.warnings,
                "Secret",
                where,
                exc.reason,
                f"{exc}; HTTPS uses the Ingress certificates only",
            )
            return None
        return Certificate(where[0], where[1], pem, ())


def build_ingress_model(
    ingresses: Iterable[Mapping[str, Any]],
    services: Iterable[Mapping[str, Any]],
    secrets: Iterable[Mapping[str, Any]],
    classes: Sequence[Mapping[str, Any]] | None,
    settings: LibrarySettings,
    warnings: list[RenderWarning],
) -> IngressModel:
    """Routes, map entries, backends, default backend and certificates of our Ingresses."""
    builder = _Builder(services, secrets, settings, warnings)
    class_set = our_classes(classes, settings)
    for obj in sorted(ingresses, key=ingress_order):
        key = obj_key(obj)
        try:
            if not is_ours(obj, class_set, settings):
                continue
            builder.add_ingress(obj)
        except InvalidObject as exc:
            warn(warnings, "Ingress", key, exc.reason, f"{exc}; ingress skipped")
        except (AttributeError, TypeError, KeyError, ValueError) as exc:
            warn(warnings, "Ingress", key, m.INVALID_OBJECT, f"malformed ({exc}); skipped")
    default = builder.finish_defaults()
    hosts = sorted(builder.hosts)
    tables = builder.tables
    return IngressModel(
        hosts=tuple((h, h) for h in hosts if h != HOST_ANY and not h.startswith("*.")),
        hosts_wildcard=tuple((_wildcard_regex(h), h) for h in hosts if h.startswith("*.")),
        path_exact=tuple((k, v[0]) for k, v in sorted(tables["exact"].items())),
        path_prefix_exact=tuple((k, v[0]) for k, v in sorted(tables["prefix_exact"].items())),
        path_prefix=tuple((k, v[0]) for k, v in sorted(tables["prefix"].items())),
        path_regex=tuple((k, v[0]) for k, v in tables["regex"].items()),
        path_regex_any=tuple((k, v[0]) for k, v in tables["regex_any"].items()),
        sni_passthrough=tuple((k, v[0]) for k, v in sorted(tables["sni"].items())),
        default_backend=default,
        certificates=tuple(
            Certificate(ns, name, pem, tuple(sorted(h)))
            for (ns, name), (pem, h) in sorted(builder.certs.items())
        ),
        default_certificate=builder.default_certificate(),
        services=tuple(builder.backends[n] for n in sorted(builder.backends.keys() & builder.used)),
        routes=tuple(builder.routes),
        userlists=tuple(builder.userlists[n] for n in sorted(builder.userlists)),
        ca_files=tuple(sorted(builder.ca_files.items())),
        served=tuple(sorted(builder.served)),
        secrets_read=frozenset(builder.secret_index.read),
    )

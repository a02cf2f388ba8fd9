"""The HTTP front of the API server (aiohttp): routing, watch streams, discovery, pod logs,
and the admin listener for fault injection."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import time
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from localcluster import discovery, openapi, podlogs, protov2, scale, tables
from localcluster.audit import MUTATING, AuditLog, lease_written
from localcluster.errors import ApiError, gone, success_status
from localcluster.faultgate import FaultGate
from localcluster.patches import json_patch, merge_patch, strategic_merge
from localcluster.persist import Journal
from localcluster.podlogs import truthy as _truthy
from localcluster.requestshapes import ShapeRecorder, shape_of
from localcluster.resources import ResourceType
from localcluster.selectors import (
    fields_match,
    labels_match,
    parse_field_selector,
    parse_label_selector,
)
from localcluster.store import CRD_KEY, DeleteOptions, Event, Store

log = logging.getLogger("localcluster.apiserver")

JSON = "application/json"
PROTO_V2 = "application/com.github.proto-openapi.spec.v2"  # + "@v1.0+protobuf" as asked
PROTO_V2_RESPONSE = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
PATCH_TYPES = {
    "application/json-patch+json": "json",
    "application/merge-patch+json": "merge",
    "application/strategic-merge-patch+json": "strategic",
    "application/apply-patch+yaml": "apply",
    "application/apply-patch+json": "apply",
}
# Kinds whose DELETE answers with the object (others answer with a Status), as the real server.
_DELETE_RETURNS_OBJECT = {"Pod", "Service", "Namespace", "Deployment", "CustomResourceDefinition"}
_WATCH_QUEUE_LIMIT = 100_000
MAX_REQUEST_BYTES = 3 * 1024 * 1024  # the real server's request body limit
DEFAULT_CRD_DIR = Path(__file__).resolve().parent.parent / "deploy" / "crds"


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def _json_response(obj: Any, status: int = 200) -> web.Response:
    return web.Response(body=_dumps(obj), status=status, content_type=JSON)


def _error_response(err: ApiError) -> web.Response:
    return _json_response(err.status(), err.code)


class StreamWatcher:
    """One watch stream's queue of events, filled synchronously by the store."""

    def __init__(self, key: str, namespace: str | None) -> None:
        self.key = key
        self.namespace = namespace
        self.queue: asyncio.Queue[Event] = asyncio.Queue()
        self.overflowed = False

    def push(self, event: Event) -> None:
        if self.queue.qsize() >= _WATCH_QUEUE_LIMIT:
            self.overflowed = True
            return
        self.queue.put_nowait(event)

    def wake(self) -> None:
        # A no-op event: the stream loop wakes up and sees the server stopping.
        self.queue.put_nowait(None)  # type: ignore[arg-type]


class ApiServer:
    def __init__(
        self,
        state_dir: Path | None = None,
        crd_dir: Path | None = DEFAULT_CRD_DIR,
        history_limit: int = 10000,
        bookmark_interval: float = 5.0,
        event_ttl: float = 3600.0,
        audit_log: Path | None = None,
        request_shapes: Path | None = None,
    ) -> None:
        self.state_dir = state_dir
        self.audit = AuditLog(audit_log) if audit_log is not None else None
        self.shapes = ShapeRecorder(request_shapes) if request_shapes is not None else None
        self.crd_dir = crd_dir
        self.bookmark_interval = bookmark_interval
        self.event_ttl = event_ttl
        self._sweeper: asyncio.Task[None] | None = None
        self.journal = Journal(state_dir) if state_dir else None
        loop = asyncio.get_event_loop()
        self.store = Store(
            history_limit=history_limit,
            journal=self.journal,
            call_soon=loop.call_soon,
            call_later=loop.call_later,
        )
        self.port = 0
        self.admin_port = 0
        self._runner: web.AppRunner | None = None
        self._admin_runner: web.AppRunner | None = None
        self._server: asyncio.AbstractServer | None = None
        self._stopping = asyncio.Event()
        self.gate = FaultGate(self._stopping)
        self.faults = self.gate.faults
        self._v2_cache: tuple[str, bytes] = ("", b"")

    # --- lifecycle -------------------------------------------------------------------------

    def load(self) -> None:
        if self.journal is not None:
            rv, objects, records = self.journal.load()
            self.store.restore(rv, objects, records)
            self.journal.compact(self.store.rv, self.store.all_objects())
        self.store.ensure_namespaces()
        if self.crd_dir and self.crd_dir.is_dir():
            for path in sorted(self.crd_dir.glob("*.yaml")):
                for doc in yaml.safe_load_all(path.read_text()):
                    if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                        self.store.install_crd(doc)
        self.store.run_pending()

    async def start(self, port: int = 0, admin_port: int = 0, host: str = "127.0.0.1") -> None:
        self.host = host
        self.load()
        app = web.Application(
            middlewares=[self._shape_middleware, self._audit_middleware, self._fault_middleware],
            client_max_size=MAX_REQUEST_BYTES,
        )
        app.router.add_route("*", "/{tail:.*}", self.handle)
        self._runner = web.AppRunner(
            app, access_log=None, handle_signals=False, shutdown_timeout=3.0
        )
        await self._runner.setup()
        sock = self._bind(host, port)
        self.port = sock.getsockname()[1]
        self._server = await asyncio.get_running_loop().create_server(
            self._runner.server, sock=sock, backlog=1024
        )
        admin = web.Application()
        self.gate.add_admin_routes(admin, after_change=self._apply_refuse)
        admin.router.add_route("GET", "/admin/state", self.admin_state)
        admin.router.add_route("GET", "/healthz", self.admin_health)
        self._admin_runner = web.AppRunner(
            admin, access_log=None, handle_signals=False, shutdown_timeout=1.0
        )
        await self._admin_runner.setup()
        admin_site = web.TCPSite(self._admin_runner, host, admin_port)
        await admin_site.start()
        self.admin_port = admin_site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        if self.state_dir:
            self._write_state_files()
        self._sweeper = asyncio.get_running_loop().create_task(self._sweep_events())

    async def _sweep_events(self) -> None:
        interval = max(0.5, min(60.0, self.event_ttl / 4))
        while not self._stopping.is_set():
            self.store.expire_events(self.event_ttl)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), interval)

    def _bind(self, host: str, port: int) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.setblocking(False)
        return sock

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def admin_url(self) -> str:
        return f"http://{self.host}:{self.admin_port}"

    def _write_state_files(self) -> None:
        assert self.state_dir is not None
        kubeconfig = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "localcluster", "cluster": {"server": self.url}}],
            "users": [{"name": "localcluster", "user": {"token": "localcluster"}}],
            "contexts": [
                {
                    "name": "localcluster",
                    "context": {
                        "cluster": "localcluster",
                        "user": "localcluster",
                        "namespace": "default",
                    },
                }
            ],
            "current-context": "localcluster",
        }
        _atomic_write(self.state_dir / "kubeconfig", yaml.safe_dump(kubeconfig))
        _atomic_write(
            self.state_dir / "apiserver.json",
            json.dumps({"url": self.url, "admin_url": self.admin_url, "pid": os.getpid()}) + "\n",
        )

    async def stop(self) -> None:
        self._stopping.set()
        if self._sweeper is not None:
            await self._sweeper
        self.gate.changed()
        for watchers in self.store.watchers.values():
            for watcher in watchers:
                watcher.wake()
        if self._server is not None:
            self._server.close()
        if self._runner is not None:
            await self._runner.cleanup()
        if self._admin_runner is not None:
            await self._admin_runner.cleanup()
        if self.journal is not None:
            self.journal.close()
        if self.audit is not None:
            self.audit.close()
        if self.shapes is not None:
            self.shapes.close()

    # --- refusing connections ----------------------------------------------------------------

    async def _apply_refuse(self) -> None:
        loop = asyncio.get_running_loop()
        if self.faults.refusing and self._server is not None:
            self._server.close()
            self._server = None
            assert self._runner is not None and self._runner.server is not None
            for conn in self._runner.server.connections:
                conn.force_close()
        elif not self.faults.refusing and self._server is None and self._runner is not None:
            sock = self._bind(self.host, self.port)
            self._server = await loop.create_server(self._runner.server, sock=sock, backlog=1024)

    # --- admin -------------------------------------------------------------------------------

    async def admin_state(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "url": self.url,
                "resourceVersion": self.store.rv,
                "historyStart": self.store.history_start,
                "watchers": sum(len(w) for w in self.store.watchers.values()),
                "faults": [r.to_json() for r in self.faults.rules],
            }
        )

    async def admin_health(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    @web.middleware
    async def _shape_middleware(self, request: web.Request, handler: Any) -> web.StreamResponse:
        if self.shapes is not None:
            shape = shape_of(
                request.method,
                request.path,
                request.query.keys(),
                request.headers.get("Content-Type", ""),
                bool(request.content_length)
                or "chunked" in request.headers.get("Transfer-Encoding", ""),
            )
            self.shapes.record(shape, request.headers.get("User-Agent", ""))
        return await handler(request)

    @web.middleware
    async def _audit_middleware(self, request: web.Request, handler: Any) -> web.StreamResponse:
        # Outermost: the arrival time is taken before a fault delays or holds the request.
        if self.audit is None or request.method not in MUTATING:
            return await handler(request)
        arrived = time.time()
        code = 0
        response: web.StreamResponse | None = None
        try:
            response = await handler(request)
            code = response.status
            return response
        finally:
            body = getattr(response, "body", None)
            entry: dict[str, Any] = {
                "t": arrived,
                "verb": request.method,
                "path": request.path,
                "userAgent": request.headers.get("User-Agent", ""),
                "fieldManager": request.query.get("fieldManager", ""),
                "code": code,
            }
            lease = lease_written(
                request.path, request.method, code, body if isinstance(body, bytes) else None
            )
            if lease is not None:
                entry["lease"], entry["holder"] = lease
            self.audit.record(entry)

    @web.middleware
    async def _fault_middleware(self, request: web.Request, handler: Any) -> web.StreamResponse:
        answer = await self.gate.admit(request)
        return answer if answer is not None else await handler(request)

    # --- routing -----------------------------------------------------------------------------

    async def handle(self, request: web.Request) -> web.StreamResponse:
        try:
            return await self._route(request)
        except ApiError as err:
            return _error_response(err)
        except json.JSONDecodeError as exc:
            return _error_response(ApiError(400, f"invalid JSON body: {exc}"))
        except web.HTTPRequestEntityTooLarge:
            return _error_response(
                ApiError(
                    413,
                    f"Request entity too large: limit is {MAX_REQUEST_BYTES}",
                    "RequestEntityTooLarge",
                )
            )
        except (ConnectionResetError, asyncio.CancelledError):
            raise
        except Exception as exc:  # a bug here must still answer like an API server
            log.exception("internal error on %s %s", request.method, request.path)
            return _error_response(ApiError(500, f"Internal error occurred: {exc!r}"))

    async def _route(self, request: web.Request) -> web.StreamResponse:
        parts = [p for p in request.path.split("/") if p]
        if not parts:
            return _json_response({"paths": ["/api", "/api/v1", "/apis", "/version"]})
        head = parts[0]
        if head in ("healthz", "readyz", "livez"):
            return web.Response(text="ok")
        if head == "version":
            return _json_response(discovery.VERSION)
        if head == "openapi":
            return self._openapi(request, parts[1:])
        if head == "api":
            if len(parts) == 1:
                return _json_response(discovery.api_versions(f"{self.host}:{self.port}"))
            group, version, rest = "", parts[1], parts[2:]
        elif head == "apis":
            if len(parts) == 1:
                return _json_response(discovery.group_list(self.store.registry))
            if len(parts) == 2:
                return _json_response(discovery.api_group(self.store.registry, parts[1]))
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise ApiError(404, "the server could not find the requested resource", "NotFound")
        if not rest:
            return _json_response(discovery.resource_list(self.store.registry, group, version))
        return await self._resource_request(request, group, version, rest)

    def _resolve(self, group: str, version: str, plural: str) -> ResourceType:
        rt = self.store.registry.get(group, version, plural)
        if rt is None:
            raise ApiError(
                404,
                "the server could not find the requested resource",
                "NotFound",
                {"group": group, "kind": plural},
            )
        return rt

    async def _resource_request(
        self, request: web.Request, group: str, version: str, rest: list[str]
    ) -> web.StreamResponse:
        ns: str | None = None
        if (
            rest[0] == "namespaces"
            and len(rest) >= 3
            and self.store.registry.get(group, version, rest[2])
        ):
            ns, rest = rest[1], rest[2:]
        rt = self._resolve(group, version, rest[0])
        if rt.namespaced and ns is None and len(rest) > 1:
            raise ApiError(404, "the server could not find the requested resource", "NotFound")
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else ""
        if len(rest) > 3:
            raise ApiError(404, "the server could not find the requested resource", "NotFound")
        if sub and sub not in ("status", "log", "binding", "finalize", "scale"):
            raise ApiError(404, "the server could not find the requested resource", "NotFound")
        if (sub == "status" and not rt.status_subresource) or (
            sub == "scale" and not rt.scale_subresource
        ):
            raise ApiError(404, "the server could not find the requested resource", "NotFound")
        if not rt.stored:
            return await self._review(request, rt, name)
        if sub == "log":
            if rt.kind != "Pod" or request.method != "GET":
                raise ApiError(404, "the server could not find the requested resource")
            return await self._pod_log(request, ns or "", name or "")
        if name is None:
            return await self._collection_request(request, rt, ns)
        return await self._item_request(request, rt, ns or "", name, sub)

    async def _collection_request(
        self, request: web.Request, rt: ResourceType, ns: str | None
    ) -> web.StreamResponse:
        q = request.query
        method = request.method
        if method == "GET":
            if _truthy(q.get("watch")):
                return await self._watch(request, rt, ns)
            return self._list(rt, ns, q, request.headers.get("Accept", ""))
        if method == "POST":
            await self.gate.wait_unfrozen(rt.group, rt.plural)
            body = await request.json()
            warnings = _check_fields(rt, q, body)
            obj = self.store.create(rt, ns or "", body, _manager(request), dry_run="dryRun" in q)
            return _warn(_json_response(obj, 201), warnings)
        if method == "DELETE":
            await self.gate.wait_unfrozen(rt.group, rt.plural)
            opts = DeleteOptions.parse(await _optional_json(request), dict(q))
            labels = parse_label_selector(q.get("labelSelector"))
            fields = parse_field_selector(q.get("fieldSelector"), rt.kind)
            items = self.store.delete_collection(rt, ns, labels, fields, opts)
            return _json_response(self._list_body(rt, items, self.store.rv, None, None))
        raise ApiError(405, f"method {method} not allowed", "MethodNotAllowed")

    async def _item_request(
        self, request: web.Request, rt: ResourceType, ns: str, name: str, sub: str
    ) -> web.StreamResponse:
        q = request.query
        method = request.method
        if sub == "binding":
            if method != "POST":
                raise ApiError(405, "method not allowed", "MethodNotAllowed")
            await self.gate.wait_unfrozen(rt.group, rt.plural)
            self.store.bind(rt, ns, name, await request.json(), _manager(request))
            return _json_response(success_status(), 201)
        if sub == "scale" and method == "GET":
            return _json_response(scale.scale_of(rt, self.store.get(rt, ns, name)))
        if method == "GET":
            if _truthy(q.get("watch")):
                return await self._watch(request, rt, ns, name)
            obj = self.store.get(rt, ns, name)
            if tables.wants_table(request.headers.get("Accept", "")):
                meta = {"resourceVersion": obj["metadata"]["resourceVersion"]}
                return _json_response(tables.to_table(rt, [obj], meta))
            return _json_response(obj)
        await self.gate.wait_unfrozen(rt.group, rt.plural)
        if sub == "scale":
            return await self._scale(request, rt, ns, name)
        return await self._write_item(request, rt, ns, name, "status" if sub == "status" else "")

    async def _write_item(
        self, request: web.Request, rt: ResourceType, ns: str, name: str, subresource: str
    ) -> web.Response:
        """PUT, PATCH and DELETE of one object (or its status)."""
        q = request.query
        method = request.method
        dry_run = "dryRun" in q
        if method == "PUT":
            body = await request.json()
            warnings = _check_fields(rt, q, body)
            obj = self.store.replace(rt, ns, name, body, subresource, _manager(request), dry_run)
            return _warn(_json_response(obj), warnings)
        if method == "PATCH":
            ctype = request.content_type
            patch_type = PATCH_TYPES.get(ctype)
            if patch_type is None:
                raise ApiError(
                    415,
                    f"the body of the request was in an unknown format - accepted media "
                    f"types include: {', '.join(PATCH_TYPES)}",
                    "UnsupportedMediaType",
                )
            raw = await request.read()
            try:
                body = json.loads(raw) if patch_type != "apply" else _load_yaml(raw)
            except json.JSONDecodeError as exc:
                raise ApiError(400, f"invalid JSON in patch: {exc}") from None
            manager = q.get("fieldManager") or (
                None if patch_type == "apply" else _manager(request)
            )
            force = _truthy(q.get("force"))
            existed = (ns, name) in self.store.objects.get(rt.key, {})
            warnings = (
                _check_fields(rt, q, body, apply=patch_type == "apply")
                if patch_type != "json"
                else []
            )
            obj = self.store.patch(
                rt, ns, name, patch_type, body, subresource, manager, force, dry_run
            )
            # An apply that creates the object answers 201 Created, as the real server.
            return _warn(_json_response(obj, 200 if existed else 201), warnings)
        if method == "DELETE":
            opts = DeleteOptions.parse(await _optional_json(request), dict(q))
            if dry_run:
                opts.dry_run = True
            obj, removed = self.store.delete(rt, ns, name, opts)
            if removed and rt.kind not in _DELETE_RETURNS_OBJECT:
                m = obj["metadata"]
                return _json_response(
                    success_status(
                        {"name": name, "group": rt.group, "kind": rt.plural, "uid": m.get("uid")}
                    )
                )
            return _json_response(obj)
        raise ApiError(405, f"method {method} not allowed", "MethodNotAllowed")

    # --- OpenAPI, reviews, scale --------------------------------------------------------------

    def _openapi(self, request: web.Request, rest: list[str]) -> web.Response:
        """/openapi/v2 (protobuf, as kubectl asks for it, or JSON) and
        /openapi/v3[/api/v1 | /apis/G/V] (JSON)."""
        accept = request.headers.get("Accept", "")
        registry = self.store.registry
        if rest == ["v2"] and PROTO_V2 in accept:
            return web.Response(body=self._v2_protobuf(), content_type=PROTO_V2_RESPONSE)
        if accept and not any(t in accept for t in ("json", "*/*")):
            raise ApiError(406, f"only application/json is served, not {accept}", "NotAcceptable")
        if rest == ["v2"]:
            return _json_response(openapi.v2_document(registry))
        if rest == ["v3"]:
            return _json_response(openapi.v3_index(registry))
        if len(rest) == 3 and rest[:2] == ["v3", "api"]:
            group, version = "", rest[2]
        elif len(rest) == 4 and rest[:2] == ["v3", "apis"]:
            group, version = rest[2], rest[3]
        else:
            group, version = "", ""
        if version and version in registry.groups().get(group, []):
            doc, _ = openapi.document(registry, group, version)
            return _json_response(doc)
        raise ApiError(404, "the server could not find the requested resource", "NotFound")

    def _v2_protobuf(self) -> bytes:
        """Encoded once per state of the served kinds (the v3 index's hashes say which)."""
        registry = self.store.registry
        key = json.dumps(openapi.v3_index(registry), sort_keys=True)
        if self._v2_cache[0] != key:
            self._v2_cache = (key, protov2.encode_document(openapi.v2_document(registry)))
        return self._v2_cache[1]

    async def _review(
        self, request: web.Request, rt: ResourceType, name: str | None
    ) -> web.Response:
        if request.method != "POST" or name is not None:
            raise ApiError(405, f"method {request.method} not allowed", "MethodNotAllowed")
        return _json_response(scale.review(rt, await request.json()), 201)

    async def _scale(
        self, request: web.Request, rt: ResourceType, ns: str, name: str
    ) -> web.Response:
        """PUT or PATCH .../scale: the new spec.replicas goes into the object itself."""
        current = scale.scale_of(rt, self.store.get(rt, ns, name))
        if request.method == "PUT":
            wanted = await request.json()
        elif request.method == "PATCH":
            patch_type = PATCH_TYPES.get(request.content_type)
            body = json.loads(await request.read())
            if patch_type == "json":
                wanted = json_patch(current, body)
            elif patch_type == "strategic":
                wanted = strategic_merge(current, body, {}, frozenset())
            elif patch_type == "merge":
                wanted = merge_patch(current, body)
            else:
                raise ApiError(
                    415, "the body of the request was in an unknown format", "UnsupportedMediaType"
                )
        else:
            raise ApiError(405, f"method {request.method} not allowed", "MethodNotAllowed")
        patch = scale.replicas_patch(rt, wanted)
        obj = self.store.patch(
            rt, ns, name, "merge", patch, "", _manager(request), dry_run="dryRun" in request.query
        )
        return _json_response(scale.scale_of(rt, obj))

    # --- list / watch --------------------------------------------------------------------------

    def _list_body(
        self,
        rt: ResourceType,
        items: list[dict[str, Any]],
        rv: int,
        token: str | None,
        remaining: int | None,
    ) -> dict[str, Any]:
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if token:
            meta["continue"] = token
        if remaining is not None:
            meta["remainingItemCount"] = remaining
        return {
            "kind": rt.list_kind,
            "apiVersion": rt.api_version,
            "metadata": meta,
            "items": items,
        }

    def _list(self, rt: ResourceType, ns: str | None, q: Any, accept: str = "") -> web.Response:
        labels = parse_label_selector(q.get("labelSelector"))
        fields = parse_field_selector(q.get("fieldSelector"), rt.kind)
        try:
            limit = int(q.get("limit") or 0)
        except ValueError:
            raise ApiError(400, "limit must be an integer") from None
        exact = None
        if q.get("resourceVersionMatch") == "Exact":
            try:
                exact = int(q.get("resourceVersion") or "")
            except ValueError:
                raise ApiError(400, "resourceVersionMatch=Exact needs a resourceVersion") from None
        items, rv, token, remaining = self.store.list(
            rt, ns, labels, fields, limit, q.get("continue") or None, exact
        )
        body = self._list_body(rt, items, rv, token, remaining)
        if tables.wants_table(accept):
            return _json_response(tables.to_table(rt, items, body["metadata"]))
        return _json_response(body)

    async def _watch(
        self, request: web.Request, rt: ResourceType, ns: str | None, name: str | None = None
    ) -> web.StreamResponse:
        q = request.query
        labels = parse_label_selector(q.get("labelSelector"))
        fields = parse_field_selector(q.get("fieldSelector"), rt.kind)
        if name is not None:
            fields = [*fields, *parse_field_selector(f"metadata.name={name}", rt.kind)]
        bookmarks = _truthy(q.get("allowWatchBookmarks"))
        try:
            timeout = float(q.get("timeoutSeconds") or 1800)
        except ValueError:
            raise ApiError(400, "timeoutSeconds must be a number") from None
        table_of = rt if tables.wants_table(request.headers.get("Accept", "")) else None
        watcher = StreamWatcher(rt.key, ns)
        response = web.StreamResponse(status=200, headers={"Content-Type": JSON})
        response.enable_chunked_encoding()
        try:
            initial = self.store.watch(rt, ns, q.get("resourceVersion"), watcher)
        except ApiError as err:
            if err.code != 410:
                raise
            # Too old: the real server answers 200 and sends the Status as an ERROR event.
            await response.prepare(request)
            await response.write(_dumps({"type": "ERROR", "object": err.status()}) + b"\n")
            await response.write_eof()
            return response
        await response.prepare(request)
        deadline = time.monotonic() + timeout
        next_bookmark = time.monotonic() + self.bookmark_interval
        try:
            if self.faults.frozen(rt.group, rt.plural):
                await self.gate.wait_unfrozen(rt.group, rt.plural)
            chunk = self._render(initial, labels, fields, table_of)
            if chunk:
                await response.write(chunk)
            while not self._stopping.is_set():
                now = time.monotonic()
                if now >= deadline:
                    break
                wait = deadline - now
                if bookmarks:
                    wait = min(wait, max(0.0, next_bookmark - now))
                try:
                    first = await asyncio.wait_for(watcher.queue.get(), wait)
                except TimeoutError:
                    first = None
                if watcher.overflowed:
                    break
                if self.faults.frozen(rt.group, rt.plural):
                    await self.gate.wait_unfrozen(rt.group, rt.plural)
                if self.faults.rules:
                    await self.gate.wait_not_blackholed(request.method, request.path)
                events = [] if first is None else [first]
                while not watcher.queue.empty():
                    events.append(watcher.queue.get_nowait())
                events = [e for e in events if e is not None]
                chunk = self._render(events, labels, fields, table_of)
                if bookmarks and time.monotonic() >= next_bookmark:
                    last_rv = events[-1].rv if events else self.store.rv
                    chunk += _bookmark(rt, last_rv)
                    next_bookmark = time.monotonic() + self.bookmark_interval
                if chunk:
                    await response.write(chunk)
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.store.unwatch(watcher)
        with contextlib.suppress(ConnectionResetError, RuntimeError):
            await response.write_eof()
        return response

    def _render(
        self, events: list[Event], labels: Any, fields: Any, table_of: ResourceType | None = None
    ) -> bytes:
        """Event lines for one stream: selectors turn changes into ADDED/DELETED as objects
        start or stop matching; `table_of` renders each object as a Table (kubectl -w)."""
        if not labels and not fields and table_of is None:
            return b"".join(e.line() for e in events)
        out = []
        for e in events:
            now_ok = labels_match(labels, e.obj) and fields_match(fields, e.obj)
            if e.type == "DELETED" or e.old is None:
                etype = e.type if now_ok else None
            else:
                was_ok = labels_match(labels, e.old) and fields_match(fields, e.old)
                etype = {
                    (True, True): e.type,
                    (True, False): "ADDED",
                    (False, True): "DELETED",
                }.get((now_ok, was_ok))
            if etype is None:
                continue
            if table_of is not None:
                meta = {"resourceVersion": str(e.rv)}
                out.append(
                    _dumps({"type": etype, "object": tables.to_table(table_of, [e.obj], meta)})
                    + b"\n"
                )
            elif etype == e.type:
                out.append(e.line())
            else:
                out.append(_dumps({"type": etype, "object": e.obj}) + b"\n")
        return b"".join(out)

    # --- pod logs ------------------------------------------------------------------------------

    async def _pod_log(self, request: web.Request, ns: str, name: str) -> web.StreamResponse:
        rt = self._resolve("", "v1", "pods")
        pod = self.store.get(rt, ns, name)
        container = podlogs.choose_container(pod, request.query.get("container"))
        path = podlogs.log_path(self.state_dir, ns, name, container) if self.state_dir else None
        query = podlogs.LogQuery.parse(request.query)
        raw = path.read_bytes() if path is not None and path.exists() else b""
        data = podlogs.select(raw, query)
        if not query.follow:
            return web.Response(body=data, content_type="text/plain")
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await response.prepare(request)
        await response.write(data)
        # Follow from what was read, not from the size now: a line appended while the first
        # part was being sent must not be skipped.
        offset = len(raw)
        uid = pod["metadata"]["uid"]
        try:
            while not self._stopping.is_set():
                await asyncio.sleep(0.2)
                if path is not None and path.exists() and path.stat().st_size > offset:
                    with path.open("rb") as f:
                        f.seek(offset)
                        more = f.read()
                    offset += len(more)
                    await response.write(more)
                current = self.store.objects.get(rt.key, {}).get((ns, name))
                if current is None or current["metadata"]["uid"] != uid:
                    break
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        with contextlib.suppress(ConnectionResetError, RuntimeError):
            await response.write_eof()
        return response


def _check_fields(rt: ResourceType, q: Any, body: Any, apply: bool = False) -> list[str]:
    """`fieldValidation=Strict` refuses fields the schema does not declare (400), `Warn`
    names them in Warning headers; without it (or `Ignore`) they pass unremarked (a real
    server refuses them in an apply whatever the parameter: not modelled)."""
    mode = q.get("fieldValidation")
    if mode not in ("Strict", "Warn") or not isinstance(body, dict):
        return []
    try:
        unknown = openapi.unknown_fields(rt, body)
    except LookupError:
        return []
    if apply:
        messages = [f".{path}: field not declared in schema" for path in unknown]
    else:
        messages = [f'unknown field "{path}"' for path in unknown]
    if messages and mode == "Strict":
        if apply:
            raise ApiError(400, f"failed to create typed patch object: {messages[0]}", "BadRequest")
        raise ApiError(
            400,
            f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
            f"strict decoding error: {', '.join(messages)}",
            "BadRequest",
        )
    return messages


def _warn(response: web.Response, warnings: list[str]) -> web.Response:
    for message in warnings:
        response.headers.add("Warning", "299 - " + json.dumps(message))
    return response


def _manager(request: web.Request) -> str:
    """fieldManager, else the user agent's first word, as the real server derives it."""
    manager = request.query.get("fieldManager")
    if manager:
        return manager
    agent = request.headers.get("User-Agent", "unknown")
    return agent.split("/", 1)[0] or "unknown"


async def _optional_json(request: web.Request) -> dict[str, Any] | None:
    raw = await request.read()
    if not raw.strip():
        return None
    body = json.loads(raw)
    return body if isinstance(body, dict) else None


def _load_yaml(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        try:
            return yaml.safe_load(raw)
        except yaml.YAMLError as exc:
            raise ApiError(400, f"invalid YAML in apply patch: {exc}") from None


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


__all__ = ["CRD_KEY", "ApiServer", "gone"]


def _bookmark(rt: ResourceType, rv: int) -> bytes:
    """A BOOKMARK event line: the stream is current up to `rv`."""
    marker = {
        "kind": rt.kind,
        "apiVersion": rt.api_version,
        "metadata": {"resourceVersion": str(rv)},
    }
    return _dumps({"type": "BOOKMARK", "object": marker}) + b"\n"

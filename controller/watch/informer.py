"""List + watch loop for one resource collection, feeding a Store (client-go's Reflector).

The edge of the watch package: everything here is I/O. It uses the official client's
ApiClient for URL building, auth and TLS, but reads responses itself: objects stay plain
dicts (camelCase, as the server sent them) and every request carries a (connect, read)
timeout so a black-holed API server cannot hang the loop.

Loop: list (paged) -> watch from the list's resourceVersion -> on a normal end (the server's
timeoutSeconds) or a cut connection, watch again from the last resourceVersion seen
(events and bookmarks) -> on 410 Gone, relist -> on any other failure, back off and retry
(resuming, not relisting, while the resourceVersion is still good).
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

from kubernetes.client import ApiClient

from controller.watch import metrics
from controller.watch.backoff import Backoff
from controller.watch.resources import ResourceRef
from controller.watch.store import Change, IndexFunc, Store, resource_version

log = logging.getLogger(__name__)

SYNCED = "SYNCED"  # pseudo event type: a (re)list completed

# (kind, event type, object); object is None for SYNCED.
EventHandler = Callable[[str, str, "dict | None"], None]


@dataclass(frozen=True)
class InformerConfig:
    connect_timeout: float = 5.0
    list_read_timeout: float = 30.0
    # Server-side lifetime of one watch request; the read timeout of the stream is this plus
    # the grace, so a silent (black-holed) stream is abandoned after at most that long.
    watch_timeout_seconds: int = 60
    watch_read_grace: float = 10.0
    page_size: int = 500
    backoff_initial: float = 0.5
    backoff_max: float = 30.0


class ApiStatusError(Exception):
    """A non-2xx answer or a watch ERROR event, with the Status code."""

    def __init__(self, code: int, reason: str = "", message: str = "") -> None:
        super().__init__(f"{code} {reason}: {message}".strip())
        self.code = code
        self.reason = reason
        self.message = message


class _Gone(Exception):
    """410: the resourceVersion we would resume from has been compacted away."""


# managedFields entries kept in the caches: the Ingress status writer reads its own to know
# whose addresses an Ingress shows (controller.ingressstatus.FIELD_MANAGER).
KEPT_FIELD_MANAGERS = frozenset({"haptic-ingress-status"})


def strip_managed_fields(obj: dict) -> dict:
    """Default transform: managedFields are large and no consumer of the caches reads them,
    except the entries of KEPT_FIELD_MANAGERS."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        kept = [
            m
            for m in meta.pop("managedFields", None) or []
            if isinstance(m, dict) and m.get("manager") in KEPT_FIELD_MANAGERS
        ]
        if kept:
            meta["managedFields"] = kept
    return obj


class Informer:
    """Keeps `store` in step with one collection and tells handlers about accepted changes.

    Handlers run on the informer's thread, after the store changed; they must be quick.
    """

    def __init__(
        self,
        api_client: ApiClient,
        resource: ResourceRef,
        *,
        indexers: Mapping[str, IndexFunc] | None = None,
        config: InformerConfig | None = None,
        handlers: Iterable[EventHandler] = (),
        transform: Callable[[dict], dict] = strip_managed_fields,
    ) -> None:
        self.api_client = api_client
        self.resource = resource
        self.kind = resource.kind
        self.config = config or InformerConfig()
        self.store = Store(indexers)
        self._transform = transform
        self._handlers: tuple[EventHandler, ...] = tuple(handlers)
        self._backoff = Backoff(self.config.backoff_initial, self.config.backoff_max)
        self._stopping = threading.Event()
        self._synced = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._response = None  # the open watch stream, so stop()/cut_watch() can break it
        self._cut = False
        self._resume_rv: str | None = None
        self.last_error: str | None = None
        self.stats = {"lists": 0, "watches": 0, "gone": 0, "errors": 0, "events": 0}

    # -- lifecycle ------------------------------------------------------------------------

    def add_handler(self, handler: EventHandler) -> None:
        with self._lock:
            self._handlers = (*self._handlers, handler)

    def start(self) -> Informer:
        if self._thread is not None:
            raise RuntimeError("informer already started")
        self._thread = threading.Thread(target=self._run, name=f"informer-{self.kind}", daemon=True)
        self._thread.start()
        return self

    def signal_stop(self) -> None:
        """Ask the loop to end (breaking an open watch stream) without waiting for it."""
        self._stopping.set()
        self._break_stream()

    def stop(self, timeout: float | None = None) -> bool:
        """Stop and join. Returns False if the thread is still blocked after `timeout` (it
        is then stuck in a request that ends at the latest after that request's timeout)."""
        self.signal_stop()
        if self._thread is None:
            return True
        self._thread.join(timeout)
        alive = self._thread.is_alive()
        if not alive:
            metrics.CACHE_SYNCED.labels(self.kind).set(0)
        return not alive

    @property
    def synced(self) -> bool:
        return self._synced.is_set()

    def wait_synced(self, timeout: float | None = None) -> bool:
        return self._synced.wait(timeout)

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def resume_resource_version(self) -> str | None:
        """Where the next watch resumes; None means the next round lists."""
        return self._resume_rv

    def cut_watch(self, resume_from: str | None = None) -> bool:
        """Break the open watch connection, as a network failure would; the loop resumes from
        its last resourceVersion, or from `resume_from` when given (diagnostics and tests: a
        too-old version must lead to 410 Gone and a relist). Returns False when no watch
        stream was open (nothing was broken; `resume_from` still applies to the next watch)."""
        with self._lock:
            if resume_from is not None:
                self._resume_rv = resume_from
            if self._response is None:
                return False
            self._cut = True
        self._break_stream()
        return True

    def _break_stream(self) -> None:
        with self._lock:
            resp = self._response
        if resp is None:
            return
        conn = getattr(resp, "connection", None)
        sock = getattr(conn, "sock", None)
        if sock is not None:
            with contextlib.suppress(OSError):  # already closed: nothing to break
                sock.shutdown(socket.SHUT_RDWR)

    # -- the loop -------------------------------------------------------------------------

    def _run(self) -> None:
        gone_in_a_row = 0
        while not self._stopping.is_set():
            try:
                if self._resume_rv is None:
                    self._list()
                started = time.monotonic()
                lines = self._watch()
                gone_in_a_row = 0
                was_cut = self._take_cut()  # a clean end: nothing left to excuse
                if lines == 0 and time.monotonic() - started < 1.0 and not was_cut:
                    # Ended at once with nothing in it (a server shedding watchers): back off
                    # instead of spinning on reconnects.
                    self._stopping.wait(self._backoff.next_delay())
            except _Gone:
                metrics.WATCH_GONE.labels(self.kind).inc()
                self.stats["gone"] += 1
                log.info("%s: resourceVersion %s expired, relisting", self.kind, self._resume_rv)
                self._resume_rv = None
                gone_in_a_row += 1
                if gone_in_a_row > 1:  # a fresh list's version already gone: do not spin
                    self._stopping.wait(self._backoff.next_delay())
            except Exception as exc:
                if self._stopping.is_set():
                    break
                if self._take_cut():
                    continue  # we broke the stream on purpose: resume at once
                self.stats["errors"] += 1
                metrics.WATCH_ERRORS.labels(self.kind).inc()
                self.last_error = f"{type(exc).__name__}: {exc}"
                delay = self._backoff.next_delay()
                log.warning("%s: %s; retrying in %.1fs", self.kind, self.last_error, delay)
                self._stopping.wait(delay)

    def _take_cut(self) -> bool:
        """Whether the last stream was broken by cut_watch() (and forget it)."""
        with self._lock:
            was_cut, self._cut = self._cut, False
        return was_cut

    def _request(self, query: list[tuple[str, str]], read_timeout: float):
        method, url, headers, body, post = self.api_client.param_serialize(
            "GET",
            self.resource.collection_path(),
            query_params=query,
            header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
        )
        rest = self.api_client.call_api(
            method,
            url,
            header_params=headers,
            body=body,
            post_params=post,
            _request_timeout=(self.config.connect_timeout, read_timeout),
        )
        return rest.response  # urllib3 response, body not read yet

    def _list(self) -> None:
        items: list[dict] = []
        cont = ""
        while True:
            query = [*self.resource.query(), ("limit", str(self.config.page_size))]
            if cont:
                query.append(("continue", cont))
            resp = self._request(query, self.config.list_read_timeout)
            try:
                raw = resp.data
            finally:
                resp.release_conn()
            if resp.status == 410:
                raise _Gone()
            if not 200 <= resp.status <= 299:
                raise _status_error(resp.status, raw)
            page = json.loads(raw)
            item_kind = (page.get("kind") or "").removesuffix("List")
            for obj in page.get("items") or []:
                obj.setdefault("apiVersion", page.get("apiVersion"))
                obj.setdefault("kind", item_kind)
                items.append(self._transform(obj))
            meta = page.get("metadata") or {}
            cont = meta.get("continue") or ""
            if not cont:
                break
        rv = meta.get("resourceVersion")
        changes = self.store.replace(items, rv)
        self._resume_rv = rv
        self.stats["lists"] += 1
        metrics.WATCH_LISTS.labels(self.kind).inc()
        metrics.CACHE_OBJECTS.labels(self.kind).set(len(self.store))
        self.last_error = None
        self._backoff.reset()
        first = not self._synced.is_set()
        self._synced.set()
        metrics.CACHE_SYNCED.labels(self.kind).set(1)
        log.debug("%s: listed %d objects at %s (first=%s)", self.kind, len(items), rv, first)
        self._notify(changes)
        self._emit(SYNCED, None)

    def _watch(self) -> int:
        """One watch request; returns how many lines it carried."""
        rv = self._resume_rv
        timeout = self.config.watch_timeout_seconds
        query = [
            *self.resource.query(),
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(timeout)),
        ]
        if rv:
            query.append(("resourceVersion", rv))
        resp = self._request(query, timeout + self.config.watch_read_grace)
        with self._lock:
            self._response = resp
        self.stats["watches"] += 1
        count = 0
        try:
            if self._stopping.is_set():
                return count
            if resp.status == 410:
                raise _Gone()
            if not 200 <= resp.status <= 299:
                raise _status_error(resp.status, resp.data)
            self.last_error = None  # the server answers again
            for line in _lines(resp):
                if self._stopping.is_set():
                    return count
                count += 1
                self._handle_line(line)
            return count
        finally:
            with self._lock:
                self._response = None
            resp.close()
            resp.release_conn()

    def _handle_line(self, line: bytes) -> None:
        event = json.loads(line)
        etype = event.get("type")
        obj = event.get("object") or {}
        if etype == "ERROR":
            code = int(obj.get("code") or 0)
            if code == 410:
                raise _Gone()
            raise ApiStatusError(code, obj.get("reason", ""), obj.get("message", ""))
        rv = resource_version(obj)
        if etype == "BOOKMARK":
            if rv:
                self._resume_rv = rv
            return
        change = self.store.apply(etype, self._transform(obj))
        if rv:
            self._resume_rv = rv
        # Something arrived: the connection works, so the next failure starts a new backoff.
        self._backoff.reset()
        self.last_error = None
        if change is not None:
            self.stats["events"] += 1
            metrics.CACHE_OBJECTS.labels(self.kind).set(len(self.store))
            self._notify([change])

    def _notify(self, changes: list[Change]) -> None:
        for change in changes:
            metrics.WATCH_EVENTS.labels(self.kind, change.type).inc()
            self._emit(change.type, change.obj)

    def _emit(self, etype: str, obj: dict | None) -> None:
        for handler in self._handlers:
            try:
                handler(self.kind, etype, obj)
            except Exception:
                # One broken subscriber must not stop the cache from following the server.
                log.exception("%s: handler %r failed", self.kind, handler)


def _status_error(code: int, raw: bytes) -> ApiStatusError:
    try:
        body = json.loads(raw)
        return ApiStatusError(code, body.get("reason", ""), body.get("message", ""))
    except (ValueError, AttributeError):
        return ApiStatusError(code, "", raw[:200].decode("utf-8", "replace") if raw else "")


def _lines(resp) -> Iterator[bytes]:
    """Newline-delimited JSON from a streaming response, yielded as soon as each line is in.
    Chunked bodies are read chunk by chunk; others with read1 (never waits for a full buffer).
    """
    buffer = b""
    if resp.chunked and resp.supports_chunked_reads():
        chunks: Iterable[bytes] = resp.read_chunked(decode_content=True)
    else:
        chunks = iter(lambda: resp.read1(65536), b"")
    for chunk in chunks:
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if line.strip():
                yield line
    if buffer.strip():
        yield buffer

"""The one list + watch loop (client-go's Reflector), feeding an event sink.

Everything here is I/O. It uses the official client's ApiClient for URL building, auth and
TLS, but reads responses itself: objects stay plain dicts (camelCase, as the server sent
them) and every request carries a (connect, read) timeout so a black-holed API server cannot
hang the loop.

Loop: list (paged) -> watch from the list's resourceVersion -> on a normal end (the server's
timeoutSeconds) or a cut connection, watch again from the last resourceVersion seen (events
and bookmarks) -> on 410 Gone, relist -> on any other failure (the sink's included), back off
with jitter and retry, resuming, not relisting, while the resourceVersion is still good.

What the objects mean is the sink's business (docs/watch.md): the controller's informer
keeps an indexed Store, the checkpoints mirror writes PostgreSQL, the hub mirror a cache of
the Active cluster, the local node its controllers' caches.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from kubernetes.client import ApiClient

from kubewatch.backoff import Backoff
from kubewatch.ndjson import lines

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReflectorConfig:
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


class Gone(Exception):
    """410: the resourceVersion we would resume from has been compacted away: relist."""


class Sink(Protocol):
    """Where a Reflector delivers what it reads; called on the reflector's thread.

    An exception raised by a sink method fails the round like a network error: the loop
    backs off and retries from the last resourceVersion the sink accepted.
    """

    def on_list(self, items: list[dict], resource_version: str) -> None:
        """A complete (re)list: every object of the collection at `resource_version`."""

    def on_event(self, event_type: str, obj: dict) -> None:
        """One ADDED, MODIFIED or DELETED event."""

    def on_bookmark(self, resource_version: str) -> None:
        """The server's progress mark: nothing changed up to `resource_version`."""

    def on_connected(self) -> None:
        """A watch request was answered 2xx: an error recorded before is no longer current."""

    def on_error(self, exc: Exception) -> None:
        """A round failed (a `Gone` when a relist follows); the loop retries after this."""


class Reflector:
    """Keeps `sink` in step with one collection (`path`, plus `query` such as selectors),
    on its own thread (start) or the caller's (run). The thread is called `name`."""

    def __init__(
        self,
        api_client: ApiClient,
        path: str,
        sink: Sink,
        *,
        query: Iterable[tuple[str, str]] = (),
        config: ReflectorConfig | None = None,
        name: str = "",
    ) -> None:
        self.api_client = api_client
        self.path = path
        self.query = tuple(query)
        self.sink = sink
        self.config = config or ReflectorConfig()
        self.name = name or path
        self._backoff = Backoff(self.config.backoff_initial, self.config.backoff_max)
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._response: Any = None  # the open watch stream, so stop()/cut_watch() can break it
        self._cut = False
        self._resume_rv: str | None = None
        self.last_error: str | None = None
        self.stats = {"lists": 0, "watches": 0, "gone": 0, "errors": 0}

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> Reflector:
        if self._thread is not None:
            raise RuntimeError("reflector already started")
        self._thread = threading.Thread(target=self.run, name=self.name, daemon=True)
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
        return not self._thread.is_alive()

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    @property
    def resume_resource_version(self) -> str | None:
        """Where the next watch resumes; None means the next round lists."""
        return self._resume_rv

    def resume_at(self, resource_version: str | None) -> None:
        """Watch from `resource_version` next instead of listing (None: list next), e.g. a
        version an earlier run stored; a 410 on it leads to a list as usual."""
        with self._lock:
            self._resume_rv = resource_version or None

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

    def run(self) -> None:
        """The loop itself, on the calling thread, until signal_stop()."""
        gone_in_a_row = 0
        while not self._stopping.is_set():
            try:
                if self._resume_rv is None:
                    self._list()
                started = time.monotonic()
                count = self._watch()
                gone_in_a_row = 0
                was_cut = self._take_cut()  # a clean end: nothing left to excuse
                if count == 0 and time.monotonic() - started < 1.0 and not was_cut:
                    # Ended at once with nothing in it (a server shedding watchers): back off
                    # instead of spinning on reconnects.
                    self._stopping.wait(self._backoff.next_delay())
            except Gone as exc:
                self.stats["gone"] += 1
                log.info("%s: resourceVersion %s expired, relisting", self.name, self._resume_rv)
                self._resume_rv = None
                self._tell_error(exc)
                gone_in_a_row += 1
                if gone_in_a_row > 1:  # a fresh list's version already gone: do not spin
                    self._stopping.wait(self._backoff.next_delay())
            except Exception as exc:
                if self._stopping.is_set():
                    break
                if self._take_cut():
                    continue  # we broke the stream on purpose: resume at once
                self.stats["errors"] += 1
                self.last_error = f"{type(exc).__name__}: {exc}"
                self._tell_error(exc)
                delay = self._backoff.next_delay()
                log.warning("%s: %s; retrying in %.1fs", self.name, self.last_error, delay)
                self._stopping.wait(delay)

    def _tell_error(self, exc: Exception) -> None:
        try:
            self.sink.on_error(exc)
        except Exception:
            # Recording a failure must not end the loop (the sink's store may be what is down).
            log.exception("%s: sink failed to record %s", self.name, type(exc).__name__)

    def _take_cut(self) -> bool:
        """Whether the last stream was broken by cut_watch() (and forget it)."""
        with self._lock:
            was_cut, self._cut = self._cut, False
        return was_cut

    def _request(self, query: list[tuple[str, str]], read_timeout: float) -> Any:
        method, url, headers, body, post = self.api_client.param_serialize(
            "GET",
            self.path,
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
            query = [*self.query, ("limit", str(self.config.page_size))]
            if cont:
                query.append(("continue", cont))
            resp = self._request(query, self.config.list_read_timeout)
            try:
                raw = resp.data
            finally:
                resp.release_conn()
            if resp.status == 410:
                raise Gone()
            if not 200 <= resp.status <= 299:
                raise status_error(resp.status, raw)
            page = json.loads(raw)
            item_kind = (page.get("kind") or "").removesuffix("List")
            for obj in page.get("items") or []:
                obj.setdefault("apiVersion", page.get("apiVersion"))
                obj.setdefault("kind", item_kind)
                items.append(obj)
            meta = page.get("metadata") or {}
            cont = meta.get("continue") or ""
            if not cont:
                break
        rv = str(meta.get("resourceVersion") or "")
        # Counted before the sink sees it: a reader woken by the sink finds the count current.
        self.stats["lists"] += 1
        self.last_error = None
        self._backoff.reset()
        self.sink.on_list(items, rv)
        self._resume_rv = rv
        log.debug("%s: listed %d objects at %s", self.name, len(items), rv)

    def _watch(self) -> int:
        """One watch request; returns how many lines it carried."""
        rv = self._resume_rv
        timeout = self.config.watch_timeout_seconds
        query = [
            *self.query,
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
                raise Gone()
            if not 200 <= resp.status <= 299:
                raise status_error(resp.status, resp.data)
            self.last_error = None  # the server answers again
            self.sink.on_connected()
            for line in lines(resp):
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
                raise Gone()
            raise ApiStatusError(code, obj.get("reason", ""), obj.get("message", ""))
        rv = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        if etype == "BOOKMARK":
            if rv:
                self.sink.on_bookmark(rv)
                self._resume_rv = rv
            return
        self.sink.on_event(etype, obj)
        if rv:
            self._resume_rv = rv  # only once the sink has it: a failed write is read again
        # Something arrived: the connection works, so the next failure starts a new backoff.
        self._backoff.reset()
        self.last_error = None


def status_error(code: int, raw: bytes) -> ApiStatusError:
    """The ApiStatusError of a non-2xx answer, from its Status body when it has one."""
    try:
        body = json.loads(raw)
        return ApiStatusError(code, body.get("reason", ""), body.get("message", ""))
    except (ValueError, AttributeError):
        return ApiStatusError(code, "", raw[:200].decode("utf-8", "replace") if raw else "")

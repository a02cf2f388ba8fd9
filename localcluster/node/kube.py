"""The node's only door to the API server: the official kubernetes client over HTTP, with raw
JSON bodies (dicts in, dicts out) and a small list+watch informer."""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines

from .objutil import normalized, rv_newer

__all__ = ["MERGE_PATCH", "Informer", "normalized", "raw", "rv_newer"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]
MERGE_PATCH = "application/merge-patch+json"  # the client picks JSON patch for dicts otherwise
Handler = Callable[[str, Obj], None]  # (event type, object)


def make_api_client(api_url: str | None, kubeconfig: Path | None) -> client.ApiClient:
    if kubeconfig is not None:
        api = config.new_client_from_config(config_file=str(kubeconfig))
        if api_url:
            api.configuration.host = api_url
    else:
        cfg = client.Configuration()
        cfg.host = api_url or "http://127.0.0.1:6443"
        api = client.ApiClient(cfg)
    api.user_agent = "localcluster-node"
    return api


def raw(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Obj:
    """Call a generated client method and return the JSON body as a dict."""
    kwargs.setdefault("_request_timeout", 10)
    resp = fn(*args, _preload_content=False, **kwargs)
    data = resp.data
    return json.loads(data) if data else {}


def status_of(exc: BaseException) -> int | None:
    return exc.status if isinstance(exc, ApiException) else None


def key_of(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta['name']}" if ns else meta["name"]


class Informer:
    """List then watch one collection, keep a cache, and call `handler` for every change.

    Watches are short (a read timeout ends an idle one) and resume from the last
    resourceVersion; a 410 Gone or any error leads to a fresh list, whose differences with
    the cache are delivered as events so nothing is missed.
    """

    def __init__(
        self,
        name: str,
        list_fn: Callable[..., Any],
        handler: Handler,
        stop: threading.Event,
        read_timeout: float = 10.0,
    ) -> None:
        self.name = name
        self._list_fn = list_fn
        self._handler = handler
        self._stop = stop
        self._read_timeout = read_timeout
        self._lock = threading.Lock()
        self._cache: dict[str, Obj] = {}
        self._rv = ""
        self.synced = threading.Event()
        self._resp: Any = None
        self._thread = threading.Thread(target=self._run, name=f"informer-{name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout: float) -> None:
        resp = self._resp
        if resp is not None:
            # Best effort: unblock a read in progress so the thread sees the stop flag.
            with contextlib.suppress(Exception):
                resp.shutdown()
        self._thread.join(timeout)

    def items(self) -> list[Obj]:
        with self._lock:
            return list(self._cache.values())

    def get(self, key: str) -> Obj | None:
        with self._lock:
            return self._cache.get(key)

    def upsert_local(self, obj: Obj) -> bool:
        """Put an object into the cache unless the cache holds a newer version; controllers
        call this with their own writes so the next reconcile sees them at once."""
        key = key_of(obj)
        with self._lock:
            cur = self._cache.get(key)
            same = cur is not None and cur["metadata"].get("uid") == obj["metadata"].get("uid")
            new_rv = obj["metadata"].get("resourceVersion", "")
            if same and rv_newer(cur["metadata"].get("resourceVersion", ""), new_rv):
                return False  # an event older than a local write; equal ones still count
            self._cache[key] = obj
            return True

    def remove_local(self, obj: Obj) -> None:
        key = key_of(obj)
        with self._lock:
            cur = self._cache.get(key)
            if cur is None:
                return
            uid = obj["metadata"].get("uid")
            if uid is None or cur["metadata"].get("uid") == uid:
                del self._cache[key]

    def _emit(self, kind: str, obj: Obj) -> None:
        try:
            self._handler(kind, obj)
        except Exception:
            log.exception("%s handler failed on %s", self.name, kind)

    def _relist(self) -> None:
        body = raw(self._list_fn)
        items = body.get("items") or []
        fresh = {key_of(o): o for o in items}
        with self._lock:
            old = self._cache
            self._cache = fresh
            self._rv = (body.get("metadata") or {}).get("resourceVersion", "")
        for key, obj in fresh.items():
            prev = old.get(key)
            if prev is None:
                self._emit("ADDED", obj)
            elif prev.get("metadata", {}).get("resourceVersion") != obj["metadata"].get(
                "resourceVersion"
            ):
                self._emit("MODIFIED", obj)
        for key, obj in old.items():
            if key not in fresh:
                self._emit("DELETED", obj)
        self.synced.set()

    def _watch_once(self) -> bool:
        """One watch request; False when a relist is needed."""
        try:
            resp = self._list_fn(
                watch=True,
                resource_version=self._rv,
                allow_watch_bookmarks=True,
                timeout_seconds=300,
                _preload_content=False,
                _request_timeout=(5, self._read_timeout),
            )
        except ApiException as exc:
            return exc.status != 410
        self._resp = resp
        try:
            for line in iter_resp_lines(resp):
                if self._stop.is_set():
                    return True
                if not line:
                    continue
                event = json.loads(line)
                kind, obj = event.get("type"), event.get("object") or {}
                if kind == "ERROR":
                    return obj.get("code") != 410
                rv = (obj.get("metadata") or {}).get("resourceVersion")
                if rv:
                    self._rv = rv
                if kind == "BOOKMARK":
                    continue
                if kind == "DELETED":
                    self.remove_local(obj)
                elif not self.upsert_local(obj):
                    continue  # older than what a local write already put in the cache
                self._emit(kind, obj)
        except Exception as exc:  # read timeout on an idle watch, or a dropped connection
            if not _is_timeout(exc):
                log.debug("%s watch ended: %s", self.name, exc)
        finally:
            self._resp = None
            resp.release_conn()
        return True

    def _run(self) -> None:
        need_list = True
        backoff = 0.2
        while not self._stop.is_set():
            try:
                if need_list:
                    self._relist()
                    need_list = False
                need_list = not self._watch_once()
                backoff = 0.2
            except Exception as exc:
                log.debug("%s: %s; relisting", self.name, exc)
                need_list = True
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 5.0)


def _is_timeout(exc: BaseException) -> bool:
    text = f"{type(exc).__name__} {exc}".lower()
    return "timeout" in text or "timed out" in text


def retry_on_conflict(fn: Callable[[], Any], attempts: int = 10) -> Any:
    """Read-modify-write helper: rerun fn while the server answers 409 Conflict."""
    for i in range(attempts):
        try:
            return fn()
        except ApiException as exc:
            if exc.status != 409 or i == attempts - 1:
                raise
            time.sleep(0.02 * (i + 1))
    return None

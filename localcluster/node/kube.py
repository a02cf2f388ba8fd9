"""The node's only door to the API server: the official kubernetes client over HTTP, with raw
JSON bodies (dicts in, dicts out) and the caches of the node's controllers (Informer, a
kubewatch Reflector's sink)."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from kubewatch import Reflector, ReflectorConfig

from .objutil import normalized, rv_newer

__all__ = ["MERGE_PATCH", "NODE_USER_AGENT", "Informer", "normalized", "raw", "rv_newer"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]
# The User-Agent of every request the node sends (tests/fidelity/coverage.py counts them).
NODE_USER_AGENT = "localcluster-node"
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
    api.user_agent = NODE_USER_AGENT
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
    """One collection in a cache, calling `handler` for every change: the sink of a kubewatch
    Reflector (bookmarks, resume, relist on 410, backoff, timeouts; docs/watch.md).

    Watches are short (`read_timeout` seconds, server side) and resume from the last
    resourceVersion; a relist's differences with the cache are delivered as events so
    nothing is missed.
    """

    def __init__(
        self,
        name: str,
        api_client: client.ApiClient,
        path: str,
        handler: Handler,
        stop: threading.Event,
        *,
        query: Iterable[tuple[str, str]] = (),
        read_timeout: float = 10.0,
    ) -> None:
        self.name = name
        self._handler = handler
        self._stop = stop
        self._lock = threading.Lock()
        self._cache: dict[str, Obj] = {}
        self.synced = threading.Event()
        config = ReflectorConfig(
            watch_timeout_seconds=max(1, int(read_timeout)),
            backoff_initial=0.2,
            backoff_max=5.0,
        )
        self.reflector = Reflector(
            api_client, path, self, query=query, config=config, name=f"informer-{name}"
        )

    def start(self) -> None:
        self.reflector.start()

    def join(self, timeout: float) -> None:
        self.reflector.stop(timeout)

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

    # -- the sink -------------------------------------------------------------------------

    def on_list(self, items: list[Obj], resource_version: str) -> None:
        fresh = {key_of(o): o for o in items}
        with self._lock:
            old = self._cache
            self._cache = fresh
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

    def on_event(self, event_type: str, obj: Obj) -> None:
        if event_type == "DELETED":
            self.remove_local(obj)
        elif not self.upsert_local(obj):
            return  # older than what a local write already put in the cache
        self._emit(event_type, obj)

    def on_bookmark(self, resource_version: str) -> None:
        """The cache follows events; the reflector keeps the position."""

    def on_connected(self) -> None:
        """Nothing recorded to clear."""

    def on_error(self, exc: Exception) -> None:
        log.debug("%s: %s", self.name, exc)


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

"""One resource collection kept in an indexed Store (client-go's Informer).

The list + watch loop is kubewatch's Reflector (bookmarks, relist on 410, jittered backoff,
timeouts); the Informer is its sink: it applies what the reflector reads to the Store, keeps
the watch metrics and tells handlers about accepted changes.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kubernetes.client import ApiClient

from controller.watch import metrics
from controller.watch.resources import ResourceRef
from controller.watch.store import Change, IndexFunc, Store
from kubewatch import Gone, Reflector, ReflectorConfig

log = logging.getLogger(__name__)

SYNCED = "SYNCED"  # pseudo event type: a (re)list completed

# (kind, event type, object); object is None for SYNCED.
EventHandler = Callable[[str, str, "dict | None"], None]

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


# Strings up to this length are interned in cached objects: keys, names, labels, addresses and
# timestamps repeat across thousands of objects; longer ones (certificates) rarely do.
INTERNED_MAX = 64


def interned(value: Any) -> Any:
    """`value` (decoded JSON) rebuilt with its keys and short strings interned: each watch
    event is decoded on its own, so without this every cached object holds its own copy of
    "metadata", "namespace", "addresses"... At 5,000 Ingresses with their Services and
    EndpointSlices the caches take about a third less memory (docs/watch.md, issue 19)."""
    if isinstance(value, dict):
        return {sys.intern(k): interned(v) for k, v in value.items()}
    if isinstance(value, list):
        return [interned(v) for v in value]
    if isinstance(value, str) and len(value) <= INTERNED_MAX:
        return sys.intern(value)
    return value


def cached_form(obj: dict) -> dict:
    """Default transform: managedFields stripped (strip_managed_fields), strings interned."""
    return interned(strip_managed_fields(obj))


class Informer:
    """Keeps `store` in step with one collection and tells handlers about accepted changes.

    Handlers run on the reflector's thread, after the store changed; they must be quick.
    """

    def __init__(
        self,
        api_client: ApiClient,
        resource: ResourceRef,
        *,
        indexers: Mapping[str, IndexFunc] | None = None,
        config: ReflectorConfig | None = None,
        handlers: Iterable[EventHandler] = (),
        transform: Callable[[dict], dict] = cached_form,
    ) -> None:
        self.api_client = api_client
        self.resource = resource
        self.kind = resource.kind
        self.store = Store(indexers)
        self._transform = transform
        self._handlers: tuple[EventHandler, ...] = tuple(handlers)
        self._synced = threading.Event()
        self._lock = threading.Lock()
        self._events = 0
        self.reflector = Reflector(
            api_client,
            resource.collection_path(),
            self,
            query=resource.query(),
            config=config,
            name=f"informer-{self.kind}",
        )
        self.config = self.reflector.config

    # -- lifecycle (the reflector's) ------------------------------------------------------

    def add_handler(self, handler: EventHandler) -> None:
        with self._lock:
            self._handlers = (*self._handlers, handler)

    def start(self) -> Informer:
        self.reflector.start()
        return self

    def signal_stop(self) -> None:
        """Ask the loop to end (breaking an open watch stream) without waiting for it."""
        self.reflector.signal_stop()

    def stop(self, timeout: float | None = None) -> bool:
        """Stop and join; False if the reflector's thread is still blocked after `timeout`."""
        stopped = self.reflector.stop(timeout)
        if stopped:
            metrics.CACHE_SYNCED.labels(self.kind).set(0)
        return stopped

    @property
    def synced(self) -> bool:
        return self._synced.is_set()

    def wait_synced(self, timeout: float | None = None) -> bool:
        return self._synced.wait(timeout)

    @property
    def alive(self) -> bool:
        return self.reflector.alive

    @property
    def resume_resource_version(self) -> str | None:
        return self.reflector.resume_resource_version

    def cut_watch(self, resume_from: str | None = None) -> bool:
        """See Reflector.cut_watch (diagnostics and tests)."""
        return self.reflector.cut_watch(resume_from)

    @property
    def last_error(self) -> str | None:
        return self.reflector.last_error

    @property
    def stats(self) -> dict[str, int]:
        return {**self.reflector.stats, "events": self._events}

    # -- the sink -------------------------------------------------------------------------

    def on_list(self, items: list[dict], resource_version: str) -> None:
        changes = self.store.replace([self._transform(o) for o in items], resource_version)
        metrics.WATCH_LISTS.labels(self.kind).inc()
        metrics.CACHE_OBJECTS.labels(self.kind).set(len(self.store))
        self._synced.set()
        metrics.CACHE_SYNCED.labels(self.kind).set(1)
        self._notify(changes)
        self._emit(SYNCED, None)

    def on_event(self, event_type: str, obj: dict) -> None:
        change = self.store.apply(event_type, self._transform(obj))
        if change is not None:
            self._events += 1
            metrics.CACHE_OBJECTS.labels(self.kind).set(len(self.store))
            self._notify([change])

    def on_bookmark(self, resource_version: str) -> None:
        """The Store's version follows events; a bookmark only moves the reflector's."""

    def on_connected(self) -> None:
        """Nothing to clear: last_error is the reflector's."""

    def on_error(self, exc: Exception) -> None:
        if isinstance(exc, Gone):
            metrics.WATCH_GONE.labels(self.kind).inc()
        else:
            metrics.WATCH_ERRORS.labels(self.kind).inc()

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

"""The store's state and its one write path: objects, indexes, resourceVersion, commit.

Every change goes through `commit`: the next resourceVersion, the journal, the watch history
and the watchers, in that order, so events leave in resourceVersion order.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from localcluster.persist import Journal
from localcluster.resources import Registry, ResourceType, resource_types_from_crd
from localcluster.store.model import CRD_KEY, Event, ObjKey, Watcher, clone


class StoreState:
    def __init__(
        self,
        registry: Registry | None = None,
        history_limit: int = 10000,
        journal: Journal | None = None,
        call_soon: Callable[[Callable[[], None]], None] | None = None,
        call_later: Callable[[float, Callable[[], None]], None] | None = None,
    ) -> None:
        self.registry = registry or Registry()
        self.rv = 0
        self.history: deque[Event] = deque()
        self.history_limit = history_limit
        # Every event with rv > history_start is still in self.history.
        self.history_start = 0
        self.objects: dict[str, dict[tuple[str, str], dict[str, Any]]] = {}
        self.by_uid: dict[str, ObjKey] = {}
        self.dependents: dict[str, set[ObjKey]] = {}
        self.watchers: dict[str, set[Watcher]] = {}
        self.journal = journal
        self._call_soon = call_soon
        self._call_later = call_later
        self._pending: deque[tuple[str, Any]] = deque()
        self._scheduled = False
        self._service_ips = 0

    def _rt(self, key: str) -> ResourceType:
        rt = self.registry.by_key(key)
        assert rt is not None, key
        return rt

    def _index(
        self, key: str, ns: str, name: str, old: dict[str, Any] | None, new: dict[str, Any] | None
    ) -> None:
        ref = (key, ns, name)
        if old is not None:
            uid = old["metadata"].get("uid")
            if uid and self.by_uid.get(uid) == ref and new is None:
                del self.by_uid[uid]
            for o in old["metadata"].get("ownerReferences") or []:
                deps = self.dependents.get(o.get("uid"))
                if deps is not None:
                    deps.discard(ref)
                    if not deps:
                        del self.dependents[o.get("uid")]
        if new is not None:
            uid = new["metadata"].get("uid")
            if uid:
                self.by_uid[uid] = ref
            for o in new["metadata"].get("ownerReferences") or []:
                if o.get("uid"):
                    self.dependents.setdefault(o["uid"], set()).add(ref)

    def _commit(
        self,
        rt: ResourceType,
        ns: str,
        name: str,
        old: dict[str, Any] | None,
        new: dict[str, Any] | None,
    ) -> dict[str, Any]:
        """Assign the next resourceVersion, store, journal, record history and notify."""
        self.rv += 1
        key = rt.key
        bucket = self.objects.setdefault(key, {})
        if new is None:
            assert old is not None
            final = clone(old)
            final["metadata"]["resourceVersion"] = str(self.rv)
            bucket.pop((ns, name), None)
            etype = "DELETED"
            event_obj = final
        else:
            new["metadata"]["resourceVersion"] = str(self.rv)
            bucket[(ns, name)] = new
            etype = "ADDED" if old is None else "MODIFIED"
            event_obj = new
        self._index(key, ns, name, old, new)
        if self.journal is not None:
            self.journal.append(self.rv, (key, ns, name), new)
            if self.journal.appended > max(20000, 4 * self._count()):
                # Keep the journal from growing without bound in a long run.
                self.journal.compact(self.rv, self.all_objects())
        event = Event(self.rv, key, etype, ns, event_obj, old)
        self.history.append(event)
        while len(self.history) > self.history_limit:
            self.history_start = self.history.popleft().rv
        for watcher in list(self.watchers.get(key, ())):
            if watcher.namespace is None or watcher.namespace == ns:
                watcher.push(event)
        self._after_commit(rt, ns, name, old, new)
        return event_obj

    def _after_commit(
        self,
        rt: ResourceType,
        ns: str,
        name: str,
        old: dict[str, Any] | None,
        new: dict[str, Any] | None,
    ) -> None:
        """The follow-up of a committed write: a new CRD's kinds become known here; the
        garbage collector (gc.py) extends this to queue its work."""
        if rt.key == CRD_KEY and new is not None:
            for t in resource_types_from_crd(new):
                self.registry.add(t)

    def _count(self) -> int:
        return sum(len(b) for b in self.objects.values())

    def all_objects(self) -> dict[ObjKey, dict[str, Any]]:
        return {(k, ns, n): o for k, b in self.objects.items() for (ns, n), o in b.items()}

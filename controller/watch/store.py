"""Indexed, thread-safe object cache fed by list + watch (the informer's store).

No I/O. Objects are plain dicts as the API server sends them; the store never mutates an
object it holds (an update replaces it), so readers may keep references without copying.

Ordering: Kubernetes resourceVersions are opaque, but every server we talk to hands out
increasing integers. When both sides are integers an event older than (or as old as) what
the store holds is dropped, so a replayed or reordered event cannot roll an object back;
deletions leave a bounded tombstone so a late ADDED cannot resurrect a deleted object.
"""

from __future__ import annotations

import operator
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubewatch import selectors


def same_objects(old: Sequence[Any], new: Sequence[Any]) -> bool:
    """Whether two reads of the store hold the very same objects, in order: since an update
    replaces an object and never edits it, identity says nothing changed."""
    return old is new or (len(old) == len(new) and all(map(operator.is_, old, new)))


ADDED = "ADDED"
MODIFIED = "MODIFIED"
DELETED = "DELETED"

Key = tuple[str, str]  # (namespace or "", name)
IndexFunc = Callable[[dict], Iterable[str]]


def object_key(obj: Mapping) -> Key:
    meta = obj.get("metadata") or {}
    return (meta.get("namespace") or "", meta.get("name") or "")


def resource_version(obj: Mapping) -> str | None:
    return (obj.get("metadata") or {}).get("resourceVersion")


def rv_compare(a: str | None, b: str | None) -> int | None:
    """-1/0/1 when both resourceVersions are integers, else None (unordered)."""
    if a is None or b is None or not a.isdigit() or not b.isdigit():
        return None
    ia, ib = int(a), int(b)
    return (ia > ib) - (ia < ib)


@dataclass(frozen=True)
class Change:
    """One change the store accepted: what happened, the new object (or the deleted one)."""

    type: str
    obj: dict
    old: dict | None = None


# Ready-made index functions.
def index_by_namespace(obj: dict) -> list[str]:
    return [object_key(obj)[0]]


def index_by_label(label: str) -> IndexFunc:
    """Index by the value of one label (EndpointSlices by `kubernetes.io/service-name`)."""

    def index(obj: dict) -> list[str]:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        value = labels.get(label)
        if value is None:
            return []
        # Namespaced value: a label value only means something inside its namespace.
        return [f"{object_key(obj)[0]}/{value}"]

    return index


def index_by_readiness_gate(obj: dict) -> list[str]:
    """Index pods by the condition types listed under `spec.readinessGates`."""
    gates = (obj.get("spec") or {}).get("readinessGates") or []
    return [g["conditionType"] for g in gates if isinstance(g, dict) and g.get("conditionType")]


SERVICE_NAME_LABEL = "kubernetes.io/service-name"


class Store:
    """Objects by (namespace, name) plus named secondary indexes."""

    def __init__(
        self, indexers: Mapping[str, IndexFunc] | None = None, *, tombstone_limit: int = 10000
    ) -> None:
        self._lock = threading.RLock()
        self._items: dict[Key, dict] = {}
        self._indexers: dict[str, IndexFunc] = dict(indexers or {})
        self._indices: dict[str, dict[str, set[Key]]] = {n: {} for n in self._indexers}
        self._tombstones: OrderedDict[Key, str] = OrderedDict()
        self._tombstone_limit = tombstone_limit
        self._resource_version: str | None = None
        # Reads of every object, kept until a change (issue 19: every render reads every
        # cache, and the incremental path compares unchanged kinds by identity): the keys in
        # order until one comes or goes, the objects until one is replaced.
        self._sorted_keys: list[Key] | None = None
        self._listed: tuple[dict, ...] | None = None

    # -- mutation -------------------------------------------------------------------------

    def apply(self, event_type: str, obj: dict) -> Change | None:
        """Apply one watch event; returns the accepted change, or None for a stale/no-op one."""
        key = object_key(obj)
        rv = resource_version(obj)
        with self._lock:
            self._advance(rv)
            old = self._items.get(key)
            if event_type in (ADDED, MODIFIED):
                if old is not None and _not_newer(rv, resource_version(old)):
                    return None
                tomb = self._tombstones.get(key)
                if old is None and tomb is not None and _not_newer(rv, tomb):
                    return None
                self._tombstones.pop(key, None)
                self._put(key, obj, old)
                return Change(MODIFIED if old is not None else ADDED, obj, old)
            if event_type == DELETED:
                if old is None:
                    self._remember_deleted(key, rv)
                    return None
                if rv_compare(rv, resource_version(old)) == -1:
                    return None  # a deletion older than what we hold: a newer incarnation
                self._put(key, None, old)
                self._remember_deleted(key, rv)
                return Change(DELETED, obj, old)
            raise ValueError(f"unknown event type {event_type!r}")

    def replace(self, objects: Iterable[dict], list_resource_version: str | None) -> list[Change]:
        """Replace the whole content with a fresh list; returns the difference as changes."""
        fresh = {object_key(o): o for o in objects}
        changes: list[Change] = []
        with self._lock:
            for key, old in list(self._items.items()):
                if key not in fresh:
                    self._put(key, None, old)
                    changes.append(Change(DELETED, old, old))
            for key in sorted(fresh):
                obj = fresh[key]
                old = self._items.get(key)
                if old is None:
                    self._put(key, obj, None)
                    changes.append(Change(ADDED, obj, None))
                elif resource_version(old) != resource_version(obj):
                    self._put(key, obj, old)
                    changes.append(Change(MODIFIED, obj, old))
            # A list is a consistent read: earlier tombstones say nothing about it.
            self._tombstones.clear()
            self._resource_version = list_resource_version
        return changes

    def _advance(self, rv: str | None) -> None:
        if rv is not None and rv_compare(rv, self._resource_version) != -1:
            self._resource_version = rv

    def _remember_deleted(self, key: Key, rv: str | None) -> None:
        if rv is None:
            return
        known = self._tombstones.get(key)
        if known is not None and rv_compare(rv, known) != 1:
            rv = known  # a late, older deletion must not lower the bar
        self._tombstones[key] = rv
        self._tombstones.move_to_end(key)
        while len(self._tombstones) > self._tombstone_limit:
            self._tombstones.popitem(last=False)

    def _put(self, key: Key, obj: dict | None, old: dict | None) -> None:
        self._listed = None
        if old is None or obj is None:
            self._sorted_keys = None
        if old is not None:
            for name, fn in self._indexers.items():
                index = self._indices[name]
                for value in fn(old):
                    bucket = index.get(value)
                    if bucket is not None:
                        bucket.discard(key)
                        if not bucket:
                            del index[value]
        if obj is None:
            self._items.pop(key, None)
            return
        self._items[key] = obj
        for name, fn in self._indexers.items():
            for value in fn(obj):
                self._indices[name].setdefault(value, set()).add(key)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._sorted_keys, self._listed = None, None
            self._indices = {n: {} for n in self._indexers}
            self._tombstones.clear()
            self._resource_version = None

    # -- reads ----------------------------------------------------------------------------

    @property
    def resource_version(self) -> str | None:
        """The newest resourceVersion seen (list or event)."""
        with self._lock:
            return self._resource_version

    def get(self, namespace: str, name: str) -> dict | None:
        with self._lock:
            return self._items.get((namespace or "", name))

    def objects(self) -> tuple[dict, ...]:
        """All objects sorted by (namespace, name): the very same tuple until one changes."""
        with self._lock:
            if self._listed is None:
                if self._sorted_keys is None:
                    self._sorted_keys = sorted(self._items)
                self._listed = tuple(self._items[k] for k in self._sorted_keys)
            return self._listed

    def list(self) -> list[dict]:
        """All objects sorted by (namespace, name)."""
        return list(self.objects())

    def list_keys(self) -> list[Key]:
        with self._lock:
            if self._sorted_keys is None:
                self._sorted_keys = sorted(self._items)
            return list(self._sorted_keys)

    def by_index(self, index: str, value: str) -> list[dict]:
        """Objects whose index function yielded `value`, sorted by (namespace, name)."""
        with self._lock:
            keys = self._indices[index].get(value, ())
            return [self._items[k] for k in sorted(keys)]

    def index_values(self, index: str) -> list[str]:
        with self._lock:
            return sorted(self._indices[index])

    def select(self, selector: Mapping | None, namespace: str | None = None) -> list[dict]:
        """Objects whose labels match a LabelSelector dict (optionally in one namespace)."""
        reqs = selectors.requirements(selector)
        out = []
        for obj in self.list():
            if namespace is not None and object_key(obj)[0] != namespace:
                continue
            labels = (obj.get("metadata") or {}).get("labels") or {}
            if all(r.matches(labels) for r in reqs):
                out.append(obj)
        return out

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)


def _not_newer(rv: str | None, than: str | None) -> bool:
    cmp = rv_compare(rv, than)
    return cmp is not None and cmp <= 0

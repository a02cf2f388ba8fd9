"""Garbage collection: what nobody deletes by hand.

Dependents of a deleted owner, foreground and orphan deletion, terminating namespaces, the
objects of a removed CRD, and core/v1 Events past their TTL. Work is queued by a commit
(`_after_commit`) and run after the write that caused it (`run_pending`), as the real
server's garbage collector runs after the write.
"""

from __future__ import annotations

import calendar
import time
from collections.abc import Callable, Iterable
from typing import Any

from localcluster.errors import ApiError
from localcluster.resources import ResourceType
from localcluster.store.model import CRD_KEY, NS_KEY, DeleteOptions, clone
from localcluster.store.writes import Writes

_GC_MANAGER = "generic-garbage-collector"


class GarbageCollection(Writes):
    def _schedule(self, task: str, arg: Any) -> None:
        self._pending.append((task, arg))
        if self._call_soon is not None and not self._scheduled:
            self._scheduled = True
            self._call_soon(self.run_pending)

    def _after_commit(
        self,
        rt: ResourceType,
        ns: str,
        name: str,
        old: dict[str, Any] | None,
        new: dict[str, Any] | None,
    ) -> None:
        super()._after_commit(rt, ns, name, old, new)
        if rt.key == CRD_KEY and new is None and old is not None:
            spec = old.get("spec") or {}
            self._schedule(
                "crd_gone", (spec.get("group", ""), (spec.get("names") or {}).get("plural", ""))
            )
        if new is None and old is not None:
            uid = old["metadata"].get("uid")
            if uid:
                self._schedule("owner_gone", uid)
            for o in old["metadata"].get("ownerReferences") or []:
                self._schedule("foreground_check", o.get("uid"))
        if new is not None and new["metadata"].get("deletionTimestamp"):
            finalizers = new["metadata"].get("finalizers") or []
            if "foregroundDeletion" in finalizers:
                self._schedule("foreground", new["metadata"]["uid"])
            if "orphan" in finalizers:
                self._schedule("orphan", new["metadata"]["uid"])
            if rt.key == NS_KEY:
                self._schedule("namespace", name)

    def expire_events(self, ttl_seconds: float, now: float | None = None) -> int:
        """Remove core/v1 Events older than the TTL (the real server's --event-ttl, 1 h by
        default); watchers see them DELETED. Returns how many went."""
        rt = self.registry.get("", "v1", "events")
        if rt is None:
            return 0
        cutoff = (time.time() if now is None else now) - ttl_seconds
        expired = []
        for (ns, name), obj in self.objects.get(rt.key, {}).items():
            created = obj["metadata"].get("creationTimestamp", "")
            try:
                then = calendar.timegm(time.strptime(created[:19], "%Y-%m-%dT%H:%M:%S"))
            except ValueError:
                continue
            if then < cutoff:
                expired.append((ns, name, obj))
        for ns, name, obj in expired:
            self._remove(rt, ns, name, obj)
        return len(expired)

    def run_pending(self) -> None:
        """Process queued GC work (owner gone, foreground/orphan deletion, namespaces)."""
        self._scheduled = False
        rounds = 0
        while self._pending and rounds < 10000:
            rounds += 1
            task, arg = self._pending.popleft()
            try:
                getattr(self, f"_gc_{task}")(arg)
            except ApiError:
                continue

    def _obj_by_uid(self, uid: str | None) -> tuple[ResourceType, dict[str, Any]] | None:
        ref = self.by_uid.get(uid or "")
        if ref is None:
            return None
        rt = self.registry.by_key(ref[0])
        obj = self.objects.get(ref[0], {}).get((ref[1], ref[2]))
        if rt is None or obj is None:
            return None
        return rt, obj

    def _dependents_of(self, uid: str) -> Iterable[tuple[ResourceType, dict[str, Any]]]:
        for key, ns, name in sorted(self.dependents.get(uid, ())):
            rt = self.registry.by_key(key)
            obj = self.objects.get(key, {}).get((ns, name))
            if rt is not None and obj is not None:
                yield rt, obj

    def _drop_owner_ref(self, rt: ResourceType, obj: dict[str, Any], uid: str) -> None:
        self._drop_from_list(rt, obj, "ownerReferences", lambda o: o.get("uid") == uid)

    def _remove_finalizer(self, rt: ResourceType, obj: dict[str, Any], finalizer: str) -> None:
        self._drop_from_list(rt, obj, "finalizers", lambda f: f == finalizer)

    def _drop_from_list(
        self, rt: ResourceType, obj: dict[str, Any], field: str, drop: Callable[[Any], bool]
    ) -> None:
        """Write `obj` without the metadata list entries `drop` picks (the list goes if empty,
        as the server never keeps an empty ownerReferences or finalizers)."""
        new = clone(obj)
        kept = [e for e in new["metadata"].get(field) or [] if not drop(e)]
        if kept:
            new["metadata"][field] = kept
        else:
            new["metadata"].pop(field, None)
        m = obj["metadata"]
        self._update(rt, m.get("namespace", ""), m["name"], obj, new, "", _GC_MANAGER)

    def _gc_owner_gone(self, uid: str) -> None:
        for rt, dep in list(self._dependents_of(uid)):
            refs = dep["metadata"].get("ownerReferences") or []
            alive = [o for o in refs if o.get("uid") != uid and self._obj_by_uid(o.get("uid"))]
            m = dep["metadata"]
            if alive:
                self._drop_owner_ref(rt, dep, uid)
            elif not m.get("deletionTimestamp"):
                self.delete(rt, m.get("namespace", ""), m["name"], DeleteOptions())

    def _gc_foreground(self, uid: str) -> None:
        found = self._obj_by_uid(uid)
        if found is None:
            return
        for rt, dep in list(self._dependents_of(uid)):
            m = dep["metadata"]
            if not m.get("deletionTimestamp"):
                self.delete(
                    rt, m.get("namespace", ""), m["name"], DeleteOptions(propagation="Foreground")
                )
        self._gc_foreground_check(uid)

    def _gc_foreground_check(self, uid: str | None) -> None:
        found = self._obj_by_uid(uid)
        if found is None:
            return
        rt, owner = found
        if "foregroundDeletion" not in (owner["metadata"].get("finalizers") or []):
            return
        blocking = [
            dep
            for _, dep in self._dependents_of(owner["metadata"]["uid"])
            if any(
                o.get("uid") == uid and o.get("blockOwnerDeletion")
                for o in dep["metadata"].get("ownerReferences") or []
            )
        ]
        if not blocking:
            self._remove_finalizer(rt, owner, "foregroundDeletion")

    def _gc_orphan(self, uid: str) -> None:
        found = self._obj_by_uid(uid)
        if found is None:
            return
        for rt, dep in list(self._dependents_of(uid)):
            self._drop_owner_ref(rt, dep, uid)
        rt, owner = self._obj_by_uid(uid) or found
        if "orphan" in (owner["metadata"].get("finalizers") or []):
            self._remove_finalizer(rt, owner, "orphan")

    def _gc_namespace(self, name: str) -> None:
        ns_rt = self._rt(NS_KEY)
        ns_obj = self.objects.get(NS_KEY, {}).get(("", name))
        if ns_obj is None or not ns_obj["metadata"].get("deletionTimestamp"):
            return
        for key, bucket in list(self.objects.items()):
            rt = self.registry.by_key(key)
            if rt is None or not rt.namespaced:
                continue
            for (ns, obj_name), obj in list(bucket.items()):
                if ns == name and not obj["metadata"].get("deletionTimestamp"):
                    # Pods on a node go gracefully; the node (or the fallback) removes them.
                    self.delete(rt, ns, obj_name, DeleteOptions())
        if self._namespace_has_content(name):
            if self._call_later is not None:
                self._call_later(0.2, lambda: self._schedule("namespace", name))
            return
        ns_obj = self.objects.get(NS_KEY, {}).get(("", name))
        if ns_obj is not None and not ns_obj["metadata"].get("finalizers"):
            self._remove(ns_rt, "", name, ns_obj)

    def _gc_crd_gone(self, arg: tuple[str, str]) -> None:
        group, plural = arg
        key = f"{group}/{plural}"
        rt = self.registry.by_key(key)
        if rt is not None:
            for (ns, name), obj in list(self.objects.get(key, {}).items()):
                self._remove(rt, ns, name, obj)
        self.registry.remove_group_plural(group, plural)

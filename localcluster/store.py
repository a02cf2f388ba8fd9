"""The object store: one global resourceVersion, the write pipeline, watch history and GC.

Synchronous and single-threaded: every write runs to completion without yielding, so writes
are serialized and events leave in resourceVersion order. The server calls it from its event
loop; I/O is limited to the optional journal.
"""

from __future__ import annotations

import base64
import calendar
import json
import random
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from localcluster import builtin, schema, ssa
from localcluster.errors import (
    STALE,
    ApiError,
    already_exists,
    conflict,
    gone,
    invalid,
    not_found,
)
from localcluster.patches import json_patch, merge_patch, strategic_merge
from localcluster.persist import Journal
from localcluster.resources import Registry, ResourceType, resource_types_from_crd
from localcluster.selectors import FieldRequirement, Requirement, fields_match, labels_match

ObjKey = tuple[str, str, str]  # (resource key, namespace, name)
CRD_KEY = "apiextensions.k8s.io/customresourcedefinitions"
NS_KEY = "/namespaces"
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"


def now_iso(t: float | None = None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if t is None else t))


def clone(obj: Any) -> Any:
    return json.loads(json.dumps(obj))


@dataclass
class Event:
    rv: int
    key: str
    type: str  # ADDED, MODIFIED, DELETED
    namespace: str
    obj: dict[str, Any]
    old: dict[str, Any] | None
    _line: bytes | None = field(default=None, repr=False)

    def line(self) -> bytes:
        # Serialized once and shared by every watcher.
        if self._line is None:
            self._line = (
                json.dumps({"type": self.type, "object": self.obj}, separators=(",", ":")) + "\n"
            ).encode()
        return self._line


# kube-apiserver's answer to a PUT without a resourceVersion where one is required.
MISSING_RV_CAUSE = {
    "field": "metadata.resourceVersion",
    "reason": "FieldValueInvalid",
    "message": "Invalid value: 0x0: must be specified for an update",
}
MISSING_MANAGER_CAUSE = {
    "field": "fieldManager",
    "reason": "FieldValueRequired",
    "message": "Required value: is required for apply patch",
}


class Watcher(Protocol):
    key: str
    namespace: str | None

    def push(self, event: Event) -> None: ...


@dataclass
class DeleteOptions:
    propagation: str = "Background"
    uid: str | None = None
    resource_version: str | None = None
    grace_period: int | None = None
    dry_run: bool = False

    @classmethod
    def parse(cls, body: dict[str, Any] | None, query: dict[str, str]) -> DeleteOptions:
        body = body or {}
        pre = body.get("preconditions") or {}
        grace = body.get("gracePeriodSeconds", query.get("gracePeriodSeconds"))
        propagation = body.get("propagationPolicy") or query.get("propagationPolicy")
        if body.get("orphanDependents") is True or query.get("orphanDependents") == "true":
            propagation = propagation or "Orphan"
        return cls(
            propagation=propagation or "Background",
            uid=pre.get("uid"),
            resource_version=pre.get("resourceVersion"),
            grace_period=int(grace) if grace is not None else None,
            dry_run=bool(body.get("dryRun")) or "dryRun" in query,
        )


class Store:
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

    # --- startup ---------------------------------------------------------------------------

    def restore(
        self,
        rv: int,
        objects: dict[ObjKey, dict[str, Any]],
        records: list[tuple[int, ObjKey, dict[str, Any] | None]] | None = None,
    ) -> None:
        """Load a snapshot (CRDs first, so their kinds are known), then replay the journal
        records after it into the watch history, so watches resume across a restart."""
        self.rv = rv
        self.history_start = rv
        for (key, ns, name), obj in sorted(objects.items(), key=lambda kv: kv[0][0] != CRD_KEY):
            self.objects.setdefault(key, {})[(ns, name)] = obj
            self._index(key, ns, name, None, obj)
            if key == CRD_KEY:
                for rt in resource_types_from_crd(obj):
                    self.registry.add(rt)
        for rec_rv, (key, ns, name), obj in records or []:
            bucket = self.objects.setdefault(key, {})
            old = bucket.get((ns, name))
            if obj is None:
                if old is None:
                    continue
                bucket.pop((ns, name))
                final = clone(old)
                final["metadata"]["resourceVersion"] = str(rec_rv)
                event = Event(rec_rv, key, "DELETED", ns, final, old)
            else:
                bucket[(ns, name)] = obj
                event = Event(rec_rv, key, "ADDED" if old is None else "MODIFIED", ns, obj, old)
                if key == CRD_KEY:
                    for rt in resource_types_from_crd(obj):
                        self.registry.add(rt)
            self._index(key, ns, name, old, obj)
            self.history.append(event)
            self.rv = max(self.rv, rec_rv)
            while len(self.history) > self.history_limit:
                self.history_start = self.history.popleft().rv
        services = self.objects.get("/services", {}).values()
        self._service_ips = len(list(services))

    def ensure_namespaces(self) -> None:
        ns_rt = self._rt(NS_KEY)
        for name in SYSTEM_NAMESPACES:
            if ("", name) not in self.objects.get(NS_KEY, {}):
                self.create(ns_rt, "", {"metadata": {"name": name}}, "localcluster")

    def install_crd(self, crd: dict[str, Any]) -> None:
        """Create or update a CRD from a manifest (idempotent: equal specs write nothing)."""
        rt = self._rt(CRD_KEY)
        name = crd["metadata"]["name"]
        existing = self.objects.get(CRD_KEY, {}).get(("", name))
        if existing is None:
            self.create(rt, "", clone(crd), "localcluster")
        elif existing.get("spec") != crd.get("spec"):
            body = clone(existing)
            body["spec"] = clone(crd["spec"])
            self.replace(rt, "", name, body, "", "localcluster")

    # --- helpers ---------------------------------------------------------------------------

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

    def _schedule(self, task: str, arg: Any) -> None:
        self._pending.append((task, arg))
        if self._call_soon is not None and not self._scheduled:
            self._scheduled = True
            self._call_soon(self.run_pending)

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
        if rt.key == CRD_KEY:
            if new is not None:
                for t in resource_types_from_crd(new):
                    self.registry.add(t)
            elif old is not None:
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

    def _count(self) -> int:
        return sum(len(b) for b in self.objects.values())

    def all_objects(self) -> dict[ObjKey, dict[str, Any]]:
        return {(k, ns, n): o for k, b in self.objects.items() for (ns, n), o in b.items()}

    # --- reads -----------------------------------------------------------------------------

    def get(self, rt: ResourceType, ns: str, name: str) -> dict[str, Any]:
        obj = self.objects.get(rt.key, {}).get((ns, name))
        if obj is None:
            raise not_found(rt.plural, rt.group, name)
        return obj

    def _state_at(
        self,
        key: str,
        rv: int,
        too_old: str = "The resourceVersion for the provided list is too old.",
    ) -> dict[tuple[str, str], dict[str, Any]]:
        """The objects of one kind as they were at resourceVersion rv (from history)."""
        if rv < self.history_start:
            raise gone(too_old)
        if rv > self.rv:
            raise ApiError(504, f"Too large resource version: {rv}, current: {self.rv}", "Timeout")
        state = dict(self.objects.get(key, {}))
        for event in reversed(self.history):
            if event.rv <= rv:
                break
            if event.key != key:
                continue
            k = (event.namespace, event.obj["metadata"]["name"])
            if event.old is None:
                state.pop(k, None)
            else:
                state[k] = event.old
        return state

    def list(
        self,
        rt: ResourceType,
        ns: str | None,
        labels: list[Requirement] | None = None,
        fields: list[FieldRequirement] | None = None,
        limit: int = 0,
        continue_token: str | None = None,
        exact_rv: int | None = None,
    ) -> tuple[list[dict[str, Any]], int, str | None, int | None]:
        """(items, list resourceVersion, continue token, remaining count).

        Later pages of a paged list, and lists with resourceVersionMatch=Exact, are served
        from the state at that resourceVersion, rebuilt from the watch history."""
        list_rv = self.rv
        start_after: tuple[str, str] | None = None
        if continue_token:
            try:
                token = json.loads(base64.urlsafe_b64decode(continue_token.encode()))
                list_rv = int(token["rv"])
                start_after = (token["ns"], token["name"])
            except (ValueError, KeyError, TypeError):
                raise ApiError(400, "continue key is not valid") from None
            state = self._state_at(
                rt.key,
                list_rv,
                "The provided continue parameter is too old to display a consistent list "
                "result. You can start a new list without the continue parameter, or use the "
                "continue token in this response to retrieve the remainder of the results.",
            )
        elif exact_rv is not None:
            list_rv = exact_rv
            state = self._state_at(rt.key, list_rv)
        else:
            state = self.objects.get(rt.key, {})
        keys = sorted(k for k in state if ns is None or k[0] == ns)
        if start_after is not None:
            keys = [k for k in keys if k > start_after]
        items = []
        next_token = None
        remaining = None
        for n, k in enumerate(keys):
            obj = state[k]
            if labels and not labels_match(labels, obj):
                continue
            if fields and not fields_match(fields, obj):
                continue
            if limit and len(items) >= limit:
                last = items[-1]["metadata"]
                raw = json.dumps(
                    {"rv": list_rv, "ns": last.get("namespace", ""), "name": last["name"]}
                )
                next_token = base64.urlsafe_b64encode(raw.encode()).decode()
                if not labels and not fields:
                    remaining = len(keys) - n
                break
            items.append(obj)
        return items, list_rv, next_token, remaining

    def watch(
        self, rt: ResourceType, ns: str | None, resource_version: str | None, watcher: Watcher
    ) -> list[Event]:
        """Register a watcher; return the events it must see first (synthetic ADDED for a
        watch without a resourceVersion, else the history after it). 410 when too old."""
        key = rt.key
        if resource_version in (None, "", "0"):
            initial = [
                Event(int(obj["metadata"]["resourceVersion"]), key, "ADDED", k[0], obj, None)
                for k, obj in sorted(self.objects.get(key, {}).items())
                if ns is None or k[0] == ns
            ]
        else:
            try:
                since = int(resource_version)
            except ValueError:
                raise ApiError(400, f"invalid resource version: {resource_version}") from None
            if since < self.history_start:
                raise gone(f"too old resource version: {since} ({self.history_start + 1})")
            initial = [
                e
                for e in self.history
                if e.rv > since and e.key == key and (ns is None or e.namespace == ns)
            ]
        self.watchers.setdefault(key, set()).add(watcher)
        return initial

    def unwatch(self, watcher: Watcher) -> None:
        self.watchers.get(watcher.key, set()).discard(watcher)

    # --- writes ----------------------------------------------------------------------------

    def _check_namespace(self, rt: ResourceType, ns: str) -> None:
        if not rt.namespaced:
            return
        ns_obj = self.objects.get(NS_KEY, {}).get(("", ns))
        if ns_obj is None:
            raise not_found("namespaces", "", ns)
        if ns_obj["metadata"].get("deletionTimestamp"):
            raise ApiError(
                403,
                f'{rt.plural} "" is forbidden: unable to create new content in namespace {ns} '
                "because it is being terminated",
                "Forbidden",
            )

    def _validate(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        name = obj["metadata"].get("name", "")
        causes = builtin.validate_name(rt, name)
        if rt.custom:
            causes += schema.validate(rt.schema, obj)
        else:
            causes += builtin.validate_builtin(rt, obj)
        causes += builtin.validate_metadata(obj["metadata"])
        causes += builtin.validate_limits(rt, obj)
        if causes:
            raise invalid(rt.kind, rt.group, name, causes)
        size = len(json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode())
        if size > builtin.MAX_OBJECT_BYTES:
            raise ApiError(413, "etcdserver: request is too large", "RequestEntityTooLarge")

    def _shape(self, rt: ResourceType) -> ssa.Shape:
        return ssa.Shape(rt.list_keys, rt.set_lists)

    def create(
        self,
        rt: ResourceType,
        ns: str,
        body: dict[str, Any],
        manager: str,
        dry_run: bool = False,
        managers: list[ssa.Manager] | None = None,
    ) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise ApiError(400, "the body of the request must be an object")
        obj = clone(body)
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise ApiError(400, "metadata must be an object")
        ns = _place_new(rt, ns, meta)
        name = _name_new(rt, meta)
        self._check_namespace(rt, ns)
        if (ns, name) in self.objects.get(rt.key, {}):
            raise already_exists(rt.plural, rt.group, name)
        _stamp_new(rt, obj)
        builtin.prepare_create(rt, obj)
        builtin.normalize(rt, obj)
        if rt.custom:
            if rt.status_subresource:
                obj.pop("status", None)
            obj = schema.apply_defaults(rt.schema, obj)
        if rt.kind == "Service":
            self._allocate_cluster_ip(obj)
        if rt.key == CRD_KEY:
            self._crd_status(obj)
        self._validate(rt, obj)
        if managers is None:
            managers = ssa.record_update(
                None, obj, [], manager, "", rt.api_version, now_iso(), self._shape(rt)
            )
        obj["metadata"]["managedFields"] = ssa.render_managed(managers)
        if dry_run:
            return obj
        return self._commit(rt, ns, name, None, obj)

    def _allocate_cluster_ip(self, obj: dict[str, Any]) -> None:
        spec = obj["spec"]
        if spec.get("clusterIP") in (None, ""):
            self._service_ips += 1
            n = self._service_ips
            spec["clusterIP"] = f"10.96.{(n // 250) % 250}.{n % 250 + 1}"
        if spec["clusterIP"] != "None":
            spec.setdefault("clusterIPs", [spec["clusterIP"]])

    def _crd_status(self, obj: dict[str, Any]) -> None:
        names = (obj.get("spec") or {}).get("names") or {}
        t = now_iso()
        obj["status"] = {
            "acceptedNames": names,
            "storedVersions": [
                v["name"] for v in (obj.get("spec") or {}).get("versions") or [] if v.get("storage")
            ],
            "conditions": [
                {
                    "type": "NamesAccepted",
                    "status": "True",
                    "reason": "NoConflicts",
                    "message": "no conflicts found",
                    "lastTransitionTime": t,
                },
                {
                    "type": "Established",
                    "status": "True",
                    "reason": "InitialNamesAccepted",
                    "message": "the initial names have been accepted",
                    "lastTransitionTime": t,
                },
            ],
        }

    def _update(
        self,
        rt: ResourceType,
        ns: str,
        name: str,
        old: dict[str, Any],
        new: dict[str, Any],
        subresource: str,
        manager: str,
        dry_run: bool = False,
        managers: list[ssa.Manager] | None = None,
        binding: bool = False,
    ) -> dict[str, Any]:
        """The common tail of PUT, PATCH and apply: precondition, subresource rules,
        immutable metadata, defaults, validation, generation, managedFields, no-op detection."""
        new = _carry_over(rt, name, old, new, subresource)
        meta, old_meta = new["metadata"], old["metadata"]
        if rt.custom:
            new = schema.apply_defaults(rt.schema, new)
            meta = new["metadata"]
        if rt.key == CRD_KEY:
            new["status"] = old.get("status")
        builtin.normalize(rt, new)
        if subresource != "status" and not binding:
            causes = builtin.validate_update(rt, old, new)
            if causes:
                raise invalid(rt.kind, rt.group, name, causes)
        self._validate(rt, new)
        if rt.generation and _spec_part(old) != _spec_part(new):
            meta["generation"] = int(old_meta.get("generation", 1)) + 1
        if managers is None:
            managers = ssa.record_update(
                _without_managed(old),
                _without_managed(new),
                ssa.parse_managed(old_meta.get("managedFields")),
                manager,
                subresource,
                rt.api_version,
                now_iso(),
                self._shape(rt),
            )
        meta["managedFields"] = ssa.render_managed(managers)
        meta["resourceVersion"] = old_meta["resourceVersion"]
        if _same(old, new):
            return old  # no-op writes do not bump the resourceVersion
        if (
            meta.get("deletionTimestamp")
            and not meta.get("finalizers")
            and old_meta.get("finalizers")
            and int(meta.get("deletionGracePeriodSeconds") or 0) == 0
        ):
            # The last finalizer is gone: the deletion completes.
            if dry_run:
                return new
            return self._remove(rt, ns, name, new)
        if dry_run:
            return new
        return self._commit(rt, ns, name, old, new)

    def _remove(self, rt: ResourceType, ns: str, name: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Remove the object for good (DELETED event); the GC follows up on dependents."""
        stored = self.objects.get(rt.key, {}).get((ns, name))
        if stored is not obj:
            # The final state (e.g. without its last finalizer) is what DELETED carries.
            self.objects.setdefault(rt.key, {})[(ns, name)] = obj
            if stored is not None:
                self._index(rt.key, ns, name, stored, obj)
        return self._commit(rt, ns, name, obj, None)

    def replace(
        self,
        rt: ResourceType,
        ns: str,
        name: str,
        body: dict[str, Any],
        subresource: str,
        manager: str,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        old = self.get(rt, ns, name)
        meta = body.get("metadata") if isinstance(body, dict) else None
        if not rt.unconditional_update and not (meta or {}).get("resourceVersion"):
            raise invalid(rt.plural, rt.group, name, [MISSING_RV_CAUSE])
        return self._update(rt, ns, name, old, clone(body), subresource, manager, dry_run)

    def patch(
        self,
        rt: ResourceType,
        ns: str,
        name: str,
        patch_type: str,
        body: Any,
        subresource: str,
        manager: str | None,
        force: bool = False,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        if patch_type == "apply":
            return self.apply(rt, ns, name, body, subresource, manager, force, dry_run)
        old = self.get(rt, ns, name)
        manager = manager or "unknown"
        if patch_type == "json":
            new = json_patch(old, body)
        elif patch_type == "merge":
            if not isinstance(body, dict):
                raise ApiError(400, "merge patch body must be a JSON object")
            new = merge_patch(old, body)
        elif patch_type == "strategic":
            if not rt.strategic_merge:
                raise ApiError(
                    415,
                    "the body of the request was in an unknown format - accepted media types "
                    "include: application/json-patch+json, application/merge-patch+json, "
                    "application/apply-patch+yaml",
                )
            if not isinstance(body, dict):
                raise ApiError(400, "strategic merge patch body must be a JSON object")
            new = strategic_merge(old, body, rt.list_keys, rt.set_lists)
        else:
            raise ApiError(415, f"unsupported patch type {patch_type}")
        new = clone(new)
        # A resourceVersion in the patch is a precondition; otherwise the patch applies to
        # whatever version is current.
        patched_rv = (new.get("metadata") or {}).get("resourceVersion")
        if patch_type != "json" and "resourceVersion" not in ((body or {}).get("metadata") or {}):
            patched_rv = None
        if isinstance(new.get("metadata"), dict) and patched_rv is None:
            new["metadata"].pop("resourceVersion", None)
        return self._update(rt, ns, name, old, new, subresource, manager, dry_run)

    def apply(
        self,
        rt: ResourceType,
        ns: str,
        name: str,
        body: Any,
        subresource: str,
        manager: str | None,
        force: bool,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        if not manager:
            raise invalid("PatchOptions", "meta.k8s.io", "", [MISSING_MANAGER_CAUSE])
        if not isinstance(body, dict):
            raise ApiError(400, "apply body must be an object")
        applied = clone(body)
        meta = applied.setdefault("metadata", {})
        if meta.get("name") not in (None, name):
            raise ApiError(400, "the name of the object does not match the name on the URL")
        want_rv = meta.pop("resourceVersion", None)
        want_uid = meta.get("uid")
        for f in ("uid", "creationTimestamp", "managedFields", "generation", "namespace"):
            meta.pop(f, None)
        applied.pop("apiVersion", None)
        applied.pop("kind", None)
        if subresource == "status":
            applied = {"status": applied.get("status", {})}
        elif rt.status_subresource:
            applied.pop("status", None)
        existing = self.objects.get(rt.key, {}).get((ns, name))
        shape = self._shape(rt)
        t = now_iso()
        if existing is None:
            if subresource:
                raise not_found(rt.plural, rt.group, name)
            result = ssa.server_side_apply(
                {}, applied, [], manager, "", rt.api_version, t, force, shape
            )
            obj = result.obj
            obj.setdefault("metadata", {})["name"] = name
            return self.create(rt, ns, obj, manager, dry_run, managers=result.managers)
        if want_rv not in (None, "") and str(want_rv) != existing["metadata"]["resourceVersion"]:
            raise conflict(rt.plural, rt.group, name, STALE)
        if want_uid not in (None, "") and want_uid != existing["metadata"].get("uid"):
            # As the real server answers an applied configuration naming another object's
            # uid: the uid is immutable, so the apply is refused (a uid precondition).
            raise invalid(
                rt.kind,
                rt.group,
                name,
                [
                    {
                        "field": "metadata.uid",
                        "reason": "FieldValueInvalid",
                        "message": f'Invalid value: "{want_uid}": field is immutable',
                    }
                ],
            )
        live = _without_managed(existing)
        managers = ssa.parse_managed(existing["metadata"].get("managedFields"))
        result = ssa.server_side_apply(
            live, applied, managers, manager, subresource, rt.api_version, t, force, shape
        )
        if result.conflicts:
            raise _apply_conflict(rt, name, result.conflicts, rt.api_version)
        new = result.obj
        new["metadata"].pop("resourceVersion", None)
        return self._update(
            rt, ns, name, existing, new, subresource, manager, dry_run, managers=result.managers
        )

    def delete(
        self, rt: ResourceType, ns: str, name: str, options: DeleteOptions
    ) -> tuple[dict[str, Any], bool]:
        """Delete (or start deleting) an object. Returns (object, removed_now)."""
        obj = self.get(rt, ns, name)
        meta = obj["metadata"]
        if options.uid is not None and options.uid != meta.get("uid"):
            raise conflict(
                rt.plural,
                rt.group,
                name,
                f"Precondition failed: UID in precondition: {options.uid}, "
                f"UID in object meta: {meta.get('uid')}",
            )
        if options.resource_version is not None and (
            str(options.resource_version) != meta["resourceVersion"]
        ):
            raise conflict(
                rt.plural,
                rt.group,
                name,
                "Precondition failed: ResourceVersion in precondition: "
                f"{options.resource_version}, ResourceVersion in object meta: "
                f"{meta['resourceVersion']}",
            )
        new = clone(obj)
        new_meta = new["metadata"]
        finalizers = list(new_meta.get("finalizers") or [])
        uid = meta.get("uid")
        policy_finalizer = {"Foreground": "foregroundDeletion", "Orphan": "orphan"}.get(
            options.propagation
        )
        if policy_finalizer and self.dependents.get(uid) and policy_finalizer not in finalizers:
            finalizers.append(policy_finalizer)
        # A pod bound to a node terminates gracefully: the node stops its containers and then
        # deletes it with gracePeriodSeconds=0.
        grace: int | None = None
        bound_pod = (
            rt.kind == "Pod"
            and bool((obj.get("spec") or {}).get("nodeName"))
            and (obj.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        )
        if bound_pod:
            grace = options.grace_period
            if grace is None:
                grace = int((obj.get("spec") or {}).get("terminationGracePeriodSeconds", 30))
        is_ns = rt.key == NS_KEY
        pending = (
            bool(finalizers)
            or (grace is not None and grace > 0)
            or (is_ns and self._namespace_has_content(name))
        )
        if not pending:
            if options.dry_run:
                return obj, True
            return self._remove(rt, ns, name, obj), True
        shorter = grace is not None and grace < int(meta.get("deletionGracePeriodSeconds") or 0)
        unchanged = finalizers == list(meta.get("finalizers") or [])
        if meta.get("deletionTimestamp") and unchanged and not shorter:
            return obj, False  # already being deleted
        if not new_meta.get("deletionTimestamp") or shorter:
            # A second delete may only shorten the grace period (as the node does with 0).
            new_meta["deletionTimestamp"] = now_iso(time.time() + (grace or 0))
            new_meta["deletionGracePeriodSeconds"] = grace or 0
        if finalizers:
            new_meta["finalizers"] = finalizers
        if is_ns:
            new.setdefault("status", {})["phase"] = "Terminating"
        if options.dry_run:
            return new, False
        out = self._commit(rt, ns, name, obj, new)
        if bound_pod and grace and self._call_later is not None:
            # Without a node to finish the deletion, the pod goes a little after its grace.
            self._call_later(grace + 5.0, lambda: self._force_remove(rt, ns, name, uid))
        return out, False

    def bind(
        self, rt: ResourceType, ns: str, name: str, body: dict[str, Any], manager: str
    ) -> None:
        """pods/binding: set spec.nodeName once (409 if already bound or the uid differs)."""
        pod = self.get(rt, ns, name)
        target = (body.get("target") or {}).get("name")
        if not target:
            raise invalid(
                "Binding",
                "",
                name,
                [
                    {
                        "field": "target.name",
                        "reason": "FieldValueRequired",
                        "message": "Required value",
                    }
                ],
            )
        want_uid = (body.get("metadata") or {}).get("uid")
        if want_uid and want_uid != pod["metadata"].get("uid"):
            raise conflict(
                rt.plural,
                rt.group,
                name,
                "Precondition failed: UID in precondition: "
                f"{want_uid}, UID in object meta: {pod['metadata'].get('uid')}",
            )
        current = (pod.get("spec") or {}).get("nodeName")
        if current:
            raise conflict(
                rt.plural, rt.group, name, f'pod {name} is already assigned to node "{current}"'
            )
        new = clone(pod)
        new["spec"]["nodeName"] = target
        self._update(rt, ns, name, pod, new, "", manager, binding=True)

    def _force_remove(self, rt: ResourceType, ns: str, name: str, uid: str | None) -> None:
        obj = self.objects.get(rt.key, {}).get((ns, name))
        if obj is None or obj["metadata"].get("uid") != uid:
            return
        if not obj["metadata"].get("finalizers"):
            self._remove(rt, ns, name, obj)
        elif obj["metadata"].get("deletionGracePeriodSeconds"):
            # Finalizers still pending: the grace is over, their removal completes the delete.
            new = clone(obj)
            new["metadata"]["deletionGracePeriodSeconds"] = 0
            self._commit(rt, ns, name, obj, new)

    def delete_collection(
        self,
        rt: ResourceType,
        ns: str | None,
        labels: list[Requirement],
        fields: list[FieldRequirement],
        options: DeleteOptions,
    ) -> list[dict[str, Any]]:
        items, _, _, _ = self.list(rt, ns, labels, fields)
        out = []
        for obj in list(items):
            m = obj["metadata"]
            try:
                out.append(self.delete(rt, m.get("namespace", ""), m["name"], options)[0])
            except ApiError:
                continue
        return out

    def _namespace_has_content(self, ns: str) -> bool:
        for key, bucket in self.objects.items():
            rt = self.registry.by_key(key)
            if rt is not None and rt.namespaced and any(k[0] == ns for k in bucket):
                return True
        return False

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

    # --- garbage collection ------------------------------------------------------------------

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
        new = clone(obj)
        refs = [o for o in new["metadata"].get("ownerReferences") or [] if o.get("uid") != uid]
        if refs:
            new["metadata"]["ownerReferences"] = refs
        else:
            new["metadata"].pop("ownerReferences", None)
        m = obj["metadata"]
        self._update(
            rt, m.get("namespace", ""), m["name"], obj, new, "", "generic-garbage-collector"
        )

    def _remove_finalizer(self, rt: ResourceType, obj: dict[str, Any], finalizer: str) -> None:
        new = clone(obj)
        fins = [f for f in new["metadata"].get("finalizers") or [] if f != finalizer]
        if fins:
            new["metadata"]["finalizers"] = fins
        else:
            new["metadata"].pop("finalizers", None)
        m = obj["metadata"]
        self._update(
            rt, m.get("namespace", ""), m["name"], obj, new, "", "generic-garbage-collector"
        )

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


def _spec_part(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


def _without_managed(obj: dict[str, Any]) -> dict[str, Any]:
    out = dict(obj)
    meta = dict(out.get("metadata") or {})
    meta.pop("managedFields", None)
    out["metadata"] = meta
    return out


def _same(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Equal apart from resourceVersion and managedFields timestamps (a change of ownership
    alone is a real write, a re-apply of the same config is not)."""

    def strip(o: dict[str, Any]) -> dict[str, Any]:
        out = dict(o)
        meta = dict(out.get("metadata") or {})
        meta["managedFields"] = [
            {k: v for k, v in e.items() if k != "time"} for e in meta.get("managedFields") or []
        ]
        meta.pop("resourceVersion", None)
        out["metadata"] = meta
        return out

    return strip(old) == strip(new)


def _apply_conflict(
    rt: ResourceType, name: str, conflicts: list[tuple[str, ssa.Path]], api_version: str
) -> ApiError:
    causes = [
        {
            "reason": "FieldManagerConflict",
            "message": f'conflict with "{m}" using {api_version}',
            "field": ssa.describe_path(p),
        }
        for m, p in conflicts
    ]
    # The real server's wording: one conflict inline, several grouped by manager.
    if len(causes) == 1:
        text = f"{causes[0]['message']}: {causes[0]['field']}"
    else:
        by_manager: dict[str, list[str]] = {}
        for m, p in conflicts:
            by_manager.setdefault(m, []).append(ssa.describe_path(p))
        text = "\n".join(
            f'conflicts with "{m}" using {api_version}:\n' + "\n".join(f"- {f}" for f in fields)
            for m, fields in by_manager.items()
        )
    plural = "conflict" if len(causes) == 1 else "conflicts"
    return ApiError(
        409,
        f"Apply failed with {len(causes)} {plural}: {text}",
        "Conflict",
        {"name": name, "group": rt.group, "kind": rt.plural, "causes": causes},
    )


__all__ = ["DeleteOptions", "Event", "Store", "clone"]


def _place_new(rt: ResourceType, ns: str, meta: dict[str, Any]) -> str:
    """The namespace of an object being created: the request's (the body may only repeat
    it), or "" for a cluster-scoped kind."""
    if not rt.namespaced:
        meta.pop("namespace", None)
        return ""
    body_ns = meta.get("namespace")
    if body_ns and body_ns != ns:
        raise ApiError(
            400,
            "the namespace of the provided object does not match the namespace sent on the request",
        )
    meta["namespace"] = ns
    return ns


def _name_new(rt: ResourceType, meta: dict[str, Any]) -> str:
    """The name of an object being created, generated from generateName when absent."""
    if not meta.get("name"):
        if not meta.get("generateName"):
            raise invalid(
                rt.kind,
                rt.group,
                "",
                [
                    {
                        "field": "metadata.name",
                        "reason": "FieldValueRequired",
                        "message": "Required value: name or generateName is required",
                    }
                ],
            )
        suffix = "".join(random.choice(_NAME_CHARS) for _ in range(5))
        meta["name"] = meta["generateName"] + suffix
    return meta["name"]


def _stamp_new(rt: ResourceType, obj: dict[str, Any]) -> None:
    """What the server sets on every new object, dropping what a client may not set."""
    meta = obj["metadata"]
    obj["apiVersion"] = rt.api_version
    obj["kind"] = rt.kind
    for f in (
        "resourceVersion",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "selfLink",
        "managedFields",
    ):
        meta.pop(f, None)
    meta["uid"] = str(uuid.uuid4())
    meta["creationTimestamp"] = now_iso()
    if rt.generation:
        meta["generation"] = 1
    else:
        meta.pop("generation", None)


def _carry_over(
    rt: ResourceType, name: str, old: dict[str, Any], new: dict[str, Any], subresource: str
) -> dict[str, Any]:
    """The body of an update checked against the stored object (name, resourceVersion
    precondition, no finalizer added while deleting), with what it may not change taken
    from the stored object: status outside /status, everything but status on /status,
    and the immutable metadata."""
    if not isinstance(new, dict) or not isinstance(new.get("metadata", {}), dict):
        raise ApiError(400, "the body of the request must be an object")
    meta = new.setdefault("metadata", {})
    if meta.get("name") not in (None, name):
        raise ApiError(
            400,
            f"the name of the object ({meta.get('name')}) does not match "
            f"the name on the URL ({name})",
        )
    want_rv = meta.get("resourceVersion")
    if want_rv not in (None, "") and str(want_rv) != old["metadata"]["resourceVersion"]:
        raise conflict(rt.plural, rt.group, name, STALE)
    old_meta = old["metadata"]
    if subresource == "status":
        # /status changes only status (and nothing else).
        merged = clone(old)
        if "status" in new:
            merged["status"] = new["status"]
        else:
            merged.pop("status", None)
        new = merged
        meta = new["metadata"]
    elif rt.status_subresource:
        if "status" in old:
            new["status"] = clone(old["status"])
        else:
            new.pop("status", None)
    new["apiVersion"] = rt.api_version
    new["kind"] = rt.kind
    for f in (
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "namespace",
        "generation",
    ):
        if f in old_meta:
            meta[f] = old_meta[f]
        else:
            meta.pop(f, None)
    meta["name"] = name
    meta.pop("selfLink", None)
    if old_meta.get("deletionTimestamp"):
        added = set(meta.get("finalizers") or []) - set(old_meta.get("finalizers") or [])
        if added:
            raise invalid(
                rt.kind,
                rt.group,
                name,
                [
                    {
                        "field": "metadata.finalizers",
                        "reason": "FieldValueForbidden",
                        "message": "Forbidden: no new finalizers can be added if the object is "
                        "being deleted",
                    }
                ],
            )
    return new

"""`Store`: the state, reads, writes and garbage collection of this package, with startup."""

from __future__ import annotations

from typing import Any

from localcluster.resources import resource_types_from_crd
from localcluster.store.gc import GarbageCollection
from localcluster.store.model import (
    CRD_KEY,
    NS_KEY,
    SYSTEM_NAMESPACES,
    Event,
    ObjKey,
    clone,
)


class Store(GarbageCollection):
    """The object store of the local API server (see the package docstring)."""

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

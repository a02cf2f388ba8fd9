"""EndpointSlice controller: keeps each selector Service's slices equal to what its pods say."""

from __future__ import annotations

import copy
import threading
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from .endpoints import (
    MANAGED_BY,
    MANAGED_BY_LABEL,
    SERVICE_NAME_LABEL,
    DesiredSlice,
    desired_slices,
    plan_slices,
)
from .kube import Informer, Obj, raw
from .objutil import controller_reference
from .workqueue import WorkLoop


class EndpointSliceController:
    def __init__(
        self,
        api: client.ApiClient,
        pods: Informer,
        services: Informer,
        slices: Informer,
        stop: threading.Event,
    ) -> None:
        self.discovery = client.DiscoveryV1Api(api)
        self.pods = pods
        self.services = services
        self.slices = slices
        self.loop = WorkLoop("endpointslices", self.reconcile, self._all_keys, stop)

    def _all_keys(self) -> set[str]:
        keys = {
            f"{s['metadata'].get('namespace', 'default')}/{s['metadata']['name']}"
            for s in self.services.items()
        }
        for sl in self.slices.items():
            svc = (sl["metadata"].get("labels") or {}).get(SERVICE_NAME_LABEL)
            if svc:
                keys.add(f"{sl['metadata'].get('namespace', 'default')}/{svc}")
        return keys

    # event handlers ----------------------------------------------------------------------
    def on_pod(self, kind: str, pod: Obj) -> None:
        ns = pod["metadata"].get("namespace", "default")
        for svc in self.services.items():
            if svc["metadata"].get("namespace", "default") == ns:
                self.loop.add(f"{ns}/{svc['metadata']['name']}")

    def on_service(self, kind: str, svc: Obj) -> None:
        self.loop.add(f"{svc['metadata'].get('namespace', 'default')}/{svc['metadata']['name']}")

    def on_slice(self, kind: str, sl: Obj) -> None:
        svc = (sl["metadata"].get("labels") or {}).get(SERVICE_NAME_LABEL)
        if svc:
            self.loop.add(f"{sl['metadata'].get('namespace', 'default')}/{svc}")

    # reconcile ---------------------------------------------------------------------------
    def reconcile(self, key: str) -> None:
        ns, name = key.split("/", 1)
        existing = [
            s
            for s in self.slices.items()
            if s["metadata"].get("namespace", "default") == ns
            and (s["metadata"].get("labels") or {}).get(SERVICE_NAME_LABEL) == name
            and (s["metadata"].get("labels") or {}).get(MANAGED_BY_LABEL) == MANAGED_BY
        ]
        svc = self.services.get(key)
        if svc is None or not (svc.get("spec") or {}).get("selector"):
            for sl in existing:
                self._delete(sl)
            return
        pods = [p for p in self.pods.items() if p["metadata"].get("namespace", "default") == ns]
        plan = plan_slices(desired_slices(svc, pods), existing)
        by_name = {s["metadata"]["name"]: s for s in existing}
        for want in plan.create:
            self._create(svc, want)
        for slice_name, want in plan.update:
            self._update(by_name[slice_name], want)
        for slice_name in plan.delete:
            self._delete(by_name[slice_name])

    def _create(self, svc: Obj, want: DesiredSlice) -> None:
        meta = svc["metadata"]
        ns = meta.get("namespace", "default")
        body: dict[str, Any] = {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "generateName": f"{meta['name']}-",
                "namespace": ns,
                "labels": {SERVICE_NAME_LABEL: meta["name"], MANAGED_BY_LABEL: MANAGED_BY},
                "ownerReferences": [controller_reference(svc, "v1", "Service")],
            },
            "addressType": "IPv4",
            "endpoints": list(want.endpoints),
            "ports": want.port_dicts(),
        }
        created = raw(self.discovery.create_namespaced_endpoint_slice, ns, body)
        self.slices.upsert_local(created)

    def _update(self, current: Obj, want: DesiredSlice) -> None:
        body = copy.deepcopy(current)
        body["endpoints"] = list(want.endpoints)
        body["ports"] = want.port_dicts()
        meta = current["metadata"]
        try:
            updated = raw(
                self.discovery.replace_namespaced_endpoint_slice,
                meta["name"],
                meta.get("namespace", "default"),
                body,
            )
        except ApiException as exc:
            if exc.status in (404, 409):
                # Stale cache: the watch brings the current version and the key comes back.
                self.on_slice("MODIFIED", current)
                return
            raise
        self.slices.upsert_local(updated)

    def _delete(self, sl: Obj) -> None:
        meta = sl["metadata"]
        try:
            raw(
                self.discovery.delete_namespaced_endpoint_slice,
                meta["name"],
                meta.get("namespace", "default"),
                body={"preconditions": {"uid": meta.get("uid")}},
            )
        except ApiException as exc:
            if exc.status not in (404, 409):
                raise
        self.slices.remove_local(sl)

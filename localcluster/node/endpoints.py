"""EndpointSlice computation for a Service from its pods. Pure: dicts in, dicts out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from contract import pod_ready

from .objutil import normalized

SERVICE_NAME_LABEL = "kubernetes.io/service-name"
MANAGED_BY_LABEL = "endpointslice.kubernetes.io/managed-by"
MANAGED_BY = "endpointslice-controller.k8s.io"
MAX_ENDPOINTS_PER_SLICE = 100

PortKey = tuple[tuple[str, int, str, str], ...]  # (name, port, protocol, appProtocol)


@dataclass(frozen=True)
class DesiredSlice:
    ports: PortKey
    endpoints: tuple[dict[str, Any], ...]

    def port_dicts(self) -> list[dict[str, Any]]:
        out = []
        for name, port, protocol, app in self.ports:
            entry: dict[str, Any] = {"name": name, "port": port, "protocol": protocol}
            if app:
                entry["appProtocol"] = app
            out.append(entry)
        return out


def selector_matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def find_container_port(pod: dict[str, Any], name: str, protocol: str) -> int | None:
    """A named targetPort resolves against the pod's container ports (first match)."""
    for container in (pod.get("spec") or {}).get("containers") or []:
        for port in container.get("ports") or []:
            if port.get("name") == name and port.get("protocol", "TCP") == protocol:
                return int(port["containerPort"])
    return None


def endpoint_ports(service: dict[str, Any], pod: dict[str, Any]) -> PortKey:
    """Service ports resolved for one pod; a port whose named target the pod lacks is skipped."""
    out = []
    for sp in (service.get("spec") or {}).get("ports") or []:
        protocol = sp.get("protocol", "TCP")
        target = sp.get("targetPort", sp.get("port"))
        if isinstance(target, str) and not target.isdigit():
            resolved = find_container_port(pod, target, protocol)
            if resolved is None:
                continue
        else:
            resolved = int(target)
        out.append((sp.get("name", ""), resolved, protocol, sp.get("appProtocol", "")))
    return tuple(sorted(out))


def pod_in_endpoints(pod: dict[str, Any]) -> bool:
    """Pods without an IP or in a terminal phase are left out; terminating pods stay in."""
    status = pod.get("status") or {}
    return bool(status.get("podIP")) and status.get("phase") not in ("Succeeded", "Failed")


def endpoint_for(pod: dict[str, Any], publish_not_ready: bool) -> dict[str, Any]:
    meta = pod.get("metadata") or {}
    terminating = bool(meta.get("deletionTimestamp"))
    ready_pod = pod_ready(pod)
    serving = publish_not_ready or ready_pod
    # ready is never true for a terminating endpoint unless the Service publishes not-ready
    # addresses; serving keeps the pod's own readiness during termination.
    ready = publish_not_ready or (ready_pod and not terminating)
    endpoint: dict[str, Any] = {
        "addresses": [pod["status"]["podIP"]],
        "conditions": {"ready": ready, "serving": serving, "terminating": terminating},
        "targetRef": {
            "kind": "Pod",
            "namespace": meta.get("namespace", "default"),
            "name": meta.get("name"),
            "uid": meta.get("uid"),
        },
    }
    node = (pod.get("spec") or {}).get("nodeName")
    if node:
        endpoint["nodeName"] = node
    return endpoint


def desired_slices(service: dict[str, Any], pods: list[dict[str, Any]]) -> list[DesiredSlice]:
    """Endpoints grouped by their resolved port set, at most 100 per slice."""
    spec = service.get("spec") or {}
    selector = spec.get("selector") or {}
    namespace = (service.get("metadata") or {}).get("namespace", "default")
    publish = bool(spec.get("publishNotReadyAddresses"))
    groups: dict[PortKey, list[dict[str, Any]]] = {}
    for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
        meta = pod.get("metadata") or {}
        if meta.get("namespace", "default") != namespace:
            continue
        if not selector_matches(selector, meta.get("labels") or {}):
            continue
        if not pod_in_endpoints(pod):
            continue
        groups.setdefault(endpoint_ports(service, pod), []).append(endpoint_for(pod, publish))
    out = []
    for ports in sorted(groups):
        eps = groups[ports]
        for i in range(0, len(eps), MAX_ENDPOINTS_PER_SLICE):
            out.append(DesiredSlice(ports, tuple(eps[i : i + MAX_ENDPOINTS_PER_SLICE])))
    if not out:
        # A Service without endpoints keeps one empty placeholder slice, as in a cluster.
        out.append(DesiredSlice((), ()))
    return out


def _port_key(slice_obj: dict[str, Any]) -> PortKey:
    entries = [
        (
            p.get("name", ""),
            int(p.get("port", 0)),
            p.get("protocol", "TCP"),
            p.get("appProtocol", ""),
        )
        for p in slice_obj.get("ports") or []
    ]
    return tuple(sorted(entries))


@dataclass(frozen=True)
class SlicePlan:
    create: tuple[DesiredSlice, ...]
    update: tuple[tuple[str, DesiredSlice], ...]  # (existing slice name, desired content)
    delete: tuple[str, ...]


def _endpoints_equal(existing: dict[str, Any], desired: DesiredSlice) -> bool:
    return normalized(existing.get("endpoints") or []) == normalized(list(desired.endpoints))


def plan_slices(desired: list[DesiredSlice], existing: list[dict[str, Any]]) -> SlicePlan:
    """Reuse existing slices with the same port set, create the rest, delete leftovers."""
    unused = sorted(existing, key=lambda s: s["metadata"]["name"])
    creates, updates = [], []
    for want in desired:
        match = next((s for s in unused if _port_key(s) == want.ports), None)
        if match is None:
            creates.append(want)
            continue
        unused.remove(match)
        if not _endpoints_equal(match, want) or _port_key(match) != want.ports:
            updates.append((match["metadata"]["name"], want))
    return SlicePlan(tuple(creates), tuple(updates), tuple(s["metadata"]["name"] for s in unused))

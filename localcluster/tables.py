"""Server-side printing (`Accept: application/json;as=Table;g=meta.k8s.io;v=v1`), so
`kubectl get` shows the usual columns. Pure functions."""

from __future__ import annotations

import calendar
import re
import time
from collections.abc import Callable
from typing import Any

from localcluster.resources import ResourceType

Column = tuple[str, str, str]  # (name, type, description)


def age(timestamp: str | None, now: float | None = None) -> str:
    """`5s`, `3m`, `2h`, `4d` like kubectl's human durations (coarse)."""
    if not timestamp:
        return "<unknown>"
    try:
        then = calendar.timegm(time.strptime(timestamp[:19], "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return "<invalid>"
    seconds = max(0, int((time.time() if now is None else now) - then))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    if seconds < 172800:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"


def _json_path(obj: Any, path: str) -> Any:
    """The subset of JSONPath used by printer columns: `.a.b`, with `\\.` inside keys."""
    node = obj
    for step in re.split(r"(?<!\\)\.", path.strip().lstrip(".")):
        if not step:
            continue
        step = step.replace("\\.", ".")
        if not isinstance(node, dict):
            return None
        node = node.get(step)
    return node


def _pod_status(pod: dict[str, Any]) -> str:
    if pod["metadata"].get("deletionTimestamp"):
        return "Terminating"
    return (pod.get("status") or {}).get("phase") or "Pending"


def _pod_ready(pod: dict[str, Any]) -> str:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    ready = sum(1 for c in statuses if c.get("ready"))
    return f"{ready}/{len((pod.get('spec') or {}).get('containers') or [])}"


def _restarts(pod: dict[str, Any]) -> int:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return sum(int(c.get("restartCount") or 0) for c in statuses)


def _node_status(node: dict[str, Any]) -> str:
    conditions = (node.get("status") or {}).get("conditions") or []
    ready = next((c for c in conditions if c.get("type") == "Ready"), None)
    text = "Ready" if ready and ready.get("status") == "True" else "NotReady"
    if (node.get("spec") or {}).get("unschedulable"):
        text += ",SchedulingDisabled"
    return text


def _node_roles(node: dict[str, Any]) -> str:
    prefix = "node-role.kubernetes.io/"
    labels = (node.get("metadata") or {}).get("labels") or {}
    roles = sorted(k[len(prefix) :] for k in labels if k.startswith(prefix))
    return ",".join(roles) or "<none>"


def _node_address(node: dict[str, Any], kind: str) -> str:
    addresses = (node.get("status") or {}).get("addresses") or []
    return next((a.get("address") for a in addresses if a.get("type") == kind), "<none>")


def _ingress_hosts(ing: dict[str, Any]) -> str:
    # As kubectl's printer: rules without a host add nothing; no host at all is "*".
    hosts = [r["host"] for r in (ing.get("spec") or {}).get("rules") or [] if r.get("host")]
    return ",".join(hosts) or "*"


def _ingress_address(ing: dict[str, Any]) -> str:
    # As kube-apiserver's printer: each entry's IP, else its hostname, as a sorted set (the
    # real tier showed "203.0.113.10,lb.example.net" for [{hostname}, {ip}]).
    lb = ((ing.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    return ",".join(sorted({e.get("ip") or e.get("hostname") for e in lb} - {None, ""}))


def _ingress_ports(ing: dict[str, Any]) -> str:
    return "80, 443" if (ing.get("spec") or {}).get("tls") else "80"


def _class_parameters(ic: dict[str, Any]) -> str:
    params = (ic.get("spec") or {}).get("parameters")
    if not params:
        return "<none>"
    kind = params.get("kind", "")
    if params.get("apiGroup"):
        kind += "." + params["apiGroup"]
    return f"{kind}/{params.get('name', '')}"


def _event_object(ev: dict[str, Any]) -> str:
    ref = ev.get("involvedObject") or ev.get("regarding") or {}
    return f"{(ref.get('kind') or '').lower()}/{ref.get('name', '')}"


def _last_seen(ev: dict[str, Any]) -> str:
    stamp = ev.get("lastTimestamp") or ev.get("eventTime") or ev.get("firstTimestamp")
    return age(stamp or (ev.get("metadata") or {}).get("creationTimestamp"))


def _containers(obj: dict[str, Any], what: str) -> str:
    spec = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
    return ",".join(str(c.get(what, "")) for c in spec.get("containers") or [])


def _selector(obj: dict[str, Any]) -> str:
    selector = (obj.get("spec") or {}).get("selector") or {}
    return ",".join(f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items()))


def _service_ports(svc: dict[str, Any]) -> str:
    ports = [
        f"{p.get('port')}/{p.get('protocol', 'TCP')}"
        for p in (svc.get("spec") or {}).get("ports") or []
    ]
    return ",".join(ports) or "<none>"


def _get(*path: str, default: Any = "") -> Cell:
    def cell(obj: dict[str, Any]) -> Any:
        node: Any = obj
        for step in path:
            node = node.get(step) if isinstance(node, dict) else None
        return default if node is None else node

    return cell


def _created(obj: dict[str, Any]) -> str:
    return age((obj.get("metadata") or {}).get("creationTimestamp"))


def _replicas(obj: dict[str, Any]) -> str:
    status, spec = obj.get("status") or {}, obj.get("spec") or {}
    return f"{status.get('readyReplicas', 0)}/{spec.get('replicas', 0)}"


Cell = Callable[[dict[str, Any]], Any]
# (column, type, priority, cell) per kind after Name; priority 1 columns show with -o wide.
_WORKLOAD_WIDE: list[tuple[str, str, int, Cell]] = [
    ("Containers", "string", 1, lambda o: _containers(o, "name")),
    ("Images", "string", 1, lambda o: _containers(o, "image")),
    ("Selector", "string", 1, _selector),
]
_AGE: tuple[str, str, int, Cell] = ("Age", "string", 0, _created)
_BUILTIN_COLUMNS: dict[str, list[tuple[str, str, int, Cell]]] = {
    "Pod": [
        ("Ready", "string", 0, _pod_ready),
        ("Status", "string", 0, _pod_status),
        ("Restarts", "integer", 0, _restarts),
        _AGE,
        ("IP", "string", 1, _get("status", "podIP", default="<none>")),
        ("Node", "string", 1, _get("spec", "nodeName", default="<none>")),
    ],
    "Deployment": [
        ("Ready", "string", 0, _replicas),
        ("Up-to-date", "integer", 0, _get("status", "updatedReplicas", default=0)),
        ("Available", "integer", 0, _get("status", "availableReplicas", default=0)),
        _AGE,
        *_WORKLOAD_WIDE,
    ],
    "ReplicaSet": [
        ("Desired", "integer", 0, _get("spec", "replicas", default=0)),
        ("Current", "integer", 0, _get("status", "replicas", default=0)),
        ("Ready", "integer", 0, _get("status", "readyReplicas", default=0)),
        _AGE,
        *_WORKLOAD_WIDE,
    ],
    "Service": [
        ("Type", "string", 0, _get("spec", "type", default="ClusterIP")),
        ("Cluster-IP", "string", 0, _get("spec", "clusterIP", default="<none>")),
        ("Port(s)", "string", 0, _service_ports),
        _AGE,
    ],
    "Node": [
        ("Status", "string", 0, _node_status),
        ("Roles", "string", 0, _node_roles),
        _AGE,
        ("Version", "string", 0, _get("status", "nodeInfo", "kubeletVersion")),
        ("Internal-IP", "string", 1, lambda o: _node_address(o, "InternalIP")),
        ("External-IP", "string", 1, lambda o: _node_address(o, "ExternalIP")),
    ],
    "Event": [
        ("Last Seen", "string", 0, _last_seen),
        ("Type", "string", 0, _get("type")),
        ("Reason", "string", 0, _get("reason")),
        ("Object", "string", 0, _event_object),
        ("Message", "string", 0, _get("message")),
        ("Count", "integer", 1, _get("count", default=1)),
        ("Name", "string", 1, _get("metadata", "name")),
    ],
    "Ingress": [
        ("Class", "string", 0, _get("spec", "ingressClassName", default="<none>")),
        ("Hosts", "string", 0, _ingress_hosts),
        ("Address", "string", 0, _ingress_address),
        ("Ports", "string", 0, _ingress_ports),
        _AGE,
    ],
    "IngressClass": [
        ("Controller", "string", 0, _get("spec", "controller")),
        ("Parameters", "string", 0, _class_parameters),
        _AGE,
    ],
    "ConfigMap": [("Data", "integer", 0, lambda o: len(o.get("data") or {})), _AGE],
    "Secret": [
        ("Type", "string", 0, _get("type")),
        ("Data", "integer", 0, lambda o: len(o.get("data") or {})),
        _AGE,
    ],
    "Lease": [("Holder", "string", 0, _get("spec", "holderIdentity")), _AGE],
    "CustomResourceDefinition": [
        ("Created At", "date", 0, _get("metadata", "creationTimestamp")),
    ],
    "Namespace": [("Status", "string", 0, _get("status", "phase", default="Active")), _AGE],
    "EndpointSlice": [
        ("AddressType", "string", 0, _get("addressType")),
        (
            "Ports",
            "string",
            0,
            lambda o: ",".join(str(p.get("port")) for p in o.get("ports") or []),
        ),
        (
            "Endpoints",
            "string",
            0,
            lambda o: ",".join(
                a for e in o.get("endpoints") or [] for a in e.get("addresses") or []
            ),
        ),
        _AGE,
    ],
}


def _columns(rt: ResourceType) -> list[tuple[str, str, int]]:
    """(name, type, priority); priority 1 columns show with -o wide."""
    if rt.custom:
        cols = [("Name", "string", 0)]
        for c in _printer_columns(rt):
            cols.append(
                (
                    c["name"],
                    "string" if c.get("type") == "date" else c.get("type", "string"),
                    int(c.get("priority", 0)),
                )
            )
        if not any(c["name"] == "Age" for c in _printer_columns(rt)):
            cols.append(("Age", "string", 0))
        return cols
    cols = [(n, t, p) for n, t, p, _ in _builtin_columns(rt)]
    return cols if any(n == "Name" for n, _, _ in cols) else [("Name", "string", 0), *cols]


def _builtin_columns(rt: ResourceType) -> list[tuple[str, str, int, Cell]]:
    return _BUILTIN_COLUMNS.get(rt.kind, [_AGE])


def _printer_columns(rt: ResourceType) -> list[dict[str, Any]]:
    return list(rt.printer_columns)


def _cells(rt: ResourceType, obj: dict[str, Any]) -> list[Any]:
    name = (obj.get("metadata") or {}).get("name", "")
    if rt.custom:
        cells: list[Any] = [name]
        for c in _printer_columns(rt):
            value = _json_path(obj, c.get("jsonPath", ""))
            if c.get("type") == "date":
                value = age(value) if value else "<unknown>"
            cells.append(value if value is not None else "")
        if not any(c["name"] == "Age" for c in _printer_columns(rt)):
            cells.append(_created(obj))
        return cells
    cells = [cell(obj) for _, _, _, cell in _builtin_columns(rt)]
    return cells if any(n == "Name" for n, *_ in _builtin_columns(rt)) else [name, *cells]


def to_table(
    rt: ResourceType, items: list[dict[str, Any]], list_meta: dict[str, Any]
) -> dict[str, Any]:
    columns = [
        {
            "name": n,
            "type": t,
            "format": "name" if n == "Name" else "",
            "description": n,
            "priority": p,
        }
        for n, t, p in _columns(rt)
    ]
    rows = []
    for obj in items:
        meta = dict(obj.get("metadata") or {})
        meta.pop("managedFields", None)
        rows.append(
            {
                "cells": _cells(rt, obj),
                "object": {
                    "kind": "PartialObjectMetadata",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": meta,
                },
            }
        )
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": columns,
        "rows": rows,
    }


def wants_table(accept: str) -> bool:
    return "as=Table" in accept

"""Server-side printing (`Accept: application/json;as=Table;g=meta.k8s.io;v=v1`), so
`kubectl get` shows the usual columns. Pure functions."""

from __future__ import annotations

import calendar
import re
import time
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


def _pod_cells(pod: dict[str, Any]) -> list[Any]:
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    statuses = status.get("containerStatuses") or []
    ready = sum(1 for c in statuses if c.get("ready"))
    restarts = sum(int(c.get("restartCount") or 0) for c in statuses)
    phase = status.get("phase") or "Pending"
    if pod["metadata"].get("deletionTimestamp"):
        phase = "Terminating"
    return [
        f"{ready}/{len(spec.get('containers') or [])}",
        phase,
        restarts,
        age(pod["metadata"].get("creationTimestamp")),
        status.get("podIP") or "<none>",
        spec.get("nodeName") or "<none>",
    ]


def _ingress_cells(spec: dict[str, Any], status: dict[str, Any]) -> list[Any]:
    """Class, Hosts, Address, Ports as kubectl prints an Ingress: up to three hosts,
    "*" for none; the load balancer's IPs (else hostnames); 443 only with TLS."""
    rules = spec.get("rules") or []
    hosts = [r["host"] for r in rules if isinstance(r, dict) and r.get("host")]
    shown = ",".join(hosts[:3]) or "*"
    if len(rules) > 3 and len(hosts) > 3:
        shown += f" + {len(rules) - 3} more..."
    lb = (status.get("loadBalancer") or {}).get("ingress") or []
    address = ",".join(e.get("ip") or e.get("hostname") or "" for e in lb if isinstance(e, dict))
    return [
        spec.get("ingressClassName") or "<none>",
        shown,
        address,
        "80, 443" if spec.get("tls") else "80",
    ]


def _columns(rt: ResourceType) -> list[tuple[str, str, int]]:
    """(name, type, priority); priority 1 columns show with -o wide."""
    if rt.kind == "Pod":
        return [
            ("Name", "string", 0),
            ("Ready", "string", 0),
            ("Status", "string", 0),
            ("Restarts", "integer", 0),
            ("Age", "string", 0),
            ("IP", "string", 1),
            ("Node", "string", 1),
        ]
    if rt.kind == "Deployment":
        return [
            ("Name", "string", 0),
            ("Ready", "string", 0),
            ("Up-to-date", "integer", 0),
            ("Available", "integer", 0),
            ("Age", "string", 0),
        ]
    if rt.kind == "Service":
        return [
            ("Name", "string", 0),
            ("Type", "string", 0),
            ("Cluster-IP", "string", 0),
            ("Port(s)", "string", 0),
            ("Age", "string", 0),
        ]
    if rt.kind == "Lease":
        return [("Name", "string", 0), ("Holder", "string", 0), ("Age", "string", 0)]
    if rt.kind == "Ingress":
        return [
            ("Name", "string", 0),
            ("Class", "string", 0),
            ("Hosts", "string", 0),
            ("Address", "string", 0),
            ("Ports", "string", 0),
            ("Age", "string", 0),
        ]
    if rt.kind == "Namespace":
        return [("Name", "string", 0), ("Status", "string", 0), ("Age", "string", 0)]
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
    return [("Name", "string", 0), ("Age", "string", 0)]


def _printer_columns(rt: ResourceType) -> list[dict[str, Any]]:
    return list(rt.printer_columns)


def _cells(rt: ResourceType, obj: dict[str, Any]) -> list[Any]:
    meta = obj.get("metadata") or {}
    name = meta.get("name", "")
    created = age(meta.get("creationTimestamp"))
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    if rt.kind == "Pod":
        return [name, *_pod_cells(obj)]
    if rt.kind == "Deployment":
        return [
            name,
            f"{status.get('readyReplicas', 0)}/{spec.get('replicas', 0)}",
            status.get("updatedReplicas", 0),
            status.get("availableReplicas", 0),
            created,
        ]
    if rt.kind == "Service":
        ports = ",".join(
            f"{p.get('port')}/{p.get('protocol', 'TCP')}" for p in spec.get("ports") or []
        )
        return [
            name,
            spec.get("type", "ClusterIP"),
            spec.get("clusterIP", "<none>"),
            ports or "<none>",
            created,
        ]
    if rt.kind == "Lease":
        return [name, spec.get("holderIdentity") or "", created]
    if rt.kind == "Ingress":
        return [name, *_ingress_cells(spec, status), created]
    if rt.kind == "Namespace":
        return [name, status.get("phase", "Active"), created]
    if rt.custom:
        cells: list[Any] = [name]
        for c in _printer_columns(rt):
            value = _json_path(obj, c.get("jsonPath", ""))
            if c.get("type") == "date":
                value = age(value) if value else "<unknown>"
            cells.append(value if value is not None else "")
        if not any(c["name"] == "Age" for c in _printer_columns(rt)):
            cells.append(created)
        return cells
    return [name, created]


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

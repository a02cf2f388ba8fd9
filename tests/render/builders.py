"""Kubernetes objects as plain dicts, shaped as the API server returns them."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def template_config(
    slots: int = 10,
    gate: bool = False,
    ingress_class: str | None = None,
    **spec: Any,
) -> dict[str, Any]:
    ingress: dict[str, Any] = {"enabled": True}
    if ingress_class:
        ingress["ingressClassName"] = ingress_class
    return {
        "apiVersion": "haproxy-haptic.org/v1alpha1",
        "kind": "HAProxyTemplateConfig",
        "metadata": {"namespace": "haptic", "name": "haptic", "uid": "uid-1"},
        "spec": {
            "podSelector": {"matchLabels": {"app": "haproxy"}},
            "templateLibraries": {
                "base": {"enabled": True},
                "ingress": ingress,
                "kubernetesBackends": {
                    "enabled": True,
                    "serverSlots": slots,
                    "podReadinessGate": {"enabled": gate},
                },
            },
            **spec,
        },
    }


def backend(service: str, port: int | str) -> dict[str, Any]:
    key = "number" if isinstance(port, int) else "name"
    return {"service": {"name": service, "port": {key: port}}}


def path(p: str, service: str, port: int | str = 80, path_type: str = "Prefix") -> dict:
    return {"path": p, "pathType": path_type, "backend": backend(service, port)}


def ingress(
    namespace: str,
    name: str,
    rules: list[tuple[str | None, list[dict]]] = (),
    default: tuple[str, int | str] | None = None,
    tls: list[tuple[str, list[str]]] = (),
    ingress_class: str | None = None,
    created: str = "2026-01-01T00:00:00Z",
) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if ingress_class:
        spec["ingressClassName"] = ingress_class
    if rules:
        spec["rules"] = []
        for host, paths in rules:
            rule: dict[str, Any] = {"http": {"paths": paths}}
            if host:
                rule["host"] = host
            spec["rules"].append(rule)
    if default:
        spec["defaultBackend"] = backend(*default)
    if tls:
        spec["tls"] = [{"hosts": hosts, "secretName": secret} for secret, hosts in tls]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"namespace": namespace, "name": name, "creationTimestamp": created},
        "spec": spec,
    }


def service(namespace: str, name: str, ports: list[tuple[str | None, int, int]]) -> dict:
    """ports: (name, port, targetPort)."""
    out = []
    for pname, port, target in ports:
        entry: dict[str, Any] = {"port": port, "targetPort": target, "protocol": "TCP"}
        if pname:
            entry["name"] = pname
        out.append(entry)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"namespace": namespace, "name": name},
        "spec": {"type": "ClusterIP", "ports": out},
    }


def endpoint(
    address: str, ready: bool | None = True, pod: str | None = None, terminating: bool = False
) -> dict[str, Any]:
    conditions: dict[str, Any] = {}
    if ready is not None:
        conditions["ready"] = ready
        conditions["serving"] = ready
    conditions["terminating"] = terminating
    ep: dict[str, Any] = {"addresses": [address], "conditions": conditions}
    if pod:
        ep["targetRef"] = {"kind": "Pod", "name": pod}
    return ep


def endpointslice(
    namespace: str,
    service_name: str,
    endpoints: list[dict],
    ports: list[tuple[str | None, int]],
    suffix: str = "a",
) -> dict[str, Any]:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "namespace": namespace,
            "name": f"{service_name}-{suffix}",
            "labels": {"kubernetes.io/service-name": service_name},
        },
        "addressType": "IPv4",
        "ports": [{"name": n or "", "port": p, "protocol": "TCP"} for n, p in ports],
        "endpoints": endpoints,
    }


def tls_secret(namespace: str, name: str) -> dict[str, Any]:
    crt = (FIXTURES / "tls.crt").read_bytes()
    key = (FIXTURES / "tls.key").read_bytes()
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {"namespace": namespace, "name": name},
        "data": {
            "tls.crt": base64.b64encode(crt).decode(),
            "tls.key": base64.b64encode(key).decode(),
        },
    }


def pod(
    namespace: str,
    name: str,
    gate: bool = True,
    containers_ready: bool = True,
    ready: bool = False,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "app", "image": "app"}]}
    if gate:
        spec["readinessGates"] = [{"conditionType": "haproxy-haptic.org/load-balancer-ready"}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"namespace": namespace, "name": name},
        "spec": spec,
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": "ContainersReady", "status": "True" if containers_ready else "False"},
                {"type": "Ready", "status": "True" if ready else "False"},
            ],
        },
    }


# What an annotated Ingress of the benchmark carries: access control, a rate limit, a header,
# a balance algorithm and a timeout (route and backend annotations).
def bench_annotations(i: int) -> dict[str, str]:
    """Five haproxy.org/* annotations whose values differ per Ingress, so the bench parses
    each set (identical sets would be parsed once and then read from the parse cache)."""
    return {
        "haproxy.org/allow-list": f"10.{i % 256}.0.0/16, 192.168.0.0/16",
        "haproxy.org/rate-limit-requests": str(100 + i),
        "haproxy.org/request-set-header": f"X-Team team-{i}",
        "haproxy.org/load-balance": ("leastconn", "roundrobin", "source")[i % 3],
        "haproxy.org/timeout-server": f"{30 + i % 30}s",
    }


def scale_address(n: int) -> str:
    """The n-th endpoint address of the scale set: in 127.255.0.0/16, on this machine and
    never a local-node pod IP (localcluster/node/ipam.py stops at 127.254), so the health
    checks of HAProxy pods serving the set are refused at once and never leave the host."""
    assert 0 <= n < 1 << 16
    return f"127.255.{n >> 8}.{n & 255}"


def scale_set(
    n: int, endpoints_per_service: int = 3, annotated: bool = False
) -> dict[str, list[dict]]:
    """n Ingresses, each with its own host, Service and EndpointSlice (bench and tests);
    `annotated`: every other Ingress carries bench_annotations(i)."""
    ingresses, services, slices = [], [], []
    for i in range(n):
        ns = f"team-{i % 20}"
        name = f"app-{i}"
        ingresses.append(
            ingress(
                ns,
                name,
                rules=[
                    (
                        f"{name}.example.test",
                        [path("/", name, 80), path(f"/api/v{i % 3}", name, 80, "Exact")],
                    )
                ],
            )
        )
        if annotated and i % 2:
            ingresses[-1]["metadata"]["annotations"] = bench_annotations(i)
        services.append(service(ns, name, [("http", 80, 8080)]))
        eps = [
            endpoint(scale_address(i * endpoints_per_service + k), ready=k % 4 != 3)
            for k in range(endpoints_per_service)
        ]
        slices.append(endpointslice(ns, name, eps, [("http", 8080)]))
    return {"ingresses": ingresses, "services": services, "endpointslices": slices}

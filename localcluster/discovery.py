"""Discovery documents (`/api`, `/apis`, `/apis/G`, `/apis/G/V`, `/version`) built from the
registry, shaped as kubectl and the clients expect. Pure functions."""

from __future__ import annotations

from typing import Any

from localcluster.errors import ApiError, not_found
from localcluster.resources import Registry

VERSION = {
    "major": "1",
    "minor": "31",
    "gitVersion": "v1.31.0-localcluster",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.22.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}


def api_versions(server_address: str) -> dict[str, Any]:
    """GET /api."""
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    }


def group_list(registry: Registry) -> dict[str, Any]:
    """GET /apis."""
    groups = []
    for name in sorted(registry.groups()):
        if name:
            groups.append(api_group(registry, name))
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(registry: Registry, group: str) -> dict[str, Any]:
    """GET /apis/{group}."""
    versions = registry.groups().get(group)
    if not versions or not group:
        raise not_found("groups", "", group)
    vs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": group,
        "versions": vs,
        "preferredVersion": vs[0],
    }


def resource_list(registry: Registry, group: str, version: str) -> dict[str, Any]:
    """GET /api/v1 and /apis/{group}/{version}."""
    resources = []
    for rt in registry.all():
        if rt.group != group or rt.version != version:
            continue
        entry: dict[str, Any] = {
            "name": rt.plural,
            "singularName": rt.singular,
            "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": list(rt.verbs),
        }
        if rt.short_names:
            entry["shortNames"] = list(rt.short_names)
        if rt.categories:
            entry["categories"] = list(rt.categories)
        resources.append(entry)
        if rt.status_subresource:
            resources.append(
                {
                    "name": f"{rt.plural}/status",
                    "singularName": "",
                    "namespaced": rt.namespaced,
                    "kind": rt.kind,
                    "verbs": ["get", "patch", "update"],
                }
            )
        if rt.scale_subresource:
            resources.append(
                {
                    "name": f"{rt.plural}/scale",
                    "singularName": "",
                    "namespaced": rt.namespaced,
                    "group": "autoscaling",
                    "version": "v1",
                    "kind": "Scale",
                    "verbs": ["get", "patch", "update"],
                }
            )
        if rt.kind == "Pod":
            resources.append(
                {
                    "name": "pods/log",
                    "singularName": "",
                    "namespaced": True,
                    "kind": "Pod",
                    "verbs": ["get"],
                }
            )
            resources.append(
                {
                    "name": "pods/binding",
                    "singularName": "",
                    "namespaced": True,
                    "kind": "Binding",
                    "verbs": ["create"],
                }
            )
    if not resources:
        raise ApiError(404, "the server could not find the requested resource", "NotFound")
    gv = f"{group}/{version}" if group else version
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": gv,
        "resources": resources,
    }

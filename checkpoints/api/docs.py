"""A browsable, server-rendered page of the OpenAPI schema (no CDN assets needed)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from drf_spectacular.generators import SchemaGenerator

from checkpoints.roles import is_viewer

METHODS = ("get", "post", "put", "patch", "delete")


def operations(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """Flatten the schema's paths into one entry per operation, in path order."""
    out = []
    for path, item in sorted(schema.get("paths", {}).items()):
        for method in METHODS:
            op = item.get(method)
            if not op:
                continue
            params = op.get("parameters", [])
            out.append(
                {
                    "path": path,
                    "method": method,
                    "summary": op.get("description") or op.get("summary") or "",
                    "parameters": params,
                    "has_path_params": any(p.get("in") == "path" for p in params),
                }
            )
    return out


@login_required
def api_docs(request: HttpRequest) -> HttpResponse:
    if not is_viewer(request.user):
        raise PermissionDenied("You need the viewer or operator role.")
    schema = SchemaGenerator().get_schema(request=None, public=True)
    return render(request, "api_docs.html", {"schema": schema, "operations": operations(schema)})

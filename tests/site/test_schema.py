"""The OpenAPI schema validates (the live schemathesis run is test_api_live_contract.py)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from django.core.management import call_command
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.validation import validate_schema

pytestmark = pytest.mark.django_db


def _schema() -> dict[str, Any]:
    return SchemaGenerator().get_schema(request=None, public=True)


def test_schema_validates_against_the_openapi_spec() -> None:
    schema = _schema()
    validate_schema(schema)
    paths = set(schema["paths"])
    assert {
        "/api/v1/checkpoints/",
        "/api/v1/checkpoints/{id}/",
        "/api/v1/checkpoints/diff/",
        "/api/v1/intents/",
        "/api/v1/receipts/",
        "/api/v1/fleet/",
        "/api/v1/terms/",
        "/api/v1/events/",
        "/api/v1/render-warnings/",
        "/api/v1/hub-status/",
        "/api/v1/recovery-reviews/",
        "/api/v1/recovery-reviews/{id}/approve/",
        "/api/v1/recovery-reviews/{id}/reject/",
    } <= paths
    params = {p["name"] for p in schema["paths"]["/api/v1/checkpoints/"]["get"]["parameters"]}
    assert {
        "template",
        "checksum",
        "created_after",
        "created_before",
        "collected",
        "limit",
    } <= params


def test_management_command_validates(tmp_path: Any) -> None:
    out = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))
    assert "openapi" in yaml.safe_load(out.read_text())


def test_served_schema_needs_a_role(viewer_api: Any, client: Any) -> None:
    assert client.get("/api/schema/").status_code == 401
    response = viewer_api.get("/api/schema/?format=json")
    assert response.status_code == 200
    assert response.json()["info"]["title"] == "haptic API"

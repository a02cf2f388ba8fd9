"""The OpenAPI schema validates, and a schema-driven fuzz run finds no server error."""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
import yaml
from django.core import signals
from django.core.management import call_command
from django.db import close_old_connections, transaction
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.validation import validate_schema
from hypothesis import HealthCheck, given, settings
from rest_framework.authtoken.models import Token

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


def test_fuzz_finds_no_server_error(operator: Any, history: dict) -> None:
    token = Token.objects.create(user=operator).key
    schema = schemathesis.openapi.from_dict(_schema())
    headers = {"Authorization": f"Token {token}"}
    # In-process WSGI calls through the whole Django stack against the real database.
    from haptic_site.wsgi import application

    failures: list[str] = []

    def fuzz(op: Any) -> None:
        @settings(
            max_examples=8,
            deadline=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
        )
        @given(case=op.as_strategy())
        def run(case: Any) -> None:
            # A savepoint per request, so one database error cannot poison the next calls.
            savepoint = transaction.savepoint()
            response = case.call(app=application, headers=headers)
            if response.status_code >= 500:
                transaction.savepoint_rollback(savepoint)
            else:
                transaction.savepoint_commit(savepoint)
            if response.status_code >= 500:
                failures.append(
                    f"{op.method.upper()} {op.path}: {response.status_code} {case.query}"
                )

        run()

    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 15
    # As Django's test client does: the test's transaction must survive each request.
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        for op in operations:
            fuzz(op)
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)
    assert failures == []

"""The API's contract rules: documented error answers, and queries refused unless the
schema allows them (checkpoints/api/contract.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from drf_spectacular.generators import SchemaGenerator
from hypothesis import given
from hypothesis import strategies as st
from rest_framework.test import APIClient

from checkpoints.api.contract import MAX_LIMIT, query_errors
from checkpoints.filtersets import rfc3339

LIMIT = {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 9}}
OPEN = {"name": "open", "in": "query", "schema": {"type": "boolean"}}
SINCE = {"name": "since", "in": "query", "schema": {"type": "string", "format": "date-time"}}
NAME = {"name": "name", "in": "query", "schema": {"type": "string", "pattern": "^[^\\x00]*$"}}


def test_query_errors_name_each_parameter_given_wrongly() -> None:
    params = [LIMIT, OPEN, SINCE, NAME]
    assert query_errors(params, {}) == {}
    good = {"limit": ["9"], "open": ["false"], "since": ["2026-11-30T08:00:00Z"], "name": [""]}
    assert query_errors(params, good) == {}
    bad = {"limit": ["-128006500"], "open": ["null"], "since": [""], "name": ["a\x00"]}
    assert set(query_errors(params, bad)) == {"limit", "open", "since", "name"}
    assert query_errors(params, {"limit": ["1", "2"]}) == {"limit": ["give this parameter once"]}
    assert query_errors(params, {"limit": ["10"]}) == {"limit": ["must be at most 9"]}
    required = [dict(LIMIT, required=True)]
    assert query_errors(required, {}) == {"limit": ["this parameter is required"]}


@given(
    st.datetimes(
        min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)
    ),
    st.integers(min_value=-(23 * 60 + 59), max_value=23 * 60 + 59),
    st.booleans(),
)
def test_every_rfc3339_date_time_names_its_instant(
    instant: datetime, offset_minutes: int, lower: bool
) -> None:
    zone = timezone(timedelta(minutes=offset_minutes))
    text = instant.astimezone(zone).isoformat()
    if lower:
        text = text.replace("T", "t")
    assert rfc3339(text) == instant


def test_rfc3339_edges_are_accepted_or_refused_as_the_format_says() -> None:
    assert rfc3339("0000-01-01T00:00:00Z") == datetime.min.replace(tzinfo=UTC)
    assert rfc3339("9999-12-31T23:59:59-23:59") == datetime.max.replace(tzinfo=UTC)
    assert rfc3339("2026-06-30T23:59:60Z") == datetime(2026, 6, 30, 23, 59, 59, tzinfo=UTC)
    for text in ("", "2026-11-30", "2026-11-30T08:00:00", "2026-04-31T00:00:00Z", "null"):
        assert rfc3339(text) is None, text


@pytest.mark.django_db
def test_the_api_refuses_what_its_schema_does_not_allow(viewer_api: APIClient) -> None:
    for query in (
        "limit=-128006500",
        f"limit={MAX_LIMIT + 1}",
        "offset=%7D",
        "offset=null&offset=null",
        "since=",
        "promoted=null",
    ):
        path = "/api/v1/events/" if "since" in query else "/api/v1/checkpoints/"
        response = viewer_api.get(f"{path}?{query}")
        assert response.status_code == 400, query
    assert viewer_api.get("/api/v1/checkpoints/?limit=1&promoted=true").status_code == 200
    # A URL no route matches under /api/ answers as the API does: JSON.
    missing = viewer_api.get("/api/v1/events/1.5/")
    assert missing.status_code == 404 and missing.json() == {"detail": "Not found."}


def test_every_operation_documents_its_error_answers() -> None:
    schema = SchemaGenerator().get_schema(request=None, public=True)
    for path, item in schema["paths"].items():
        for method, op in item.items():
            codes = set(op["responses"])
            assert "401" in codes, (method, path)
            if path.startswith("/api/v1/"):
                assert "403" in codes, (method, path)
            if "{id}" in path:
                assert "404" in codes, (method, path)
            if op.get("parameters") and any(p["in"] == "query" for p in op["parameters"]):
                assert "400" in codes, (method, path)
    reject = schema["paths"]["/api/v1/recovery-reviews/{id}/reject/"]["post"]
    assert "409" in reject["responses"]

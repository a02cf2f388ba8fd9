"""The REST API's contract: the OpenAPI schema documents every answer a view gives, and the
views refuse every query the schema does not allow.

drf-spectacular derives the schema from the views; `document_errors` (a postprocessing hook)
adds the error answers and the constraints of query parameters to it, and `ContractMixin`
checks each request's query against the parameters of its operation in that same schema,
so the two cannot drift apart. `query_errors` is the pure check.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

from rest_framework.exceptions import ValidationError
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request

from checkpoints.filtersets import rfc3339

MAX_LIMIT = 1000
# Far beyond any real page, well inside what PostgreSQL and SQLite take as OFFSET.
MAX_OFFSET = 2**31 - 1
# Django's forms refuse NUL in text (PostgreSQL cannot store it): the schema says so.
NO_NUL_PATTERN = "^[^\\x00]*$"

ERROR = {
    "type": "object",
    "properties": {"detail": {"type": "string"}},
    "required": ["detail"],
}
# DRF's validation errors: messages per field (or "non_field_errors"), or one "detail".
VALIDATION_ERROR = {
    "type": "object",
    "additionalProperties": {
        "oneOf": [{"type": "array", "items": {"type": "string"}}, {"type": "string"}]
    },
}

_INTEGER = re.compile(r"-?\d+")


class Pagination(LimitOffsetPagination):
    """limit/offset pagination whose bounds are in the schema (and so enforced)."""

    max_limit = MAX_LIMIT

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        bounds = {self.limit_query_param: (1, MAX_LIMIT), self.offset_query_param: (0, MAX_OFFSET)}
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            low, high = bounds[parameter["name"]]
            parameter["schema"] |= {"minimum": low, "maximum": high}
        return parameters


def value_error(schema: Mapping[str, Any], raw: str) -> str | None:
    """Why one query value does not fit its parameter's schema, or None when it does."""
    kind = schema.get("type")
    if kind == "integer":
        if not _INTEGER.fullmatch(raw):
            return "an integer is required"
        number = int(raw)
        if "minimum" in schema and number < schema["minimum"]:
            return f"must be at least {schema['minimum']}"
        if "maximum" in schema and number > schema["maximum"]:
            return f"must be at most {schema['maximum']}"
        return None
    if kind == "boolean":
        return None if raw in ("true", "false") else 'must be "true" or "false"'
    if "enum" in schema and raw not in schema["enum"]:
        return "must be one of: " + ", ".join(str(v) for v in schema["enum"])
    if schema.get("format") == "date-time" and rfc3339(raw) is None:
        return "an RFC 3339 date-time is required, e.g. 2026-11-30T08:00:00Z"
    if "pattern" in schema and not re.search(schema["pattern"], raw):
        return "contains characters that are not allowed"
    return None


def query_errors(
    parameters: list[Mapping[str, Any]], query: Mapping[str, list[str]]
) -> dict[str, list[str]]:
    """Each query parameter of an operation that the request gives wrongly, with why."""
    errors: dict[str, list[str]] = {}
    for parameter in parameters:
        if parameter.get("in") != "query":
            continue
        name = parameter["name"]
        values = query.get(name)
        if not values:
            if parameter.get("required"):
                errors[name] = ["this parameter is required"]
            continue
        if len(values) > 1:
            errors[name] = ["give this parameter once"]
            continue
        problem = value_error(parameter.get("schema") or {}, values[0])
        if problem:
            errors[name] = [problem]
    return errors


# -- the schema ----------------------------------------------------------------------------


def _responses(operation: dict[str, Any]) -> dict[str, str]:
    """The error answers an operation can give, by status code."""
    parameters = operation.get("parameters", [])
    codes: dict[str, str] = {}
    if operation.get("requestBody") or any(p["in"] == "query" for p in parameters):
        codes["400"] = "ValidationError"
    if operation.get("requestBody"):
        codes["415"] = "Error"
    if "security" not in operation:
        return codes  # a public operation (the token view) documents its own 401
    codes["401"] = "Error"  # no or an unknown token
    codes["403"] = "Error"  # a role short
    if any(p["in"] == "path" for p in parameters):
        codes["404"] = "Error"
    return codes


def _no_nul(schema: dict[str, Any]) -> None:
    if schema.get("type") == "string" and not ({"format", "enum", "pattern"} & set(schema)):
        schema["pattern"] = NO_NUL_PATTERN


def document_errors(result: dict[str, Any], generator: Any, request: Any, public: bool) -> Any:
    """drf-spectacular postprocessing hook: error answers and query-parameter constraints."""
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas.setdefault("Error", ERROR)  # also ErrorSerializer's, where a view names it
    schemas["ValidationError"] = VALIDATION_ERROR
    descriptions = {
        "400": "The request does not fit the schema, or its data is invalid.",
        "401": "No valid credentials.",
        "403": "The user's role does not allow this.",
        "404": "No such object.",
        "409": "The object's state does not allow this now.",
        "415": "The body's media type is not one the operation takes.",
    }
    for name, component in schemas.items():
        # Request bodies (COMPONENT_SPLIT_REQUEST names them "...Request") refuse NUL too.
        if name.endswith("Request"):
            for prop in component.get("properties", {}).values():
                _no_nul(prop)
    for item in result.get("paths", {}).values():
        for operation in item.values():
            for parameter in operation.get("parameters", []):
                _no_nul(parameter.get("schema", {}))
            responses = operation.setdefault("responses", {})
            for code, component in _responses(operation).items():
                responses.setdefault(
                    code,
                    {
                        "description": descriptions[code],
                        "content": {
                            "application/json": {
                                "schema": {"$ref": f"#/components/schemas/{component}"}
                            }
                        },
                    },
                )
    return result


@functools.cache
def _operations() -> list[tuple[re.Pattern[str], str, list[dict[str, Any]]]]:
    """(path regex, method, parameters) of every operation of the served schema."""
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    found = []
    # Literal paths before templated ones: /checkpoints/diff/ is not /checkpoints/{id}/.
    for path in sorted(schema["paths"], key=lambda p: p.count("{")):
        regex = re.compile(re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(path)))
        for method, operation in schema["paths"][path].items():
            found.append((regex, method.upper(), operation.get("parameters", [])))
    return found


def operation_parameters(method: str, path: str) -> list[dict[str, Any]]:
    for regex, op_method, parameters in _operations():
        if op_method == method and regex.fullmatch(path):
            return parameters
    return []


class ContractMixin:
    """Refuse (400) a query the operation's schema does not allow, after authentication
    and permissions (so 401 and 403 come first)."""

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)  # type: ignore[misc]
        query = {key: request.query_params.getlist(key) for key in request.query_params}
        errors = query_errors(operation_parameters(request.method or "", request.path), query)
        if errors:
            raise ValidationError(errors)

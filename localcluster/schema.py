"""openAPIV3Schema handling for custom resources: defaults, pruning and validation.

Pure functions; messages name the field the way the real API server does, e.g.
`spec.checksum: Required value` or `spec.agent.scheme: Unsupported value: "ftp": ...`.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

Cause = dict[str, str]

_TOP_LEVEL = {"apiVersion", "kind", "metadata"}


def _fmt(value: Any) -> str:
    return json.dumps(value) if isinstance(value, str) else json.dumps(value, default=str)


def apply_defaults(schema: dict[str, Any] | None, value: Any) -> Any:
    """Fill `default` values for missing properties, recursively, and prune unknown fields.

    Nulls in non-nullable fields are dropped first, as the real server does before defaulting.
    """
    if not schema:
        return value
    return _default(schema, copy.deepcopy(value), root=True)


def _default(schema: dict[str, Any], value: Any, root: bool = False) -> Any:
    if isinstance(value, dict) and (schema.get("type") == "object" or "properties" in schema):
        props = schema.get("properties") or {}
        preserve = schema.get("x-kubernetes-preserve-unknown-fields", False)
        extra = schema.get("additionalProperties")
        for key in list(value):
            if root and key in _TOP_LEVEL:
                continue
            sub = props.get(key)
            if value[key] is None and not (sub or {}).get("nullable"):
                del value[key]
                continue
            if sub is not None:
                value[key] = _default(sub, value[key])
            elif isinstance(extra, dict):
                value[key] = _default(extra, value[key])
            elif not preserve and extra is not True and props:
                del value[key]  # pruning of unknown fields
        for key, sub in props.items():
            if key not in value and "default" in sub and not (root and key in _TOP_LEVEL):
                value[key] = _default(sub, copy.deepcopy(sub["default"]))
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [_default(schema["items"], item) for item in value]
    return value


def validate(schema: dict[str, Any] | None, value: Any) -> list[Cause]:
    """Every violation as a cause {"field", "reason", "message"}; empty when valid."""
    if not schema:
        return []
    causes: list[Cause] = []
    _validate(schema, value, "", causes, root=True)
    return causes


def _type_ok(expected: str, value: Any, schema: dict[str, Any]) -> bool:
    if schema.get("x-kubernetes-int-or-string"):
        return isinstance(value, (int, str)) and not isinstance(value, bool)
    if expected == "object":
        return isinstance(value, dict)
    if expected == "array":
        return isinstance(value, list)
    if expected == "string":
        return isinstance(value, str)
    if expected == "boolean":
        return isinstance(value, bool)
    if expected == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if expected == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return True


def _validate(
    schema: dict[str, Any], value: Any, path: str, causes: list[Cause], root: bool = False
) -> None:
    where = path or "<root>"
    if value is None:
        if not schema.get("nullable"):
            causes.append(
                {
                    "field": where,
                    "reason": "FieldValueTypeInvalid",
                    "message": f'Invalid value: "null": {where} in body must be of type '
                    f'{schema.get("type", "object")}: "null"',
                }
            )
        return
    expected = schema.get("type")
    if expected and not _type_ok(expected, value, schema):
        actual = _json_type(value)
        causes.append(
            {
                "field": where,
                "reason": "FieldValueTypeInvalid",
                "message": f'Invalid value: "{actual}": {where} in body must be of type '
                f'{expected}: "{actual}"',
            }
        )
        return
    if "enum" in schema and value not in schema["enum"]:
        supported = ", ".join(_fmt(v) for v in schema["enum"])
        causes.append(
            {
                "field": where,
                "reason": "FieldValueNotSupported",
                "message": f"Unsupported value: {_fmt(value)}: supported values: {supported}",
            }
        )
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        _check_number(schema, value, where, causes)
    if isinstance(value, str):
        _check_string(schema, value, where, causes)
    if isinstance(value, list):
        _check_list(schema, value, path, causes)
    if isinstance(value, dict):
        _check_object(schema, value, path, causes, root)


def _check_number(schema: dict[str, Any], value: Any, where: str, causes: list[Cause]) -> None:
    if "minimum" in schema and value < schema["minimum"]:
        causes.append(
            _invalid(where, value, f"should be greater than or equal to {schema['minimum']}")
        )
    if "maximum" in schema and value > schema["maximum"]:
        causes.append(
            _invalid(where, value, f"should be less than or equal to {schema['maximum']}")
        )


def _check_string(schema: dict[str, Any], value: Any, where: str, causes: list[Cause]) -> None:
    if schema.get("format") == "date-time" and not _DATE_TIME.match(value):
        causes.append(
            {
                "field": where,
                "reason": "FieldValueTypeInvalid",
                "message": f"Invalid value: {_fmt(value)}: {where} in body must be of type "
                f"date-time: {_fmt(value)}",
            }
        )
    if "pattern" in schema and not re.search(schema["pattern"], value):
        causes.append(_invalid(where, value, f"should match '{schema['pattern']}'"))
    if "minLength" in schema and len(value) < schema["minLength"]:
        causes.append(
            _invalid(where, value, f"should be at least {schema['minLength']} chars long")
        )
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        causes.append(
            {
                "field": where,
                "reason": "FieldValueTooLong",
                "message": f"Too long: may not be longer than {schema['maxLength']}",
            }
        )


def _check_list(schema: dict[str, Any], value: Any, path: str, causes: list[Cause]) -> None:
    where = path or "<root>"
    if "minItems" in schema and len(value) < schema["minItems"]:
        causes.append(_invalid(where, value, f"should have at least {schema['minItems']} items"))
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        causes.append(
            {
                "field": where,
                "reason": "FieldValueTooMany",
                "message": f"Too many: {len(value)}: must have at most {schema['maxItems']} items",
            }
        )
    items = schema.get("items")
    if isinstance(items, dict):
        for n, item in enumerate(value):
            _validate(items, item, f"{path}[{n}]", causes)
    if schema.get("x-kubernetes-list-type") == "map":
        keys = schema.get("x-kubernetes-list-map-keys") or []
        seen = set()
        for n, item in enumerate(value):
            k = tuple(json.dumps(item.get(x)) for x in keys) if isinstance(item, dict) else ()
            if k in seen:
                causes.append(
                    {
                        "field": f"{path}[{n}]",
                        "reason": "FieldValueDuplicate",
                        "message": f"Duplicate value: {_fmt(item)}",
                    }
                )
            seen.add(k)


def _check_object(
    schema: dict[str, Any], value: Any, path: str, causes: list[Cause], root: bool
) -> None:
    props = schema.get("properties") or {}
    for req in schema.get("required") or []:
        if req not in value:
            field = f"{path}.{req}" if path else req
            causes.append(
                {"field": field, "reason": "FieldValueRequired", "message": "Required value"}
            )
    extra = schema.get("additionalProperties")
    for key, sub_value in value.items():
        if root and key in _TOP_LEVEL:
            continue
        field = f"{path}.{key}" if path else key
        if key in props:
            _validate(props[key], sub_value, field, causes)
        elif isinstance(extra, dict):
            _validate(extra, sub_value, field, causes)


# The RFC 3339 timestamps kube-apiserver's `format: date-time` accepts (fraction and zone
# optional, as its strfmt parser allows).
_DATE_TIME = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?([Zz]|[+-]\d{2}:?\d{2})?\Z"
)


def _invalid(where: str, value: Any, why: str) -> Cause:
    return {
        "field": where,
        "reason": "FieldValueInvalid",
        "message": f"Invalid value: {_fmt(value)}: {where} in body {why}",
    }


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null"

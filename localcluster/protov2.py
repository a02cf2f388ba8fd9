"""`/openapi/v2` in protobuf: the Swagger 2.0 document (openapi.v2_document) encoded as
gnostic's `openapi.v2.Document` message, the only form kubectl accepts for v2 (it validates
on the client with it, e.g. a file of `kind: List`). Pure functions.

Only what the documents here hold is encoded: info, paths (operations, query and body
parameters, vendor extensions) and definitions (schemas). Field numbers are those of
gnostic's OpenAPIv2.proto; values of `Any` fields (defaults, enums, extensions) travel as
their `yaml` text (JSON is YAML).
"""

from __future__ import annotations

import json
import struct
from typing import Any

Schema = dict[str, Any]

# Schema message: scalar fields by JSON name -> (field number, kind).
_SCHEMA_FIELDS: dict[str, tuple[int, str]] = {
    "$ref": (1, "string"),
    "format": (2, "string"),
    "title": (3, "string"),
    "description": (4, "string"),
    "default": (5, "any"),
    "multipleOf": (6, "double"),
    "maximum": (7, "double"),
    "exclusiveMaximum": (8, "bool"),
    "minimum": (9, "double"),
    "exclusiveMinimum": (10, "bool"),
    "maxLength": (11, "int"),
    "minLength": (12, "int"),
    "pattern": (13, "string"),
    "maxItems": (14, "int"),
    "minItems": (15, "int"),
    "uniqueItems": (16, "bool"),
    "maxProperties": (17, "int"),
    "minProperties": (18, "int"),
    "readOnly": (27, "bool"),
    "example": (30, "any"),
}
_OPERATIONS = {"get": 2, "put": 3, "post": 4, "delete": 5, "patch": 8}


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # negative int64 values take ten bytes, as in protobuf
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _tag(field: int, wire: int) -> bytes:
    return _varint(field << 3 | wire)


def _bytes(field: int, data: bytes) -> bytes:
    return _tag(field, 2) + _varint(len(data)) + data


def _string(field: int, text: str) -> bytes:
    return _bytes(field, text.encode()) if text else b""


def _bool(field: int, value: bool) -> bytes:
    return _tag(field, 0) + b"\x01" if value else b""


def _any(field: int, value: Any) -> bytes:
    return _bytes(field, _string(2, json.dumps(value)))


def _named(field: int, name: str, value: bytes) -> bytes:
    return _bytes(field, _string(1, name) + _bytes(2, value))


def _extensions(field: int, node: dict[str, Any]) -> bytes:
    return b"".join(
        _named(field, k, _string(2, json.dumps(v))) for k, v in node.items() if k.startswith("x-")
    )


def encode_schema(node: Schema) -> bytes:
    out = bytearray()
    for key, (field, kind) in _SCHEMA_FIELDS.items():
        if key not in node:
            continue
        value = node[key]
        if kind == "string":
            out += _string(field, str(value))
        elif kind == "bool":
            out += _bool(field, bool(value))
        elif kind == "int":
            out += _tag(field, 0) + _varint(int(value))
        elif kind == "double":
            out += _tag(field, 1) + struct.pack("<d", float(value))
        else:
            out += _any(field, value)
    for name in node.get("required") or []:
        out += _string(19, name)
    for value in node.get("enum") or []:
        out += _any(20, value)
    extra = node.get("additionalProperties")
    if isinstance(extra, dict):
        out += _bytes(21, _bytes(1, encode_schema(extra)))
    elif isinstance(extra, bool):
        out += _bytes(21, _tag(2, 0) + (b"\x01" if extra else b"\x00"))
    kind = node.get("type")
    if kind:
        out += _bytes(
            22, b"".join(_string(1, t) for t in ([kind] if isinstance(kind, str) else kind))
        )
    if isinstance(node.get("items"), dict):
        out += _bytes(23, _bytes(1, encode_schema(node["items"])))
    for sub in node.get("allOf") or []:
        out += _bytes(24, encode_schema(sub))
    props = node.get("properties")
    if isinstance(props, dict):
        out += _bytes(25, b"".join(_named(1, k, encode_schema(v)) for k, v in props.items()))
    out += _extensions(31, node)
    return bytes(out)


def _parameter(param: dict[str, Any]) -> bytes:
    """A ParametersItem: a body parameter, or a query/path one (NonBodyParameter)."""
    if param.get("in") == "body":
        body = (
            _string(1, param.get("description", ""))
            + _string(2, param.get("name", ""))
            + _string(3, "body")
            + _bool(4, bool(param.get("required")))
            + _bytes(5, encode_schema(param.get("schema") or {}))
        )
        return _bytes(1, _bytes(1, body))
    sub = (
        _bool(1, bool(param.get("required")))
        + _string(2, param.get("in", "query"))
        + _string(3, param.get("description", ""))
        + _string(4, param.get("name", ""))
    )
    which = 4 if param.get("in") == "path" else 3
    sub += _string(5 if which == 4 else 6, param.get("type", "string"))
    return _bytes(1, _bytes(2, _bytes(which, sub)))


def _operation(op: dict[str, Any]) -> bytes:
    out = bytearray(_string(5, op.get("operationId", "")))
    for media in op.get("produces") or []:
        out += _string(6, media)
    for media in op.get("consumes") or []:
        out += _string(7, media)
    for param in op.get("parameters") or []:
        out += _bytes(8, _parameter(param))
    codes = b""
    for code, response in (op.get("responses") or {}).items():
        value = _string(1, response.get("description", ""))
        if isinstance(response.get("schema"), dict):
            value += _bytes(2, _bytes(1, encode_schema(response["schema"])))
        codes += _named(1, code, _bytes(1, value))
    out += _bytes(9, codes)
    out += _extensions(13, op)
    return bytes(out)


def encode_document(doc: dict[str, Any]) -> bytes:
    """The whole document as an `openapi.v2.Document` message."""
    info = doc.get("info") or {}
    paths = b""
    for path, item in (doc.get("paths") or {}).items():
        ops = b"".join(
            _bytes(_OPERATIONS[verb], _operation(op))
            for verb, op in item.items()
            if verb in _OPERATIONS
        )
        paths += _named(2, path, ops)
    definitions = b"".join(
        _named(1, name, encode_schema(schema))
        for name, schema in (doc.get("definitions") or {}).items()
    )
    return (
        _string(1, doc.get("swagger", "2.0"))
        + _bytes(2, _string(1, info.get("title", "")) + _string(2, info.get("version", "")))
        + _bytes(8, paths)
        + _bytes(9, definitions)
    )

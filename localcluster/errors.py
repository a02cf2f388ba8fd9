"""Kubernetes `Status` error bodies, shaped like the real API server's."""

from __future__ import annotations

from typing import Any

REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


class ApiError(Exception):
    """An error the server answers with a Status body and the given HTTP code."""

    def __init__(
        self,
        code: int,
        message: str,
        reason: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason or REASONS.get(code, "Unknown")
        self.details = details

    def status(self) -> dict[str, Any]:
        return status_body(self.code, self.message, self.reason, self.details)


def _without_empty(details: dict[str, Any]) -> dict[str, Any]:
    """The real server omits an empty group (the core API group) and an empty name."""
    return {k: v for k, v in details.items() if not (k in ("group", "name") and v == "")}


def status_body(
    code: int, message: str, reason: str, details: dict[str, Any] | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = _without_empty(details)
    return body


def success_status(details: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
    }
    if details:
        body["details"] = _without_empty(details)
    return body


def _qualified(plural: str, group: str) -> str:
    return f"{plural}.{group}" if group else plural


def not_found(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        404,
        f'{_qualified(plural, group)} "{name}" not found',
        "NotFound",
        {"name": name, "group": group, "kind": plural},
    )


def already_exists(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        409,
        f'{_qualified(plural, group)} "{name}" already exists',
        "AlreadyExists",
        {"name": name, "group": group, "kind": plural},
    )


def conflict(plural: str, group: str, name: str, why: str, kind: str = "") -> ApiError:
    """409 Conflict. details.kind is the plural, except where kube-apiserver names something
    else: the Kind for a failed delete precondition, "pods/binding" for a binding
    (tests/fidelity)."""
    return ApiError(
        409,
        f'Operation cannot be fulfilled on {_qualified(plural, group)} "{name}": {why}',
        "Conflict",
        {"name": name, "group": group, "kind": kind or plural},
    )


STALE = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


def invalid(kind: str, group: str, name: str, causes: list[dict[str, str]]) -> ApiError:
    """422 Invalid; each cause is {"field", "reason", "message"} and the message names fields."""
    parts = [f"{c['field']}: {c['message']}" for c in causes]
    joined = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    qualified = f"{kind}.{group}" if group else kind
    return ApiError(
        422,
        f'{qualified} "{name}" is invalid: {joined}',
        "Invalid",
        {"name": name, "group": group, "kind": kind, "causes": causes},
    )


def gone(message: str) -> ApiError:
    return ApiError(410, message, "Expired")

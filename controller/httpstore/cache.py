"""The HTTP store's pure parts: resource settings, the two-version cache, the fetch schedule
and the conditional request headers. No I/O; `now` is always passed in (monotonic seconds).

Each resource holds at most two bodies: `accepted` (a render with it passed the render
gate, or it was the first body ever fetched and is being checked) and `pending` (fetched,
different from `accepted`, waiting for a render with it to pass the gate). Templates see the
pending body while it is being checked, else the accepted one. A refused render discards the
pending body and remembers its digest, so the same body is not offered again until the
source changes; a failed fetch changes neither body.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from controller.election.timing import parse_duration
from controller.render.model import text_digest

DEFAULT_INTERVAL = 60.0
DEFAULT_TIMEOUT = 10.0
DEFAULT_MAX_BYTES = 1024 * 1024
BACKOFF_FIRST = 1.0  # seconds after the first failure; doubles per failure, up to interval
STALE_INTERVALS = 3  # no successful fetch for this many intervals: the body is expired
AUTH_TYPES = ("basic", "bearer")


@dataclass(frozen=True)
class ResourceSpec:
    """One entry of `spec.httpResources`: where, how often, how long, how big, which auth."""

    name: str
    url: str
    interval: float = DEFAULT_INTERVAL
    timeout: float = DEFAULT_TIMEOUT
    max_bytes: int = DEFAULT_MAX_BYTES
    critical: bool = False
    auth_type: str | None = None  # "basic" (Secret keys username, password) or "bearer" (token)
    auth_secret: str | None = None  # Secret name in the template config's namespace


def parse_resources(template_config: Mapping[str, Any] | None) -> tuple[dict, list[str]]:
    """`spec.httpResources` as {name: ResourceSpec}, plus the problems of invalid entries
    (each skipped entry is named in a problem; the others still load)."""
    spec = (template_config or {}).get("spec") or {}
    raw = spec.get("httpResources") or {}
    out: dict[str, ResourceSpec] = {}
    problems: list[str] = []
    if not isinstance(raw, Mapping):
        return out, ["spec.httpResources is not a map"]
    for name, entry in sorted(raw.items()):
        try:
            out[name] = _resource(str(name), entry)
        except (ValueError, TypeError) as exc:
            problems.append(f"spec.httpResources.{name}: {exc}")
    return out, problems


def _resource(name: str, entry: Any) -> ResourceSpec:
    if not isinstance(entry, Mapping):
        raise ValueError("not a map")
    url = entry.get("url")
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ValueError(f"url {url!r} is not an http(s) URL")
    interval = parse_duration(str(entry.get("refreshInterval") or "60s"))
    timeout = parse_duration(str(entry.get("timeout") or "10s"))
    max_bytes = int(entry.get("maxSize") or DEFAULT_MAX_BYTES)
    if interval <= 0 or timeout <= 0 or max_bytes <= 0:
        raise ValueError("refreshInterval, timeout and maxSize must be positive")
    auth = entry.get("auth") or {}
    auth_type = auth.get("type") if auth else None
    secret = (auth.get("secretRef") or {}).get("name") if auth else None
    if auth and (auth_type not in AUTH_TYPES or not secret):
        raise ValueError("auth needs type basic or bearer and secretRef.name")
    return ResourceSpec(
        name, url, interval, timeout, max_bytes, entry.get("critical") is True, auth_type, secret
    )


@dataclass(frozen=True)
class Version:
    """One fetched body and the validators the server sent with it."""

    body: str
    etag: str | None = None
    last_modified: str | None = None

    @property
    def digest(self) -> str:
        return text_digest(self.body)


@dataclass(frozen=True)
class FetchResult:
    """What one request ended with: a body (200), not modified (304), or an error."""

    body: str | None = None
    etag: str | None = None
    last_modified: str | None = None
    not_modified: bool = False
    error: str | None = None


@dataclass(frozen=True)
class ResourceState:
    accepted: Version | None = None
    pending: Version | None = None
    validators: Version | None = None  # the newest 200's ETag/Last-Modified (body unused)
    refused: str | None = None  # digest of the last body a render with it was refused
    last_success: float | None = None
    failures: int = 0
    error: str | None = None
    next_fetch: float = 0.0


def conditional_headers(state: ResourceState) -> dict[str, str]:
    """If-None-Match / If-Modified-Since from the newest 200 this resource received."""
    v = state.validators
    headers = {}
    if v is not None and v.etag:
        headers["If-None-Match"] = v.etag
    if v is not None and v.last_modified:
        headers["If-Modified-Since"] = v.last_modified
    return headers


def auth_header(auth_type: str | None, secret_data: Mapping[str, str]) -> dict[str, str]:
    """Authorization from a Secret's decoded data: basic (username, password) or bearer
    (token). Raises KeyError when a key is missing."""
    if auth_type == "basic":
        pair = f"{secret_data['username']}:{secret_data['password']}".encode()
        return {"Authorization": "Basic " + base64.b64encode(pair).decode()}
    if auth_type == "bearer":
        return {"Authorization": "Bearer " + secret_data["token"].strip()}
    return {}


def next_fetch_delay(failures: int, interval: float) -> float:
    """After a success, the interval; after n failures, 1 s doubling per failure, capped at
    the interval (a broken source is retried sooner than a healthy one is refreshed)."""
    if failures <= 0:
        return interval
    return min(interval, BACKOFF_FIRST * 2 ** min(failures - 1, 30))


def on_fetch(
    state: ResourceState, result: FetchResult, now: float, spec: ResourceSpec
) -> ResourceState:
    """The state after one fetch. Bodies change only on a 200 with a new body."""
    if result.error is not None:
        failures = state.failures + 1
        return replace(
            state,
            failures=failures,
            error=result.error,
            next_fetch=now + next_fetch_delay(failures, spec.interval),
        )
    ok = replace(state, failures=0, error=None, last_success=now, next_fetch=now + spec.interval)
    if result.not_modified or result.body is None:
        return ok
    fetched = Version(result.body, result.etag, result.last_modified)
    ok = replace(ok, validators=fetched)
    current = state.accepted.digest if state.accepted else None
    if fetched.digest == current:
        return replace(ok, pending=None)  # the source went back to what we serve
    if fetched.digest == state.refused:
        return ok  # refused already: not offered again until the source changes
    return replace(ok, pending=fetched, refused=None)


def on_verdict(state: ResourceState, rendered: str | None, accepted: bool) -> ResourceState:
    """The state after the render gate judged a render that used the body of digest
    `rendered`. Only the pending body is affected; a verdict about an older body is ignored."""
    pending = state.pending
    if pending is None or rendered != pending.digest:
        return state
    if accepted:
        return replace(state, accepted=pending, pending=None)
    return replace(state, pending=None, refused=pending.digest)


def offered(state: ResourceState) -> Version | None:
    """The body templates see: pending (being checked) before accepted."""
    return state.pending or state.accepted


def expired(state: ResourceState, now: float, spec: ResourceSpec) -> bool:
    """No successful fetch for STALE_INTERVALS intervals (or never one): reported, while the
    accepted body stays in use."""
    if state.last_success is None:
        return state.failures > 0
    return now - state.last_success > STALE_INTERVALS * spec.interval


def due(state: ResourceState, now: float) -> bool:
    return now >= state.next_fetch

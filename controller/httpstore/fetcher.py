"""One HTTP request for one resource: conditional, bounded in time and size (the I/O edge)."""

from __future__ import annotations

import time
from collections.abc import Mapping

import httpx

from controller.httpstore.cache import FetchResult, ResourceSpec


def fetch(http: httpx.Client, spec: ResourceSpec, headers: Mapping[str, str]) -> FetchResult:
    """GET `spec.url` with `headers` (conditional and auth); never raises for the source's
    faults: a timeout, a non-2xx/304 answer, a body over `spec.max_bytes` or one that is not
    UTF-8 is a FetchResult with `error`."""
    deadline = time.monotonic() + spec.timeout  # httpx's timeout is per read, not overall
    try:
        with http.stream("GET", spec.url, headers=dict(headers), timeout=spec.timeout) as resp:
            if resp.status_code == 304:
                return FetchResult(not_modified=True)
            if resp.status_code != 200:
                return FetchResult(error=f"HTTP {resp.status_code} from {spec.url}")
            declared = resp.headers.get("content-length")
            if declared and declared.isdigit() and int(declared) > spec.max_bytes:
                return FetchResult(error=_too_big(spec, int(declared)))
            chunks, size = [], 0
            for chunk in resp.iter_bytes():
                size += len(chunk)
                if time.monotonic() > deadline:
                    raise httpx.ReadTimeout("overall timeout")
                if size > spec.max_bytes:
                    return FetchResult(error=_too_big(spec, size))
                chunks.append(chunk)
            body = b"".join(chunks).decode("utf-8")
            return FetchResult(
                body=body,
                etag=resp.headers.get("etag"),
                last_modified=resp.headers.get("last-modified"),
            )
    except httpx.TimeoutException:
        return FetchResult(error=f"timed out after {spec.timeout:g}s fetching {spec.url}")
    except httpx.HTTPError as exc:
        return FetchResult(error=f"{type(exc).__name__} fetching {spec.url}: {exc}")
    except UnicodeDecodeError:
        return FetchResult(error=f"body of {spec.url} is not UTF-8")


def _too_big(spec: ResourceSpec, size: int) -> str:
    return f"body of {spec.url} exceeds {spec.max_bytes} bytes (at least {size})"

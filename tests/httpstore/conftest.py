"""A real HTTP server on 127.0.0.1 for the HTTP store's tests: per-path bodies, ETags,
Last-Modified and 304s, delays, status codes and a required Authorization header."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


@dataclass
class Source:
    """What the server answers on /<name>; `requests` records the conditional headers."""

    body: bytes = b""
    etag: str | None = None
    last_modified: str | None = None  # sent as Last-Modified; If-Modified-Since equal: 304
    delay: float = 0.0
    status: int = 200
    authorization: str | None = None  # the Authorization header required when set
    requests: list[dict] = field(default_factory=list)


class _Handler(BaseHTTPRequestHandler):
    sources: dict[str, Source] = {}

    def do_GET(self) -> None:
        src = self.sources.get(self.path.lstrip("/"))
        if src is None:
            self.send_error(404)
            return
        src.requests.append(dict(self.headers))
        time.sleep(src.delay)
        if src.authorization and self.headers.get("Authorization") != src.authorization:
            self.send_response(401)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if (src.etag and self.headers.get("If-None-Match") == src.etag) or (
            src.last_modified and self.headers.get("If-Modified-Since") == src.last_modified
        ):
            self.send_response(304)
            self.end_headers()
            return
        self.send_response(src.status)
        if src.etag:
            self.send_header("ETag", src.etag)
        if src.last_modified:
            self.send_header("Last-Modified", src.last_modified)
        self.send_header("Content-Length", str(len(src.body)))
        self.end_headers()
        self.wfile.write(src.body)

    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def serve_sources(sources: dict[str, Source]) -> Iterator[str]:
    """Serve `sources` (changeable while serving) on 127.0.0.1; yields the base URL."""
    handler = type("Handler", (_Handler,), {"sources": sources})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture
def server() -> Iterator[tuple[str, dict[str, Source]]]:
    sources: dict[str, Source] = {}
    with serve_sources(sources) as base:
        yield base, sources


def _template(base: str, **resources: dict) -> dict:
    """A template config whose spec.httpResources point at `base`/<name>."""
    return {
        "spec": {"httpResources": {n: {"url": f"{base}/{n}", **r} for n, r in resources.items()}}
    }

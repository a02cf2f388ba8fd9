"""Per-replica /healthz, /readyz and /metrics.

`ComponentHealth` is the registry components report into: availability (decides the HTTP
status of /healthz) and the last error (reported, but does not fail the probe). ADR-0033:
the last render error stays visible under `components.reconciliation-coordinator.error`
until a render succeeds, while /healthz keeps answering 200 as long as every component is
available, so a controller whose rendering is blocked is not restarted for it.

/readyz answers 200 once every readiness check passes (the watch caches have synced).
/metrics serves the prometheus_client registry in the text exposition format.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

log = logging.getLogger(__name__)

RECONCILIATION_COORDINATOR = "reconciliation-coordinator"
RESOURCE_WATCHER = "resource-watcher"


@dataclass
class _Component:
    available: bool = True
    error: str | None = None
    since: str | None = None  # when the current error was first reported


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


class ComponentHealth:
    """Thread-safe registry of component health and readiness checks."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._components: dict[str, _Component] = {}
        self._probes: dict[str, Callable[[], str | None]] = {}
        self._ready_checks: dict[str, Callable[[], bool]] = {}

    def set_error(self, component: str, error: str | None) -> None:
        """Record (or clear with None) a component's last error; availability is unchanged."""
        with self._lock:
            c = self._components.setdefault(component, _Component())
            if error is None:
                c.error, c.since = None, None
            elif c.error is None:
                c.error, c.since = str(error), _now()
            else:
                c.error = str(error)

    def set_available(self, component: str, available: bool) -> None:
        with self._lock:
            self._components.setdefault(component, _Component()).available = available

    def remove(self, component: str) -> None:
        """Forget a component (e.g. a leader-only one at the end of the term)."""
        with self._lock:
            self._components.pop(component, None)
            self._probes.pop(component, None)

    def register_probe(self, component: str, probe: Callable[[], str | None]) -> None:
        """A callable asked on each /healthz for the component's current error (None: fine)."""
        with self._lock:
            self._probes[component] = probe
            self._components.setdefault(component, _Component())

    def add_readiness_check(self, name: str, check: Callable[[], bool]) -> None:
        with self._lock:
            self._ready_checks[name] = check

    def error(self, component: str) -> str | None:
        with self._lock:
            c = self._components.get(component)
            return c.error if c else None

    def report(self) -> tuple[bool, dict[str, Any]]:
        """(healthy, body) for /healthz. Healthy = every component available."""
        with self._lock:
            probes = dict(self._probes)
        for name, probe in probes.items():
            try:
                err = probe()
            except Exception as exc:  # a broken probe is itself worth reporting
                err = f"health probe failed: {type(exc).__name__}: {exc}"
            self.set_error(name, err)
        with self._lock:
            comps = {
                name: {"available": c.available, "error": c.error, "errorSince": c.since}
                for name, c in sorted(self._components.items())
            }
        healthy = all(c["available"] for c in comps.values())
        return healthy, {"status": "ok" if healthy else "unavailable", "components": comps}

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        with self._lock:
            checks = dict(self._ready_checks)
        results: dict[str, bool] = {}
        for name, check in sorted(checks.items()):
            try:
                results[name] = bool(check())
            except Exception:
                log.exception("readiness check %s failed", name)
                results[name] = False
        ready = all(results.values())
        return ready, {"ready": ready, "checks": results}


class HealthServer:
    """A small threaded HTTP server for one replica's probes and metrics."""

    def __init__(
        self,
        health: ComponentHealth,
        host: str = "0.0.0.0",
        port: int = 8081,
        *,
        registry: CollectorRegistry = REGISTRY,
    ) -> None:
        self.health = health
        self.registry = registry
        self._server = ThreadingHTTPServer((host, port), self._handler_class())
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        host = self._server.server_address[0]
        if host in ("0.0.0.0", ""):
            host = "127.0.0.1"
        return f"http://{host}:{self.port}"

    def start(self) -> HealthServer:
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.2}, name="health-http"
        )
        self._thread.daemon = True
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout)

    def __enter__(self) -> HealthServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/healthz":
                    ok, body = server.health.report()
                    self._json(200 if ok else 503, body)
                elif path == "/readyz":
                    ok, body = server.health.readiness()
                    self._json(200 if ok else 503, body)
                elif path == "/metrics":
                    self._send(200, CONTENT_TYPE_LATEST, generate_latest(server.registry))
                else:
                    self._json(404, {"error": "not found"})

            def _json(self, status: int, body: dict) -> None:
                data = json.dumps(body, sort_keys=True).encode()
                self._send(status, "application/json", data)

            def _send(self, status: int, ctype: str, data: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                log.debug("health %s", format % args)

        return Handler

"""Where injected faults meet requests (asyncio): the admin routes that add and remove
rules, and the waits a matching request or open stream goes through. One home for the local
API server (localcluster/server.py) and the real tier's fault proxy
(localcluster/real/faultproxy.py); the matching itself is localcluster/faults.py."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable

from aiohttp import web

from localcluster.errors import ApiError
from localcluster.faults import FaultRule, FaultSet


def _dumps(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def fault_response(code: int, message: str | None) -> web.Response:
    """An injected error; a 429 names its pause as kube-apiserver's does (Retry-After: 1
    and details.retryAfterSeconds), the answer it gives while a watch cache starts."""
    if code != 429:
        err = ApiError(code, message or f"injected fault: status {code}")
    else:
        err = ApiError(
            429, message or "storage is (re)initializing", details={"retryAfterSeconds": 1}
        )
    response = web.Response(body=_dumps(err.status()), status=code, content_type="application/json")
    if code == 429:
        response.headers["Retry-After"] = "1"
    return response


class FaultGate:
    """The fault rules of one server and the event that wakes whatever a rule holds when the
    rules change. `stopping` ends every hold (the server is shutting down)."""

    def __init__(self, stopping: asyncio.Event) -> None:
        self.faults = FaultSet()
        self._stopping = stopping
        self._changed = asyncio.Event()

    def changed(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def _wait_changed(self, timeout: float) -> None:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._changed.wait(), timeout)

    async def admit(self, request: web.Request) -> web.Response | None:
        """Apply the rules matching this request: delay it, hold it (black hole) while the
        rule stands, or answer for the server (an error Status). None: pass it on."""
        if not self.faults.rules:
            return None
        for rule in self.faults.match(request.method, request.path):
            if rule.latency_ms:
                await asyncio.sleep(rule.latency_ms / 1000.0)
            if rule.blackhole:
                # Never answer while the rule stands (like a dropped packet the peer
                # retransmits once the path heals).
                while self.faults.active(rule) and not self._stopping.is_set():
                    transport = request.transport
                    if transport is None or transport.is_closing():
                        raise asyncio.CancelledError
                    await self._wait_changed(0.5)
            if rule.status:
                return fault_response(rule.status, rule.message)
        return None

    async def wait_not_blackholed(self, method: str, path: str) -> None:
        """An open stream under a black-hole rule goes silent too (as on a dead network)."""
        while self.faults.holds(method, path) and not self._stopping.is_set():
            await self._wait_changed(1.0)

    async def wait_unfrozen(self, group: str, plural: str) -> None:
        while self.faults.frozen(group, plural) and not self._stopping.is_set():
            await self._wait_changed(1.0)

    def add_admin_routes(
        self,
        app: web.Application,
        after_change: Callable[[], Awaitable[None]] | None = None,
        refuses: Callable[[FaultRule], str] | None = None,
    ) -> None:
        """GET/POST/DELETE /admin/faults and DELETE /admin/faults/{id} (localcluster/README.md).
        after_change runs once the rules changed; refuses(rule) names why a server cannot
        apply a rule ("" when it can), answered with 400."""

        async def settle() -> None:
            self.changed()
            if after_change is not None:
                await after_change()

        async def listing(request: web.Request) -> web.Response:
            return web.json_response({"faults": [r.to_json() for r in self.faults.rules]})

        async def add(request: web.Request) -> web.Response:
            try:
                rule = FaultRule.from_json(await request.json())
            except (ValueError, TypeError) as exc:
                return web.json_response({"error": str(exc)}, status=400)
            why = refuses(rule) if refuses is not None else ""
            if why:
                return web.json_response({"error": why}, status=400)
            self.faults.add(rule)
            await settle()
            return web.json_response(rule.to_json(), status=201)

        async def clear(request: web.Request) -> web.Response:
            self.faults.clear()
            await settle()
            return web.json_response({"faults": []})

        async def remove(request: web.Request) -> web.Response:
            found = self.faults.remove(int(request.match_info["id"]))
            await settle()
            return web.json_response({"removed": found}, status=200 if found else 404)

        app.router.add_route("GET", "/admin/faults", listing)
        app.router.add_route("POST", "/admin/faults", add)
        app.router.add_route("DELETE", "/admin/faults", clear)
        app.router.add_route("DELETE", "/admin/faults/{id}", remove)

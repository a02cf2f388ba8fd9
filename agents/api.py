"""The agent's HTTP API (aiohttp): auth, body limits, routing. The core does the work.

GET /healthz, GET /readyz (no auth); GET /v1/state[?verify=1], POST /v1/apply (bearer token).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
from pathlib import Path
from typing import Any

from aiohttp import web

from agents.core import Agent

log = logging.getLogger("agents.api")

DEFAULT_MAX_BODY = 64 * 1024 * 1024


def health_summary(state: dict[str, Any]) -> dict[str, Any]:
    """The read-only part of `Agent.public_state` /healthz adds, for the pod page to show
    live (docs/dashboard.md): no token sequence, no files, nothing an apply needs."""
    token = state.get("applied_token") or None
    return {
        "pod_name": state.get("pod_name"),
        "applied_plan_id": state.get("applied_plan_id"),
        "checksum": state.get("applied_checksum"),
        "term": {"holder": token.get("holder"), "epoch": token.get("epoch")} if token else None,
        "worker_operation_mode": state.get("worker_operation_mode"),
        "bootstrap": bool(state.get("bootstrap")),
        "invariant_violation": state.get("invariant_violation"),
    }


def _json(status: int, body: dict[str, Any]) -> web.Response:
    return web.json_response(body, status=status, dumps=lambda o: json.dumps(o, sort_keys=True))


class AgentAPI:
    def __init__(
        self,
        agent: Agent,
        token: str,
        *,
        token_file: Path | None = None,
        max_body: int = DEFAULT_MAX_BODY,
        monitor_interval: float = 1.0,
    ) -> None:
        if not token:
            raise ValueError("an empty token would let anyone in")
        self.agent = agent
        self._token = f"Bearer {token}".encode()
        # A mounted Secret changes in place: re-read the token when the file changes.
        self._token_file = token_file
        self._token_mtime = token_file.stat().st_mtime_ns if token_file else 0
        self.max_body = max_body
        self.monitor_interval = monitor_interval
        self._pending_task: asyncio.Task | None = None
        self._monitor_task: asyncio.Task | None = None

    def app(self) -> web.Application:
        app = web.Application(client_max_size=self.max_body)
        app.router.add_get("/healthz", self.healthz)
        app.router.add_get("/readyz", self.readyz)
        app.router.add_get("/v1/state", self.state)
        app.router.add_post("/v1/apply", self.apply)
        app.on_startup.append(self._on_startup)
        app.on_cleanup.append(self._on_cleanup)
        return app

    async def _on_startup(self, _app: web.Application) -> None:
        self._monitor_task = asyncio.create_task(self._monitor())

    async def _on_cleanup(self, _app: web.Application) -> None:
        for task in (self._monitor_task, self._pending_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    def _refresh_token(self) -> None:
        if self._token_file is None:
            return
        try:
            mtime = self._token_file.stat().st_mtime_ns
            if mtime != self._token_mtime:
                token = self._token_file.read_text().strip()
                self._token_mtime = mtime
                if token:
                    self._token = f"Bearer {token}".encode()
        except OSError:
            log.warning("token file %s unreadable; keeping the current token", self._token_file)

    def _authorized(self, request: web.Request) -> bool:
        self._refresh_token()
        given = request.headers.get("Authorization", "").encode()
        return hmac.compare_digest(given, self._token)

    async def healthz(self, _request: web.Request) -> web.Response:
        # Liveness stays 200 whatever the summary says, and never waits for the apply lock
        # (an apply may hold it through a reload): the summary is read unlocked, for people.
        summary = health_summary(self._unlocked_state())
        return _json(200, {"status": "alive", "runtime_id": self.agent.runtime_id, **summary})

    def _unlocked_state(self) -> dict[str, Any]:
        agent = self.agent
        s = agent.state
        applied = s.applied
        return {
            "applied_plan_id": applied.plan_id if applied else None,
            "applied_checksum": applied.checksum if applied else None,
            "applied_token": s.applied_token,
            "worker_operation_mode": agent.worker_operation_mode(),
            "bootstrap": agent.is_bootstrap(),
            "invariant_violation": s.invariant_violation,
        }

    async def readyz(self, _request: web.Request) -> web.Response:
        ok, why = await asyncio.to_thread(self.agent.ready)
        return _json(200 if ok else 503, {"ready": ok, "detail": why})

    async def state(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return _json(401, {"reason": "unauthorized"})
        if request.query.get("verify") in ("1", "true", "yes"):
            verification = await asyncio.to_thread(self.agent.verify)
            body = await asyncio.to_thread(self._locked_state)
            body["verification"] = verification
        else:
            body = await asyncio.to_thread(self._locked_state)
        return _json(200, body)

    def _locked_state(self) -> dict[str, Any]:
        with self.agent.lock:
            return self.agent.public_state()

    async def apply(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return _json(401, {"reason": "unauthorized"})
        if request.content_length is not None and request.content_length > self.max_body:
            return _json(413, {"reason": "body_too_large", "limit": self.max_body})
        try:
            raw = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return _json(413, {"reason": "body_too_large", "limit": self.max_body})
        try:
            manifest = json.loads(raw)
        except ValueError as exc:
            return _json(400, {"reason": "bad_json", "detail": str(exc)})
        status, body = await asyncio.to_thread(self.agent.apply, manifest)
        self._arm_pending()
        return _json(status, body)

    def _arm_pending(self) -> None:
        if self.agent.pending_due_in() is None:
            return
        if self._pending_task is None or self._pending_task.done():
            self._pending_task = asyncio.create_task(self._pending_loop())

    async def _pending_loop(self) -> None:
        """Run paced reloads when due; never drop one."""
        while (due := self.agent.pending_due_in()) is not None:
            await asyncio.sleep(due + 0.001)
            try:
                await asyncio.to_thread(self.agent.run_pending_reload)
            except Exception:  # keep trying: a scheduled reload is never dropped
                log.exception("scheduled reload failed")
                await asyncio.sleep(0.5)

    async def _monitor(self) -> None:
        while True:
            await asyncio.sleep(self.monitor_interval)
            try:
                await asyncio.to_thread(self._check_if_idle)
            except Exception:
                log.exception("worker check failed")

    def _check_if_idle(self) -> None:
        if self.agent.lock.acquire(blocking=False):
            try:
                self.agent.check_worker()
            finally:
                self.agent.lock.release()

"""HTTP client of the agent API, used by the controller's deployer.

One httpx.Client per agent keeping one HTTP/1.1 connection alive between calls (the agent's
server keeps idle connections for an hour; the client lets one go after KEEPALIVE_SECONDS),
a timeout on every call, typed results and typed errors: a 409 raises AgentConflict carrying
the agent's machine-readable reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx


class AgentError(RuntimeError):
    """The agent answered with an error, or could not be reached."""

    def __init__(self, message: str, status: int | None = None, body: dict | None = None):
        super().__init__(message)
        self.status = status
        self.body = body or {}
        self.reason = self.body.get("reason")


class AgentUnauthorized(AgentError):
    pass


class AgentConflict(AgentError):
    """409: fenced (stale_epoch, stale_sequence, unexpected_previous_plan, ...)."""


class AgentRejected(AgentError):
    """400/413/422: the manifest or the configuration was refused; nothing changed."""

    @property
    def error_text(self) -> str:
        return str(self.body.get("error") or self.body.get("detail") or "")


@dataclass(frozen=True)
class AgentState:
    pod_name: str
    pod_uid: str
    runtime_id: str
    bootstrap: bool
    applied_plan_id: str | None
    running_plan_id: str | None
    worker_operation_plan_id: str | None
    last_known_good_plan_id: str | None
    applied_checksum: str | None
    applied_token: dict[str, Any] | None
    files: dict[str, dict[str, Any]]
    structure_digest: str | None
    haproxy_version: str
    worker: dict[str, Any] | None
    pending_reload: dict[str, Any] | None
    last_apply: dict[str, Any] | None
    invariant_violation: str | None
    apply_count: int
    reload_count: int
    verification: dict[str, Any] | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> AgentState:
        names = cls.__dataclass_fields__.keys() - {"raw"}
        return cls(**{k: body.get(k) for k in names}, raw=body)


@dataclass(frozen=True)
class ApplyResult:
    result: str  # runtime | file-only | reload | reload_scheduled | noop
    plan_id: str
    why: str
    state: AgentState


# httpx lets an idle connection go after 5 s by default, so an endpoint change after a quiet
# spell paid a new TCP (and TLS) handshake; the agent's aiohttp server keeps idle
# connections far longer (keepalive_timeout 3630 s), so the client is the one to close.
KEEPALIVE_SECONDS = 600.0


class AgentClient:
    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = 10.0,
        apply_timeout: float = 60.0,
        verify: bool | str = True,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.apply_timeout = apply_timeout
        self._http = httpx.Client(
            base_url=base_url,
            headers={"Authorization": f"Bearer {token}"},
            timeout=httpx.Timeout(timeout),
            verify=verify,
            transport=transport,
            # One kept connection per agent; a call that overlaps another (a state read
            # beside an apply) may open a second, closed when it returns.
            limits=httpx.Limits(max_keepalive_connections=1, keepalive_expiry=KEEPALIVE_SECONDS),
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> AgentClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise AgentError(f"{method} {path}: {exc}") from exc
        try:
            body = response.json()
        except ValueError:
            body = {"detail": response.text[:500]}
        status = response.status_code
        if status < 300:
            return body
        message = f"{method} {path}: {status} {body.get('reason', '')}".strip()
        if status == 401:
            raise AgentUnauthorized(message, status, body)
        if status == 409:
            raise AgentConflict(message, status, body)
        if status in (400, 413, 422):
            raise AgentRejected(message, status, body)
        raise AgentError(message, status, body)

    def healthz(self) -> bool:
        return self._http.get("/healthz").status_code == 200

    def readyz(self) -> bool:
        return self._http.get("/readyz").status_code == 200

    def state(self, verify: bool = False) -> AgentState:
        params = {"verify": "1"} if verify else None
        return AgentState.from_json(self._call("GET", "/v1/state", params=params))

    def apply(self, manifest: dict[str, Any] | bytes) -> ApplyResult:
        """POST a manifest: a dict, or its JSON already encoded (the deployer encodes a
        render's files once for every pod, controller.deploy.diff.encode_manifest)."""
        if isinstance(manifest, bytes):
            sent: dict[str, Any] = {
                "content": manifest,
                "headers": {"Content-Type": "application/json"},
            }
        else:
            sent = {"json": manifest}
        body = self._call("POST", "/v1/apply", **sent, timeout=self.apply_timeout)
        return ApplyResult(
            result=body["result"],
            plan_id=body["plan_id"],
            why=body.get("why", ""),
            state=AgentState.from_json(body["state"]),
        )

"""In-process agents for the term model test: the real fencing and action decisions
(agents/decide.py) and the real manifest parser, without files or an haproxy process.

Each agent answers the agent HTTP API through `httpx.MockTransport`, so the controller's
real `AgentClient` and `Deployer` talk to it unchanged. Every apply it accepts is recorded
with whether the pod was bootstrap at that moment, which the model's invariants judge.
"""

from __future__ import annotations

import json
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx

from agents.client import AgentClient
from agents.decide import Current, choose_action, fence
from agents.manifest import Manifest, ManifestError, Token, parse_manifest
from controller.deploy.deployer import AgentPool, HAProxyPod

TOKEN = "model-token"


@dataclass(frozen=True)
class PlanRecord:
    plan_id: str
    checksum: str
    structure_digest: str
    files: dict[str, dict[str, Any]]  # path -> {kind, sha256, size}

    @classmethod
    def of(cls, m: Manifest) -> PlanRecord:
        files = {f.path: {"kind": f.kind, "sha256": f.sha256, "size": f.size} for f in m.files}
        return cls(m.plan_id, m.checksum, m.structure_digest, files)


@dataclass(frozen=True)
class AcceptedApply:
    """One apply an agent took (HTTP 200 with a change), as the invariants see it."""

    pod: str
    plan_id: str
    checksum: str
    holder: str
    epoch: int
    was_bootstrap: bool
    result: str  # runtime | reload | reload_scheduled


@dataclass
class FakeAgent:
    pod_name: str
    pod_uid: str
    ip: str
    runtime_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    applied: PlanRecord | None = None
    token: Token | None = None
    running_plan_id: str | None = None
    worker_operation_plan_id: str | None = None
    running_structure_digest: str | None = None
    last_known_good: PlanRecord | None = None
    pending_reload: str | None = None  # plan id of a scheduled reload
    pace: bool = False  # the next reloads are scheduled (paced), not done at once
    reload_when_read: bool = False  # a paced reload comes due before the next verified read
    apply_count: int = 0
    accepted: list[AcceptedApply] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.lock = threading.Lock()

    # -- what the agent reports ----------------------------------------------------------

    @property
    def bootstrap(self) -> bool:
        return (
            self.applied is None
            and self.running_plan_id is None
            and self.worker_operation_plan_id is None
            and self.last_known_good is None
            and self.token is None
        )

    def public_state(self) -> dict[str, Any]:
        applied, lkg = self.applied, self.last_known_good
        return {
            "pod_name": self.pod_name,
            "pod_uid": self.pod_uid,
            "runtime_id": self.runtime_id,
            "bootstrap": self.bootstrap,
            "applied_plan_id": applied.plan_id if applied else None,
            "running_plan_id": self.running_plan_id,
            "worker_operation_plan_id": self.worker_operation_plan_id,
            "last_known_good_plan_id": lkg.plan_id if lkg else None,
            "applied_checksum": applied.checksum if applied else None,
            "applied_token": self.token.as_dict() if self.token else None,
            "files": dict(applied.files) if applied else {},
            "structure_digest": applied.structure_digest if applied else None,
            "running_structure_digest": self.running_structure_digest,
            "haproxy_version": "fake",
            "worker": {"pid": 1, "start_time": 1.0},
            "pending_reload": {"plan_id": self.pending_reload} if self.pending_reload else None,
            "last_apply": None,
            "invariant_violation": None,
            "apply_count": self.apply_count,
            "reload_count": 0,
        }

    def _current(self) -> Current:
        applied = self.applied
        files = applied.files if applied else {}
        return Current(
            applied_plan_id=applied.plan_id if applied else None,
            applied_checksum=applied.checksum if applied else None,
            applied_token=self.token,
            files={p: (f["kind"], f["sha256"]) for p, f in files.items()},
            running_structure_digest=self.running_structure_digest,
            worker_alive=True,
            pending_reload=self.pending_reload is not None,
            violation=False,
        )

    # -- what the agent does -------------------------------------------------------------

    def apply(self, raw: Any) -> tuple[int, dict[str, Any]]:
        with self.lock:
            try:
                m = parse_manifest(raw)
            except ManifestError as exc:
                return 400, {"reason": exc.reason, "detail": exc.detail}
            current = self._current()
            reason = fence(current, m)
            if reason is not None:
                return 409, {"reason": reason, "applied_plan_id": current.applied_plan_id}
            decision = choose_action(current, m)
            if decision.action == "noop":
                return 200, self._answer(m, "noop", decision.why)
            was_bootstrap = self.bootstrap
            if decision.action == "revert":
                if self.last_known_good is None:
                    return 409, {"reason": "no_last_known_good"}
                record = self.last_known_good
            else:
                record = PlanRecord.of(m)
            self.applied, self.token = record, m.token
            if decision.action == "runtime":
                self.worker_operation_plan_id = record.plan_id
                self.last_known_good = record
                result = "runtime"
            elif self.pace:
                self.pending_reload = record.plan_id
                result = "reload_scheduled"
            else:
                self._reloaded()
                result = "reload"
            self.apply_count += 1
            self.accepted.append(
                AcceptedApply(
                    self.pod_name,
                    record.plan_id,
                    record.checksum,
                    m.token.holder,
                    m.token.epoch,
                    was_bootstrap,
                    result,
                )
            )
            return 200, self._answer(m, result, decision.why)

    def _reloaded(self) -> None:
        assert self.applied is not None
        self.running_plan_id = self.worker_operation_plan_id = self.applied.plan_id
        self.running_structure_digest = self.applied.structure_digest
        self.pending_reload = None
        self.last_known_good = self.applied

    def run_pending_reload(self) -> bool:
        """The paced reload runs now; True when there was one."""
        with self.lock:
            if self.pending_reload is None:
                return False
            self._reloaded()
            return True

    def _answer(self, m: Manifest, result: str, why: str) -> dict[str, Any]:
        return {"result": result, "plan_id": m.plan_id, "why": why, "state": self.public_state()}

    # -- the HTTP API ----------------------------------------------------------------------

    def handle(self, request: httpx.Request) -> httpx.Response:
        if request.headers.get("authorization") != f"Bearer {TOKEN}":
            return httpx.Response(401, json={"reason": "unauthorized"})
        if request.method == "GET" and request.url.path == "/v1/state":
            verify = request.url.params.get("verify") == "1"
            if verify and self.reload_when_read:
                self.run_pending_reload()
            with self.lock:
                state = self.public_state()
            if verify:
                state["verification"] = {"files_ok": True, "worker_ok": True}
            return httpx.Response(200, json=state)
        if request.method == "POST" and request.url.path == "/v1/apply":
            status, body = self.apply(json.loads(request.content))
            return httpx.Response(status, json=body)
        return httpx.Response(404, json={"reason": "not_found"})


class FakeAgentPool(AgentPool):
    """The controller's agent pool, each pod's client wired to its in-process agent."""

    def __init__(self, agents: dict[str, FakeAgent]) -> None:
        super().__init__(port=8405, token=lambda: TOKEN)
        self.agents = agents  # by pod IP; the model adds pods to it

    def client(self, pod: HAProxyPod) -> AgentClient:
        url = self.url(pod)
        with self._lock:
            existing = self._clients.get(url)
            if existing is None:
                agent = self.agents[pod.ip]
                existing = AgentClient(
                    url, TOKEN, timeout=5.0, transport=httpx.MockTransport(agent.handle)
                )
                self._clients[url] = existing
            return existing

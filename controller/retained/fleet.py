"""What one HAProxy pod reported through its agent, reduced to what the decisions need."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class FileDigest:
    sha256: str
    size: int


@dataclass(frozen=True)
class PodReport:
    """One pod of the fleet as its agent answered `GET /v1/state?verify=1` (or failed to).

    `reachable` False means the agent did not answer (or answered an error); every other
    field is then meaningless.
    """

    pod_name: str
    pod_uid: str
    reachable: bool = True
    verified: bool = True
    runtime_id: str | None = None
    applied_plan_id: str | None = None
    running_plan_id: str | None = None
    worker_operation_plan_id: str | None = None
    worker_operation_mode: str | None = None  # how the worker came to match it (agent)
    last_known_good_plan_id: str | None = None
    applied_checksum: str | None = None
    applied_epoch: int | None = None
    applied_holder: str | None = None  # the holder whose fencing token applied the plan
    pending_reload: bool = False
    invariant_violation: str | None = None
    worker_pid: int | None = None
    files: dict[str, FileDigest] = field(default_factory=dict)

    @property
    def is_bootstrap(self) -> bool:
        """The seed's definition: no plan of any kind, no token and no invariant violation."""
        return (
            self.applied_plan_id is None
            and self.running_plan_id is None
            and self.worker_operation_plan_id is None
            and self.last_known_good_plan_id is None
            and self.applied_epoch is None
            and self.invariant_violation is None
        )

    @classmethod
    def unreachable(cls, pod_name: str, pod_uid: str) -> PodReport:
        return cls(pod_name=pod_name, pod_uid=pod_uid, reachable=False, verified=False)

    @classmethod
    def from_agent_state(
        cls, pod_name: str, pod_uid: str, state: dict[str, Any], verified: bool
    ) -> PodReport:
        """Build from the agent's JSON state (agents/README.md)."""
        token = state.get("applied_token") or {}
        worker = state.get("worker") or {}
        files = {
            path: FileDigest(sha256=str(info["sha256"]), size=int(info["size"]))
            for path, info in (state.get("files") or {}).items()
        }
        return cls(
            pod_name=pod_name,
            pod_uid=pod_uid,
            reachable=True,
            verified=verified,
            runtime_id=state.get("runtime_id"),
            applied_plan_id=state.get("applied_plan_id"),
            running_plan_id=state.get("running_plan_id"),
            worker_operation_plan_id=state.get("worker_operation_plan_id"),
            worker_operation_mode=state.get("worker_operation_mode"),
            last_known_good_plan_id=state.get("last_known_good_plan_id"),
            applied_checksum=state.get("applied_checksum"),
            applied_epoch=token.get("epoch") if token else None,
            applied_holder=token.get("holder") if token else None,
            pending_reload=bool(state.get("pending_reload")),
            invariant_violation=state.get("invariant_violation"),
            worker_pid=worker.get("pid"),
            files=files,
        )

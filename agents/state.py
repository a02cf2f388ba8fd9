"""The agent's own durable record: what it applied, what the worker runs, last-known-good.

Saved atomically in the data dir after every change so a restarted agent keeps reporting
the truth (and finds an interrupted apply through the journal).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agents.filetree import write_atomic

STATE_VERSION = 1


@dataclass
class PlanRecord:
    """A plan as the agent keeps it: identity, structure and file digests."""

    plan_id: str
    checksum: str
    structure_digest: str
    files: dict[str, dict[str, Any]]  # path -> {kind, sha256, size}


@dataclass
class DurableState:
    applied: PlanRecord | None = None
    applied_token: dict[str, Any] | None = None
    running_plan_id: str | None = None
    running_structure_digest: str | None = None
    worker_operation_plan_id: str | None = None
    # How the worker came to match worker_operation_plan_id without a reload: "runtime" or
    # "file-only" (contract.APPLY_MODES); read only while it differs from running_plan_id.
    worker_operation_mode: str | None = None
    last_known_good: PlanRecord | None = None
    pending_reload: dict[str, Any] | None = None
    last_apply: dict[str, Any] | None = None
    invariant_violation: str | None = None
    apply_count: int = 0
    reload_count: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> bytes:
        # Shallow: every field is JSON already but the two records (dataclasses.asdict's
        # deep copy was a millisecond of each apply; issue 19).
        fields = {**vars(self), "version": STATE_VERSION}
        for key in ("applied", "last_known_good"):
            if fields[key] is not None:
                fields[key] = vars(fields[key])
        return json.dumps(fields, sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes) -> DurableState:
        raw = json.loads(data)
        known = cls.__dataclass_fields__.keys()
        raw = {k: v for k, v in raw.items() if k in known}  # tolerate older/newer fields
        for key in ("applied", "last_known_good"):
            if raw.get(key) is not None:
                raw[key] = PlanRecord(**raw[key])
        return cls(**raw)


def load(path: Path) -> DurableState | None:
    try:
        return DurableState.from_json(path.read_bytes())
    except FileNotFoundError:
        return None


def save(path: Path, state: DurableState, durable: bool = True) -> None:
    write_atomic(path, state.to_json(), durable)

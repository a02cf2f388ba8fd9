"""Per-pod deployment decision: diff a pod against what its agent reports (pure).

A pod already running the output is skipped: a leader change alone reloads nothing. When the
pod's current plan is known, the runtime operations between the two plans let the agent
apply without a reload (its structure digest check has the final word); a pod that runs the
plan the incremental path started from gets that path's operations and only the edits of
its files, not their bytes (docs/design/incremental.md). When it is not
known, the agent is asked to reload rather than guess the running state.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from controller.render import RenderOutput, runtime_operations


@dataclass(frozen=True)
class Skip:
    reason: str


@dataclass(frozen=True)
class Apply:
    mode: str  # auto | reload
    runtime_operations: tuple[dict[str, Any], ...]
    expected_previous_plan_id: str | None
    reason: str
    # The pod runs the output's runtime_delta base: send edits of its files, not the bytes.
    from_base: bool = False


BOOTSTRAP = Apply("auto", (), None, "bootstrap pod")


def decide_pod(
    applied_plan_id: str | None,
    applied_checksum: str | None,
    invariant_violation: str | None,
    output: RenderOutput,
    known_plans: Mapping[str, Mapping[str, Any]],
) -> Skip | Apply:
    if (
        applied_plan_id == output.plan_id
        and applied_checksum == output.checksum
        and not invariant_violation
    ):
        return Skip("pod already runs this plan")
    if applied_plan_id is None:
        return BOOTSTRAP
    delta = output.runtime_delta
    if not invariant_violation and delta is not None and delta.base_plan_id == applied_plan_id:
        # The incremental path's own operations, and edits of the files the pod has.
        why = f"{len(delta.operations)} runtime operations, edits of the pod's files"
        return Apply("auto", delta.operations, applied_plan_id, why, from_base=True)
    old_plan = known_plans.get(applied_plan_id)
    if invariant_violation or old_plan is None:
        why = "invariant violation" if invariant_violation else "pod's current plan unknown"
        return Apply("reload", (), applied_plan_id, why)
    ops = runtime_operations(old_plan, output.plan)
    if ops is None:
        return Apply("auto", (), applied_plan_id, "structure changed: reload")
    return Apply("auto", tuple(ops), applied_plan_id, f"{len(ops)} runtime operations")


def whole(decision: Apply) -> Apply:
    """The same apply with every file's bytes (the pod could not take edits of its own)."""
    return replace(decision, from_base=False, reason=f"{decision.reason}; whole files")


def manifest_head(
    output: RenderOutput,
    decision: Apply,
    holder: str,
    epoch: int,
    sequence: int,
    expect_bootstrap: bool = False,
) -> dict[str, Any]:
    """The agent apply manifest (docs/contracts.md) but its files: what differs from one pod
    to the next. `expect_bootstrap` makes the agent refuse it unless the pod is bootstrap
    when it arrives (recovery, ADR-0033)."""
    return {
        "plan_id": output.plan_id,
        "checksum": output.checksum,
        "structure_digest": output.structure_digest,
        "token": {"holder": holder, "epoch": epoch, "sequence": sequence},
        "expected_previous_plan_id": decision.expected_previous_plan_id,
        "mode": decision.mode,
        "runtime_operations": list(decision.runtime_operations),
        "expect_bootstrap": expect_bootstrap,
    }


def encoded_files(output: RenderOutput, from_base: bool = False) -> bytes:
    """The manifest's `files` as JSON (`from_base`: edits of the runtime delta's base plan).
    Nearly all of a manifest's bytes and the same for every pod, so the deployer makes it
    once per deployment; not kept with the output (the plan memory holds outputs, and this
    is about twice the size of their files)."""
    files = output.based_manifest_files() if from_base else output.manifest_files()
    return json.dumps(files, separators=(",", ":")).encode()


def manifest(head: Mapping[str, Any], output: RenderOutput) -> dict[str, Any]:
    """The whole manifest as a dict: `head` (manifest_head) with `output`'s files."""
    return {**head, "files": output.manifest_files()}


def encode_manifest(head: Mapping[str, Any], files: bytes) -> bytes:
    """The manifest the agent reads: `head` (manifest_head) with `files` (encoded_files)."""
    rest = json.dumps(head, separators=(",", ":"))
    assert rest != "{}", "a manifest has more than its files"
    return b'{"files":' + files + b"," + rest[1:].encode()


def revert_manifest(
    last_known_good_plan_id: str,
    applied_plan_id: str,
    holder: str,
    epoch: int,
    sequence: int,
) -> dict[str, Any]:
    """Mode `revert_lkg`: the agent puts its own last-known-good file set back (no files
    sent; docs/contracts.md). Fenced like any apply: the pod must still have
    `applied_plan_id` applied."""
    return {
        "plan_id": last_known_good_plan_id,
        "checksum": "",
        "structure_digest": "",
        "token": {"holder": holder, "epoch": epoch, "sequence": sequence},
        "expected_previous_plan_id": applied_plan_id,
        "mode": "revert_lkg",
        "files": [],
        "runtime_operations": [],
    }

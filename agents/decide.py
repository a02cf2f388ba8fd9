"""Decisions of an apply: fencing, runtime-only or reload, runtime commands and their checks.

Pure functions over plain values; the agent core feeds them what it read from disk and
HAProxy and acts on the answer.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from agents.haproxy_text import ServerState
from agents.manifest import Manifest, MapOp, RuntimeOp, SetServer, Token

RUNTIME_KINDS = ("config", "map")


@dataclass(frozen=True)
class Current:
    """What the agent knows about the pod when an apply arrives."""

    applied_plan_id: str | None
    applied_checksum: str | None
    applied_token: Token | None
    files: dict[str, tuple[str, str]]  # path -> (kind, sha256) of the applied set
    running_structure_digest: str | None  # of the config the worker was started with
    worker_alive: bool
    pending_reload: bool
    violation: bool
    # No applied, running, worker-operation or last-known-good plan, no applied token and
    # no violation (ADR-0033's bootstrap pod; `Agent.is_bootstrap` decides it).
    bootstrap: bool = False


class Action(enum.StrEnum):
    """What an apply does: nothing, runtime API only, changed files only (nothing the worker
    must be told), a reload, or a reload of last-known-good."""

    NOOP = "noop"
    RUNTIME = "runtime"
    FILE_ONLY = "file-only"
    RELOAD = "reload"
    REVERT = "revert"


@dataclass(frozen=True)
class Decision:
    action: Action
    why: str


def fence(current: Current, manifest: Manifest) -> str | None:
    """The 409 reason refusing this manifest, or None. Checked before anything is written."""
    applied = current.applied_token
    if (
        applied == manifest.token
        and manifest.plan_id == current.applied_plan_id
        and manifest.checksum == current.applied_checksum
    ):
        return None  # a retry of the apply that already succeeded
    if applied is not None:
        if manifest.token.epoch < applied.epoch:
            return "stale_epoch"
        if manifest.token.epoch == applied.epoch and manifest.token.sequence < applied.sequence:
            return "stale_sequence"
    if manifest.expect_bootstrap and not current.bootstrap:
        return "not_bootstrap"
    if manifest.expected_previous_plan_id != current.applied_plan_id:
        return "unexpected_previous_plan"
    return None


def changed_paths(current: Current, manifest: Manifest) -> list[str]:
    new = manifest.identities()
    paths = set(new) | set(current.files)
    return sorted(
        p
        for p in paths
        if p not in new or p not in current.files or current.files[p][1] != new[p].sha256
    )


def choose_action(current: Current, manifest: Manifest) -> Decision:
    """Runtime-only when the worker's structure equals the plan's and only config/map bytes
    changed: file-only when the manifest carries no runtime operation (nothing to tell the
    worker; the read-back still proves it), else runtime. Otherwise a reload. Anything
    doubtful (violation, dead worker) reloads."""
    if manifest.mode == "revert_lkg":
        return Decision(Action.REVERT, "revert_lkg requested")
    if manifest.mode == "reload":
        return Decision(Action.RELOAD, "reload requested")
    if current.violation:
        return Decision(Action.RELOAD, "invariant violation present: full apply repairs it")
    if not current.worker_alive:
        return Decision(Action.RELOAD, "no live worker")
    if current.running_structure_digest is None:
        return Decision(Action.RELOAD, "worker runs the bootstrap configuration")
    if current.pending_reload:
        return Decision(Action.RELOAD, "a reload is already pending")
    if (
        manifest.plan_id == current.applied_plan_id
        and manifest.checksum == current.applied_checksum
    ):
        return Decision(Action.NOOP, "plan already applied")
    if manifest.structure_digest != current.running_structure_digest:
        return Decision(Action.RELOAD, "structure digest differs from the running worker's")
    new = manifest.identities()
    if set(new) != set(current.files):
        return Decision(Action.RELOAD, "file set changed")
    for path in changed_paths(current, manifest):
        if new[path].kind not in RUNTIME_KINDS:
            return Decision(Action.RELOAD, f"{path} ({new[path].kind}) changed")
    if not manifest.runtime_operations:
        return Decision(Action.FILE_ONLY, "same structure, only bytes the worker already matches")
    return Decision(Action.RUNTIME, "same structure, only config/map bytes changed")


def cli_escape(word: str) -> str:
    """One runtime-API argument: backslash, space and `;` escaped as HAProxy's CLI reads them."""
    return word.replace("\\", "\\\\").replace(" ", "\\ ").replace(";", "\\;")


def runtime_commands(ops: tuple[RuntimeOp, ...], maps: dict[str, dict[str, str]]) -> list[str]:
    """Runtime API commands for `ops`. `maps` is the runtime content of every map touched
    (used to pick `set map` for an existing key, `add map` for a new one); it is updated."""
    commands: list[str] = []
    for op in ops:
        if isinstance(op, SetServer):
            target = f"{op.backend}/{op.server}"
            if op.address is not None:
                port = f" port {op.port}" if op.port is not None else ""
                commands.append(f"set server {target} addr {op.address}{port}")
            if op.weight is not None:
                commands.append(f"set server {target} weight {op.weight}")
            if op.state is not None:
                commands.append(f"set server {target} state {op.state}")
        elif isinstance(op, MapOp):
            entries = maps.setdefault(op.map, {})
            if op.op == "map_set":
                verb = "set" if op.key in entries else "add"
                key, value = cli_escape(op.key), cli_escape(op.value or "")
                commands.append(f"{verb} map {op.map} {key} {value}")
                entries[op.key] = op.value or ""
            elif op.key in entries:
                commands.append(f"del map {op.map} {cli_escape(op.key)}")
                del entries[op.key]
    return commands


def expected_servers(ops: tuple[RuntimeOp, ...]) -> dict[tuple[str, str], dict[str, object]]:
    """The final value of every server attribute the operations set (later ops win)."""
    want: dict[tuple[str, str], dict[str, object]] = {}
    for op in ops:
        if isinstance(op, SetServer):
            slot = want.setdefault((op.backend, op.server), {})
            if op.address is not None:
                slot["address"] = op.address
                if op.port is not None:
                    slot["port"] = op.port
            if op.weight is not None:
                slot["weight"] = op.weight
            if op.state is not None:
                slot["state"] = op.state
    return want


def server_problems(
    want: dict[tuple[str, str], dict[str, object]],
    seen: dict[tuple[str, str], ServerState],
) -> list[str]:
    """Differences between what was asked and what the worker reports."""
    problems = []
    for key, attrs in sorted(want.items()):
        state = seen.get(key)
        if state is None:
            problems.append(f"server {key[0]}/{key[1]} not found in the worker")
            continue
        actual = {
            "address": state.address,
            "port": state.port,
            "weight": state.weight,
            "state": state.state,
        }
        for attr, value in sorted(attrs.items()):
            if actual[attr] != value:
                problems.append(
                    f"server {key[0]}/{key[1]} {attr} is {actual[attr]!r}, expected {value!r}"
                )
    return problems


def map_problems(want: dict[str, dict[str, str]], seen: dict[str, dict[str, str]]) -> list[str]:
    problems = []
    for path, entries in sorted(want.items()):
        actual = seen.get(path, {})
        if actual != entries:
            missing = sorted(set(entries) - set(actual))[:3]
            extra = sorted(set(actual) - set(entries))[:3]
            differ = sorted(k for k in entries if k in actual and actual[k] != entries[k])[:3]
            problems.append(
                f"map {path} differs from its file (missing {missing}, extra {extra}, "
                f"different {differ})"
            )
    return problems

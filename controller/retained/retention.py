"""Checkpoint retention and garbage collection (ADR-0033, "Checkpoint publication").

Keep the newest checkpoint, its predecessor, and older checkpoints whose checksums still
appear in pod deployment status. Garbage collection follows pointer promotion and removes
only unreferenced checkpoints of this template UID; shared children go only when no
remaining checkpoint references them, never while any checkpoint's references are
uncommitted, and deletion candidates come from the verification list.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from controller.retained.selection import CheckpointPointer


@dataclass(frozen=True)
class CheckpointRecord:
    name: str
    uid: str
    checksum: str
    template_uid: str
    shared_children: frozenset[str] = frozenset()
    committed: bool = True  # False while its references are still being written


@dataclass(frozen=True)
class ChildRecord:
    """A shared auxiliary child as listed by the verification read."""

    kind: str
    name: str
    uid: str
    resource_version: str
    template_uid: str


def promote_pointer(
    pointers: Sequence[CheckpointPointer], new: CheckpointPointer
) -> list[CheckpointPointer]:
    """The new status.retainedConfigs after publishing `new`: newest first, no duplicates.
    Identical output reuses its address, so promoting it again changes nothing."""
    rest = [p for p in pointers if p.name != new.name]
    return [new, *rest]


def retained_names(pointers: Sequence[CheckpointPointer], pod_checksums: Iterable[str]) -> set[str]:
    """Names to keep: newest, predecessor, and any whose checksum a pod still reports."""
    reported = set(pod_checksums)
    keep = {p.name for p in pointers[:2]}
    keep |= {p.name for p in pointers if p.checksum in reported}
    return keep


def prune_pointers(
    pointers: Sequence[CheckpointPointer], pod_checksums: Iterable[str]
) -> list[CheckpointPointer]:
    keep = retained_names(pointers, pod_checksums)
    return [p for p in pointers if p.name in keep]


def checkpoint_deletions(
    records: Iterable[CheckpointRecord], keep: set[str], template_uid: str
) -> list[CheckpointRecord]:
    """Checkpoints to delete: this template's, not kept. Foreign ones are never touched."""
    return sorted(
        (r for r in records if r.template_uid == template_uid and r.name not in keep),
        key=lambda r: r.name,
    )


def shared_child_deletions(
    verification_list: Iterable[ChildRecord],
    remaining: Iterable[CheckpointRecord],
    template_uid: str,
) -> list[ChildRecord]:
    """Shared children no remaining checkpoint references, from the verification list taken
    before the references were read (a child created after it is judged next time). Nothing
    while any remaining checkpoint's references are uncommitted."""
    remaining = list(remaining)
    if any(not r.committed for r in remaining):
        return []
    referenced = set().union(*(r.shared_children for r in remaining)) if remaining else set()
    return sorted(
        (
            c
            for c in verification_list
            if c.template_uid == template_uid and c.name not in referenced
        ),
        key=lambda c: (c.kind, c.name),
    )

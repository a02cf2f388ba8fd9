"""Recovery decisions (ADR-0033, "Recovery and agreement"): select only the checkpoint the
durable deployment intent names, require unanimous fleet agreement, target bootstrap pods.

`evaluate_recovery` evaluates every check rather than stopping at the first failure, so a
manual recovery review can show each verdict per check and per pod.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from controller.retained.fleet import FileDigest, PodReport
from controller.retained.intent import DeploymentIntent
from controller.retained.receipts import PodReceipt


@dataclass(frozen=True)
class CheckpointPointer:
    """One entry of the ordinary HAProxyCfg's status.retainedConfigs (newest first)."""

    name: str
    uid: str
    checksum: str


@dataclass(frozen=True)
class CheckpointSnapshot:
    """A checkpoint as collected and verified from Kubernetes.

    `files` is the complete output (main config, auxiliary files, certificates) by path.
    `integrity_error` is set when any ownership, identity or digest check failed; such a
    checkpoint is never repaired, only refused.
    """

    name: str
    uid: str
    checksum: str
    plan_id: str
    files: Mapping[str, FileDigest] = field(default_factory=dict)
    receipt: PodReceipt | None = None
    integrity_error: str | None = None


@dataclass(frozen=True)
class Check:
    name: str
    passed: bool
    detail: str
    pod: str = ""


@dataclass(frozen=True)
class RecoveryVerdict:
    eligible: bool
    reason: str
    checkpoint: CheckpointSnapshot | None
    targets: tuple[str, ...]
    checks: tuple[Check, ...]

    @property
    def nothing_to_recover(self) -> bool:
        """Every check passed but one: no pod is bootstrap (every pod is configured and
        agrees with the checkpoint the intent names)."""
        failed = [c.name for c in self.checks if not c.passed]
        return failed == ["bootstrap-targets"]


def select_checkpoint(
    intent: DeploymentIntent | None,
    pointers: Sequence[CheckpointPointer],
    snapshots: Mapping[str, CheckpointSnapshot],
) -> CheckpointSnapshot | None:
    """The checkpoint matching the intent, whatever the pointer order. Publication order
    alone is insufficient: an older acknowledgement can arrive after a newer one."""
    if intent is None:
        return None
    for pointer in pointers:
        if pointer.checksum != intent.checksum:
            continue
        snapshot = snapshots.get(pointer.name)
        if snapshot is None or snapshot.uid != pointer.uid:
            continue
        if snapshot.integrity_error is not None:
            # The intended checkpoint exists but fails verification: select it so the
            # integrity check reports the corruption (it is refused, never repaired).
            return snapshot
        if snapshot.checksum == intent.checksum and snapshot.plan_id == intent.plan_id:
            return snapshot
    return None


def pod_agrees(report: PodReport, checkpoint: CheckpointSnapshot) -> str | None:
    """Why a configured pod does not agree with the checkpoint, or None when it does.

    It must report the selected plan, current worker evidence (no pending reload, the worker
    took the plan by reload or runtime operations) and its complete file digest/size set.
    """
    if report.invariant_violation:
        return f"invariant violation: {report.invariant_violation}"
    if report.applied_plan_id != checkpoint.plan_id:
        return f"runs plan {report.applied_plan_id}, not {checkpoint.plan_id}"
    if report.applied_checksum is not None and report.applied_checksum != checkpoint.checksum:
        return f"checksum {report.applied_checksum} differs from {checkpoint.checksum}"
    if report.pending_reload:
        return "a reload is pending"
    if checkpoint.plan_id not in (report.running_plan_id, report.worker_operation_plan_id):
        return "the worker has not confirmed the plan"
    if dict(report.files) != dict(checkpoint.files):
        missing = sorted(set(checkpoint.files) - set(report.files))
        extra = sorted(set(report.files) - set(checkpoint.files))
        changed = sorted(
            p
            for p in set(report.files) & set(checkpoint.files)
            if report.files[p] != checkpoint.files[p]
        )
        return f"file set differs (missing {missing}, extra {extra}, changed {changed})"
    return None


class _Checks:
    """The verdict's checks in the order they were made."""

    def __init__(self) -> None:
        self.items: list[Check] = []

    def __call__(self, name: str, passed: bool, detail: str, pod: str = "") -> bool:
        self.items.append(Check(name=name, passed=passed, detail=detail, pod=pod))
        return passed


def evaluate_recovery(
    intent: DeploymentIntent | None,
    pointers: Sequence[CheckpointPointer],
    snapshots: Mapping[str, CheckpointSnapshot],
    fleet: Sequence[PodReport],
) -> RecoveryVerdict:
    check = _Checks()
    selected = _check_checkpoint(check, intent, pointers, snapshots)
    check("fleet-discovered", bool(fleet), f"{len(fleet)} HAProxy pods discovered")
    targets = [
        report.pod_name
        for report in sorted(fleet, key=lambda r: r.pod_name)
        if _check_pod(check, report, selected)
    ]
    check(
        "bootstrap-targets",
        bool(targets),
        f"{len(targets)} bootstrap pods to recover" if targets else "no bootstrap pod",
    )
    failed = [c for c in check.items if not c.passed]
    reason = (
        "eligible"
        if not failed
        else "; ".join(f"{c.name}{'[' + c.pod + ']' if c.pod else ''}: {c.detail}" for c in failed)
    )
    return RecoveryVerdict(
        eligible=not failed,
        reason=reason,
        checkpoint=selected,
        targets=tuple(targets) if not failed else (),
        checks=tuple(check.items),
    )


def _check_checkpoint(
    check: _Checks,
    intent: DeploymentIntent | None,
    pointers: Sequence[CheckpointPointer],
    snapshots: Mapping[str, CheckpointSnapshot],
) -> CheckpointSnapshot | None:
    """The intent, the checkpoint that holds it, its integrity and its worker receipt."""
    check(
        "deployment-intent",
        intent is not None,
        f"intent names plan {intent.plan_id} ({intent.checksum})" if intent else "no intent",
    )
    selected = select_checkpoint(intent, pointers, snapshots)
    if intent is not None:
        check(
            "checkpoint-matches-intent",
            selected is not None,
            f"checkpoint {selected.name}"
            if selected
            else "no complete acknowledged checkpoint holds the intended plan; older "
            "checkpoints are refused",
        )
    if selected is not None:
        check(
            "checkpoint-integrity",
            selected.integrity_error is None,
            selected.integrity_error or "owners, identities and digests verified",
        )
        receipt = selected.receipt
        receipt_ok = (
            receipt is not None
            and receipt.is_complete()
            and receipt.applied_plan_id == selected.plan_id
            and receipt.checksum == selected.checksum
        )
        check(
            "worker-receipt",
            receipt_ok,
            f"pod {receipt.pod_name} ({receipt.pod_uid}) loaded it"
            if receipt_ok and receipt
            else "checkpoint has no complete worker receipt for its plan",
        )
    return selected


def _check_pod(check: _Checks, report: PodReport, selected: CheckpointSnapshot | None) -> bool:
    """One pod's checks; True when it is a bootstrap pod to recover."""
    pod = report.pod_name
    if not check(
        "pod-reachable",
        report.reachable,
        "agent answered" if report.reachable else "agent unreachable",
        pod,
    ):
        return False
    if not check(
        "pod-verified",
        report.verified,
        "state re-verified" if report.verified else "worker state not verifiable",
        pod,
    ):
        return False
    if report.is_bootstrap:
        return check("pod-state", True, "bootstrap pod: recovery target", pod)
    if selected is None or selected.integrity_error is not None:
        check("pod-state", False, "configured pod, no verified checkpoint to compare", pod)
        return False
    disagreement = pod_agrees(report, selected)
    check(
        "pod-state",
        disagreement is None,
        disagreement or f"configured pod agrees with plan {selected.plan_id}",
        pod,
    )
    return False

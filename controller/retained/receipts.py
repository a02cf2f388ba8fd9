"""Pod receipts: when a deployment counts as acknowledged by a pod (ADR-0033).

A receipt names the pod UID, the agent runtime, the content checksum, the applied plan, the
running worker plan, the worker-operation plan and the apply mode. A scheduled reload is not
an acknowledgement; a runtime update is confirmed by the worker-operation plan while the
worker's last reload plan may still be older. The mode says which way the pod took the plan
(contract.APPLY_MODES): reload, runtime, or file-only (files written, nothing the worker had
to be told), as the agent reports it. It also names the term (holder and epoch) whose
fencing token applied the pod's current plan, as the agent recorded it, so the history says
who deployed what; receipts written before carry none (`holder` "", `epoch` None).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from contract import APPLY_MODES, FILE_ONLY, RELOAD, RUNTIME
from controller.retained.fleet import PodReport


@dataclass(frozen=True)
class PodReceipt:
    pod_name: str
    pod_uid: str
    runtime_id: str
    checksum: str
    applied_plan_id: str
    running_plan_id: str
    worker_operation_plan_id: str
    mode: str  # "reload" when a worker started from this plan, else "runtime" | "file-only"
    holder: str = ""  # the applying term's holder identity ("" when not known)
    epoch: int | None = None  # the applying term's fencing epoch

    def as_status(self) -> dict[str, Any]:
        """The camelCase entry of HAProxyCfg status.deployedToPods."""
        data = asdict(self)
        entry = {
            "podName": data["pod_name"],
            "podUID": data["pod_uid"],
            "runtimeID": data["runtime_id"],
            "checksum": data["checksum"],
            "appliedPlanID": data["applied_plan_id"],
            "runningPlanID": data["running_plan_id"],
            "workerOpsPlanID": data["worker_operation_plan_id"],
            "mode": data["mode"],
        }
        if self.holder and self.epoch is not None:
            entry["term"] = {"holder": self.holder, "epoch": self.epoch}
        return entry

    @classmethod
    def from_status(cls, entry: dict[str, Any]) -> PodReceipt | None:
        """Parse a status entry; None when any field an acknowledgement needs is missing.
        The term is optional (receipts older than it have none)."""
        holder, epoch = term_of(entry)
        try:
            receipt = cls(
                pod_name=entry["podName"],
                pod_uid=entry["podUID"],
                runtime_id=entry["runtimeID"],
                checksum=entry["checksum"],
                applied_plan_id=entry["appliedPlanID"],
                running_plan_id=entry["runningPlanID"],
                worker_operation_plan_id=entry["workerOpsPlanID"],
                mode=entry["mode"],
                holder=holder,
                epoch=epoch,
            )
        except (KeyError, TypeError, AttributeError):
            return None
        return receipt if receipt.is_complete() else None

    def is_complete(self) -> bool:
        return (
            all(
                isinstance(v, str) and v
                for v in (
                    self.pod_name,
                    self.pod_uid,
                    self.runtime_id,
                    self.checksum,
                    self.applied_plan_id,
                    self.running_plan_id,
                    self.worker_operation_plan_id,
                    self.mode,
                )
            )
            and self.mode in APPLY_MODES
        )


def term_of(entry: Any) -> tuple[str, int | None]:
    """(holder, epoch) of a receipt entry's `term`; ("", None) when absent or unreadable."""
    term = entry.get("term") if isinstance(entry, dict) else None
    if not isinstance(term, dict):
        return "", None
    holder, epoch = term.get("holder"), term.get("epoch")
    if not isinstance(holder, str) or not holder or isinstance(epoch, bool):
        return "", None
    return (holder, epoch) if isinstance(epoch, int) else ("", None)


def acknowledgement(report: PodReport, plan_id: str, checksum: str) -> PodReceipt | None:
    """The receipt proving `report`'s pod runs (plan_id, checksum), or None.

    Refused: unreachable or unverified pods, a different applied plan or checksum, an
    invariant violation, a reload still pending (scheduled, not done), or a worker that has
    not confirmed the plan by a reload or by its runtime operations.
    """
    if not report.reachable or not report.verified or report.invariant_violation:
        return None
    if report.applied_plan_id != plan_id or report.applied_checksum != checksum:
        return None
    if report.pending_reload:
        return None
    if report.running_plan_id == plan_id:
        mode = RELOAD
    elif report.worker_operation_plan_id == plan_id:
        # An agent that does not name the mode (older than file-only) ran the runtime path.
        mode = FILE_ONLY if report.worker_operation_mode == FILE_ONLY else RUNTIME
    else:
        return None
    if not (report.pod_uid and report.runtime_id and report.running_plan_id):
        return None
    receipt = PodReceipt(
        pod_name=report.pod_name,
        pod_uid=report.pod_uid,
        runtime_id=report.runtime_id,
        checksum=checksum,
        applied_plan_id=plan_id,
        running_plan_id=report.running_plan_id,
        worker_operation_plan_id=report.worker_operation_plan_id or plan_id,
        mode=mode,
        holder=report.applied_holder or "",
        epoch=report.applied_epoch if report.applied_holder else None,
    )
    return receipt if receipt.is_complete() else None

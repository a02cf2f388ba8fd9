"""Queries shared by the REST API and the dashboard."""

from __future__ import annotations

from typing import Any

from django.db.models import F, OuterRef, QuerySet, Subquery

from checkpoints import warnings
from checkpoints.diff import FileVersion, file_diffs
from checkpoints.models import Checkpoint, DeploymentIntent, HubStatus, KubeEvent, PodReceipt
from controller.render.model import REASONS


def fleet() -> QuerySet[PodReceipt]:
    """Each pod's latest receipt among those its HAProxyCfg currently lists."""
    latest = (
        PodReceipt.objects.filter(current=True, pod_name=OuterRef("pod_name"))
        .order_by(F("deployed_at").desc(nulls_last=True), "-id")
        .values("id")[:1]
    )
    return (
        PodReceipt.objects.filter(current=True)
        .annotate(latest_id=Subquery(latest))
        .filter(id=F("latest_id"))
        .order_by("pod_name")
    )


def last_acknowledged(receipt: PodReceipt) -> PodReceipt | None:
    """What the pod of `receipt` runs: `receipt` when it acknowledges a plan, else the pod's
    newest receipt that did. A failed or refused apply names only the output it tried (its
    checksum) and the error; the agent keeps serving what it last acknowledged."""
    if receipt.applied_plan_id and not receipt.last_error:
        return receipt
    return (
        PodReceipt.objects.filter(pod_name=receipt.pod_name, pod_uid=receipt.pod_uid, last_error="")
        .exclude(applied_plan_id="")
        .order_by(F("deployed_at").desc(nulls_last=True), "-id")
        .first()
    )


def current_state(latest: PodReceipt, intent: DeploymentIntent | None) -> PodReceipt:
    """A pod's current state, the one the fleet page, the pod page and /api/v1/fleet/ show:
    `latest` (its newest listed receipt: the last attempt, a failure maybe) gains `runs`,
    what it still serves (`last_acknowledged`), and `matches_intent`, whether that is the
    intent's output (None without an intent)."""
    latest.runs = last_acknowledged(latest)
    latest.matches_intent = (
        None
        if intent is None
        else bool(
            latest.runs
            and latest.runs.applied_plan_id == intent.plan_id
            and latest.runs.checksum == intent.checksum
        )
    )
    return latest


def fleet_states() -> list[PodReceipt]:
    """Every pod of the fleet in its current state (`current_state`), by name."""
    intent = latest_intent()
    return [current_state(pod, intent) for pod in fleet()]


def pod_state(pod_name: str) -> PodReceipt | None:
    """One pod's current state (`current_state`), None when no HAProxyCfg lists it any more."""
    latest = fleet().filter(pod_name=pod_name).first()
    return current_state(latest, latest_intent()) if latest is not None else None


def latest_intent(template_uid: str | None = None) -> DeploymentIntent | None:
    """The most recently recorded deployment intent (of one template, when given)."""
    query = DeploymentIntent.objects.filter(source="retained-state")
    if template_uid:
        query = query.filter(template_uid=template_uid)
    intent = query.order_by(F("recorded_at").desc(nulls_last=True), "-id").first()
    if intent is None:
        # Only an earlier release's copy on the leader-election Lease.
        intent = DeploymentIntent.objects.order_by(
            F("recorded_at").desc(nulls_last=True), "-id"
        ).first()
    return intent


def versions(checkpoint: Checkpoint) -> list[FileVersion]:
    return [FileVersion(f.path, f.kind, f.checksum, f.content) for f in checkpoint.files.all()]


def checkpoint_diff(a: Checkpoint, b: Checkpoint) -> list[dict[str, Any]]:
    return file_diffs(versions(a), versions(b), label_a=a.name, label_b=b.name)


def checkpoint_of(plan_id: str, checksum: str) -> Checkpoint | None:
    """The mirrored checkpoint holding a plan's configuration, if any (newest first)."""
    if not plan_id:
        return None
    return (
        Checkpoint.objects.filter(plan_id=plan_id, checksum=checksum)
        .order_by("-created_at", "-id")
        .first()
    )


def render_summary() -> warnings.Summary:
    """The last render's warning summary, over every mirrored template config."""
    return warnings.merge_summaries(HubStatus.objects.values_list("render_warnings", flat=True))


def current_render_warnings(summary: warnings.Summary | None = None) -> QuerySet[KubeEvent]:
    """The mirrored warning Events of the last render (checkpoints/warnings.py says which)."""
    summary = summary or render_summary()
    fields = ("id", "involved_kind", "namespace", "involved_name", "reason", "message")
    rows = KubeEvent.objects.filter(type="Warning", reason__in=REASONS).values_list(
        *fields, "last_timestamp"
    )
    ids = warnings.current_ids(summary, [warnings.WarningEvent(*row) for row in rows])
    return KubeEvent.objects.filter(id__in=ids).order_by(
        "reason", "involved_kind", "namespace", "involved_name", "id"
    )

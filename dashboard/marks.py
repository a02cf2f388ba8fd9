"""The timeline's edge: mirrored rows in a window -> timeline marks (dashboard/timeline.py).

Every kind of mark comes from a record the mirror keeps; where no record of its own exists
the mark is derived (docs in the README's "Timeline" section):
- deployments per pod are the pod receipts of status.deployedToPods, one per distinct
  receipt, their kind from the receipt's mode and error (timeline.deployment_kind);
- recoveries are the manual recovery reviews plus the RetainedConfig* events of automatic
  recovery; render failures and hub promotions are the controller's Events.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db.models import Max, Min, Q, QuerySet
from django.urls import reverse
from django.utils.safestring import mark_safe

from checkpoints.models import (
    Checkpoint,
    DeploymentIntent,
    HubStatus,
    KubeEvent,
    LeadershipTerm,
    PodReceipt,
    RecoveryReview,
)
from dashboard import timeline as tl

# Past this many marks of one kind in a window, only the newest are drawn (the page says so).
LIMIT = 2000
# The tone of a finished review's mark; an unfinished one is "info".
REVIEW_TONES = {
    RecoveryReview.Status.SUCCEEDED: "ok",
    RecoveryReview.Status.FAILED: "error",
    RecoveryReview.Status.INELIGIBLE: "error",
    RecoveryReview.Status.REJECTED: "warn",
}


def record_url(kind: str, pk: int) -> str:
    return reverse("dashboard:record", kwargs={"kind": kind, "pk": pk})


def extent() -> tuple[datetime, datetime] | None:
    """The first and last instant of the recorded history, or None when nothing is."""
    bounds = [
        LeadershipTerm.objects.aggregate(a=Min("acquired_at"), b=Max("last_renew_at")),
        DeploymentIntent.objects.aggregate(a=Min("recorded_at"), b=Max("recorded_at")),
        PodReceipt.objects.aggregate(a=Min("deployed_at"), b=Max("deployed_at")),
        Checkpoint.objects.aggregate(a=Min("created_at"), b=Max("created_at")),
        RecoveryReview.objects.aggregate(a=Min("requested_at"), b=Max("requested_at")),
        KubeEvent.objects.filter(reason__in=tl.EVENT_MARKS).aggregate(
            a=Min("first_timestamp"), b=Max("last_timestamp")
        ),
    ]
    firsts = [b["a"] for b in bounds if b["a"] is not None]
    lasts = [b["b"] for b in bounds if b["b"] is not None]
    if not firsts or not lasts:
        return None
    return min(firsts), max(max(lasts), min(firsts))


def collect(window: tl.Window, now: datetime) -> tuple[list[tl.Mark], list[str], bool]:
    """The marks of `window`, the pod lanes to draw even when empty (pods of the fleet), and
    whether some kind had more than LIMIT marks in it (only its newest are drawn)."""
    kinds = [
        _terms(window, now),
        _intents(window),
        _receipts(window),
        _checkpoints(window),
        _reviews(window, now),
        _events(window),
        _hubs(window),
    ]
    pods = PodReceipt.objects.filter(current=True).values_list("pod_name", flat=True)
    return (
        [mark for kind in kinds for mark in kind],
        [tl.POD_LANE_PREFIX + p for p in sorted(set(pods))],
        any(len(kind) >= LIMIT for kind in kinds),
    )


def _terms(window: tl.Window, now: datetime) -> list[tl.Mark]:
    rows = LeadershipTerm.objects.filter(
        Q(acquired_at__lte=window.end),
        Q(ended_at__isnull=True) | Q(ended_at__gte=window.start),
    ).order_by("-acquired_at")[:LIMIT]
    marks = []
    for term in rows:
        if term.acquired_at is None:
            continue
        # An open term is drawn up to the last renewal the mirror saw, not to now.
        until = term.ended_at or term.last_renew_at or term.acquired_at
        state = "ended " + tl.iso(term.ended_at) if term.ended_at else "open"
        marks.append(
            tl.Mark(
                lane=tl.LEADERSHIP,
                at=term.acquired_at,
                until=max(until, term.acquired_at),
                label=f"term of {term.holder} at epoch {term.epoch}: "
                f"from {tl.iso(term.acquired_at)}, {state}",
                caption=f"epoch {term.epoch} · {term.holder}",  # the epoch survives a cut
                href=record_url("term", term.pk),
                tone="ok" if term.ended_at is None else "info",
                kind="term",
            )
        )
    return marks


def _newest_in(rows: QuerySet, field: str, window: tl.Window) -> QuerySet:
    """The rows whose `field` falls in the window, newest first, at most LIMIT of them."""
    in_window = {f"{field}__gte": window.start, f"{field}__lte": window.end}
    return rows.filter(**in_window).order_by(f"-{field}")[:LIMIT]


def _intents(window: tl.Window) -> list[tl.Mark]:
    rows = _newest_in(DeploymentIntent.objects, "recorded_at", window)
    return [
        tl.Mark(
            lane=tl.INTENTS,
            at=intent.recorded_at,
            label=f"intent recorded {tl.iso(intent.recorded_at)}: plan {intent.plan_id[:16]}, "
            f"{intent.checksum[:23]}, by {intent.holder} at epoch {intent.epoch}",
            href=record_url("intent", intent.pk),
            kind="intent",
        )
        for intent in rows
        if intent.recorded_at is not None
    ]


def _receipts(window: tl.Window) -> list[tl.Mark]:
    rows = _newest_in(PodReceipt.objects, "deployed_at", window)
    marks = []
    for receipt in rows:
        kind, tone = tl.deployment_kind(receipt.mode, receipt.last_error)
        what = f"error ({receipt.last_error[:200]})" if receipt.last_error else kind
        by = "" if receipt.last_error else f", by {receipt.applied_by}"
        marks.append(
            tl.Mark(
                lane=tl.POD_LANE_PREFIX + receipt.pod_name,
                at=receipt.deployed_at,
                label=f"{receipt.pod_name} {tl.iso(receipt.deployed_at)}: {what}, "
                f"plan {receipt.applied_plan_id[:16] or '-'}{by}",
                href=record_url("receipt", receipt.pk),
                tone=tone,
                kind=kind,
            )
        )
    return marks


def _checkpoints(window: tl.Window) -> list[tl.Mark]:
    rows = _newest_in(
        Checkpoint.objects.only("id", "name", "created_at", "plan_id", "collected", "promoted"),
        "created_at",
        window,
    )
    return [
        tl.Mark(
            lane=tl.CHECKPOINTS,
            at=c.created_at,
            label=f"checkpoint {c.name} published {tl.iso(c.created_at)}"
            + (" (collected since)" if c.collected else ""),
            href=reverse("dashboard:checkpoint", kwargs={"pk": c.pk}),
            tone="info" if c.collected else "ok",
            kind="checkpoint",
        )
        for c in rows
    ]


def _reviews(window: tl.Window, now: datetime) -> list[tl.Mark]:
    rows = RecoveryReview.objects.filter(requested_at__lte=window.end).filter(
        Q(finished_at__gte=window.start)
        | Q(finished_at__isnull=True, decided_at__gte=window.start)
        | Q(finished_at__isnull=True, decided_at__isnull=True, requested_at__gte=window.start)
        | Q(status__in=RecoveryReview.IN_FLIGHT)
    )
    marks = []
    for review in rows.order_by("-requested_at")[:LIMIT]:
        pending = review.status in RecoveryReview.IN_FLIGHT
        until = review.finished_at or review.decided_at or review.evaluated_at
        marks.append(
            tl.Mark(
                lane=tl.RECOVERIES,
                at=review.requested_at,
                until=max(now if pending else until or review.requested_at, review.requested_at),
                label=f"recovery review #{review.pk} ({review.status}), requested "
                f"{tl.iso(review.requested_at)}: {review.reason[:200]}",
                caption=f"review #{review.pk} {review.status}",
                href=reverse("dashboard:review", kwargs={"pk": review.pk}),
                tone=REVIEW_TONES.get(review.status, "info"),
                kind="review",
            )
        )
    return marks


def _events(window: tl.Window) -> list[tl.Mark]:
    rows = (
        KubeEvent.objects.filter(reason__in=tl.EVENT_MARKS)
        .filter(last_timestamp__gte=window.start)
        .filter(Q(first_timestamp__lte=window.end) | Q(first_timestamp__isnull=True))
        .order_by("-last_timestamp")[:LIMIT]
    )
    marks = []
    for event in rows:
        lane, tone = tl.EVENT_MARKS[event.reason]
        first = event.first_timestamp or event.last_timestamp
        # A deduplicated event seen several times spans its first to its last occurrence.
        repeated = event.count > 1 and first < event.last_timestamp - timedelta(seconds=1)
        marks.append(
            tl.Mark(
                lane=lane,
                at=first if repeated else event.last_timestamp,
                until=event.last_timestamp if repeated else None,
                label=f"{event.reason} x{event.count}, last {tl.iso(event.last_timestamp)}: "
                f"{event.message[:300]}",
                caption=f"{event.reason} x{event.count}",
                href=record_url("event", event.pk),
                tone=tone,
                kind=event.reason,
            )
        )
    return marks


def _hubs(window: tl.Window) -> list[tl.Mark]:
    rows = _newest_in(HubStatus.objects.exclude(active_identity=""), "last_updated", window)
    return [
        tl.Mark(
            lane=tl.HUB,
            at=hub.last_updated,
            label=f"{hub.template_name}: {hub.active_identity} published as Active "
            f"({hub.mode}) {tl.iso(hub.last_updated)}",
            href=record_url("hub", hub.pk),
            tone="ok",
            kind="active",
        )
        for hub in rows
    ]


def picture(window: tl.Window, now: datetime, width: float = 1200.0) -> dict[str, Any]:
    """The drawing of `window` as SVG markup, with what the page says about it."""
    found, pod_lanes, truncated = collect(window, now)
    drawing = tl.layout(
        found,
        window,
        width=width,
        lanes=list(tl.FIXED_LANES) + pod_lanes,
        zoom_url=reverse("dashboard:timeline"),
    )
    return {
        "svg": mark_safe(tl.svg(drawing)),  # every value in it is escaped by tl.svg
        "window": window,
        "start": tl.iso(window.start),
        "end": tl.iso(window.end),
        "marks": len(drawing.shapes),
        "records": len(found),
        "truncated": truncated,
        "limit": LIMIT,
    }


def default_picture(now: datetime) -> dict[str, Any]:
    """The picture the timeline opens on: the recorded history's last day of activity."""
    return picture(tl.choose_window(None, None, extent(), now), now)

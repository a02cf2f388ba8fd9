"""The timeline page, its strip on the fleet page, and the record page its marks link to."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from django.db import models
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.urls import NoReverseMatch, reverse

from checkpoints.models import DeploymentIntent, HubStatus, KubeEvent, LeadershipTerm, PodReceipt
from dashboard import marks
from dashboard import timeline as tl
from dashboard.views import ViewerRequired

# The kinds of record a mark links to that have no dashboard page of their own.
RECORDS: dict[str, type[models.Model]] = {
    "term": LeadershipTerm,
    "intent": DeploymentIntent,
    "receipt": PodReceipt,
    "event": KubeEvent,
    "hub": HubStatus,
}
# Instants each record is placed at on the timeline ("show on the timeline").
RECORD_TIMES = {
    "term": "acquired_at",
    "intent": "recorded_at",
    "receipt": "deployed_at",
    "event": "last_timestamp",
    "hub": "last_updated",
}
PRESETS = (("15 min", 15), ("1 h", 60), ("6 h", 360), ("24 h", 1440), ("7 d", 10080))


class TimelineView(ViewerRequired):
    template_name = "dashboard/timeline.html"
    fragment_template_name = "dashboard/_timeline.html"

    def get(self, request: HttpRequest) -> HttpResponse:
        now = datetime.now(UTC)
        start, end = request.GET.get("start"), request.GET.get("end")
        window = tl.choose_window(start, end, marks.extent(), now)
        context = marks.picture(window, now)
        base = reverse("dashboard:timeline")
        context.update(
            {
                # Without an explicit end the page follows the history as it grows.
                "following": not tl.parse_time(end),
                "invalid": any(raw and not tl.parse_time(raw) for raw in (start, end)),
                "zoom_in": f"{base}?{window.zoom(0.5).query()}",
                "zoom_out": f"{base}?{window.zoom(2).query()}",
                "earlier": f"{base}?{window.pan(-0.5).query()}",
                "later": f"{base}?{window.pan(0.5).query()}",
                "presets": [
                    (name, f"{base}?{tl.Window(now - timedelta(minutes=m), now).query()}")
                    for name, m in PRESETS
                ],
                "query": request.GET.urlencode(),
            }
        )
        return self.render(request, context)


class RecordView(ViewerRequired):
    """Every field of one mirrored record (a mark's target when it has no page of its own)."""

    template_name = "dashboard/record.html"

    def get(self, request: HttpRequest, kind: str, pk: int) -> HttpResponse:
        model = RECORDS.get(kind)
        if model is None:
            raise Http404("no such kind of record")
        record = get_object_or_404(model, pk=pk)
        fields = []
        for f in model._meta.concrete_fields:
            value = getattr(record, f.attname)
            block = isinstance(value, dict | list) or "\n" in str(value)
            if isinstance(value, dict | list):
                value = json.dumps(value, indent=2, sort_keys=True)
            elif isinstance(value, datetime):
                value = value.astimezone(UTC).isoformat()  # exact, unlike the page's dates
            fields.append((f.verbose_name, value, block))
        if isinstance(record, PodReceipt) and not record.last_error:
            fields.append(("applied by", record.applied_by, False))  # "unknown" when old
        at = getattr(record, RECORD_TIMES[kind])
        around = (
            reverse("dashboard:timeline")
            + "?"
            + tl.Window(at - timedelta(minutes=5), at + timedelta(minutes=5)).query()
            if at
            else ""
        )
        admin = ""
        if request.user.is_staff:
            try:
                meta = model._meta
                admin = reverse(f"admin:{meta.app_label}_{meta.model_name}_change", args=[pk])
            except NoReverseMatch:
                admin = ""
        context = {"kind": kind, "record": record, "fields": fields, "around": around}
        context["admin"] = admin
        return self.render(request, context)

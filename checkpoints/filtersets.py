"""django-filter filter sets shared by the REST API and the dashboard."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import django_filters
from django import forms
from django.db.models import Q, QuerySet

from checkpoints.models import (
    AuditLog,
    Checkpoint,
    DeploymentIntent,
    KubeEvent,
    LeadershipTerm,
    PodReceipt,
    RecoveryReview,
)

# RFC 3339 date-time, as OpenAPI's "date-time" format means it.
_RFC3339 = re.compile(
    r"(\d{4})-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])[Tt]([01]\d|2[0-3]):([0-5]\d):([0-5]\d|60)"
    r"(\.\d+)?([Zz]|[+-]([01]\d|2[0-3]):([0-5]\d))"
)


def rfc3339(raw: str) -> datetime | None:
    """The instant an RFC 3339 date-time names, in UTC, or None when `raw` is not one.

    Every such string is accepted: a leap second counts as the second before it, and an
    instant outside what Python holds (year 0, or 9999-12-31T23:59:59-23:59) is clamped to
    the nearest one it does, which filters the same.
    """
    match = _RFC3339.fullmatch(raw)
    if match is None:
        return None
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    fraction, zone = match.group(7), match.group(8).upper()
    micro = int((fraction[1:] + "000000")[:6]) if fraction else 0
    try:
        local = datetime(max(year, 1), month, day, hour, minute, min(second, 59), micro)
    except ValueError:
        return None  # a day the month does not have
    sign = 0 if zone == "Z" else (1 if zone[0] == "+" else -1)
    offset = timedelta(hours=int(match.group(9) or 0), minutes=int(match.group(10) or 0))
    try:
        return (local - sign * offset).replace(tzinfo=UTC)
    except OverflowError:
        return (datetime.min if sign > 0 else datetime.max).replace(tzinfo=UTC)


class UTCDateTimeField(forms.DateTimeField):
    """RFC 3339 (or any ISO 8601 Django reads) date-time normalised to UTC.

    Python accepts offsets PostgreSQL refuses (e.g. +19:43); converting first keeps a strange
    but valid query from turning into a database error.
    """

    def to_python(self, value: Any) -> datetime | None:
        if isinstance(value, str) and (instant := rfc3339(value.strip())) is not None:
            return instant
        result = django_filters.fields.IsoDateTimeField().to_python(value)
        if result is None:
            return None
        try:
            if result.tzinfo is None:
                result = result.replace(tzinfo=UTC)
            result = result.astimezone(UTC)
        except (OverflowError, ValueError) as exc:
            raise forms.ValidationError("date-time out of range") from exc
        return result


class UTCDateTimeFilter(django_filters.IsoDateTimeFilter):
    field_class = UTCDateTimeField


class CheckpointFilterSet(django_filters.FilterSet):
    template = django_filters.CharFilter(method="filter_template", label="Template name or UID")
    checksum = django_filters.CharFilter()
    plan_id = django_filters.CharFilter()
    created_after = UTCDateTimeFilter(field_name="created_at", lookup_expr="gte")
    created_before = UTCDateTimeFilter(field_name="created_at", lookup_expr="lte")
    collected = django_filters.BooleanFilter()
    promoted = django_filters.BooleanFilter()

    class Meta:
        model = Checkpoint
        fields = ["namespace", "template_uid", "template_name", "checksum", "plan_id"]

    def filter_template(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(Q(template_name=value) | Q(template_uid=value))


class DeploymentIntentFilterSet(django_filters.FilterSet):
    recorded_after = UTCDateTimeFilter(field_name="recorded_at", lookup_expr="gte")
    recorded_before = UTCDateTimeFilter(field_name="recorded_at", lookup_expr="lte")

    class Meta:
        model = DeploymentIntent
        fields = ["plan_id", "checksum", "holder", "epoch", "template_uid", "source"]


class PodReceiptFilterSet(django_filters.FilterSet):
    pod = django_filters.CharFilter(field_name="pod_name")
    plan = django_filters.CharFilter(field_name="applied_plan_id")
    deployed_after = UTCDateTimeFilter(field_name="deployed_at", lookup_expr="gte")
    deployed_before = UTCDateTimeFilter(field_name="deployed_at", lookup_expr="lte")
    current = django_filters.BooleanFilter()

    class Meta:
        model = PodReceipt
        # term_holder / term_epoch: the receipts a leader term applied.
        fields = ["pod_uid", "checksum", "mode", "source_name", "term_holder", "term_epoch"]


class LeadershipTermFilterSet(django_filters.FilterSet):
    open = django_filters.BooleanFilter(field_name="ended_at", lookup_expr="isnull", label="Open")

    class Meta:
        model = LeadershipTerm
        fields = ["holder", "epoch", "lease_name", "lease_namespace"]


class KubeEventFilterSet(django_filters.FilterSet):
    since = UTCDateTimeFilter(field_name="last_timestamp", lookup_expr="gte")

    class Meta:
        model = KubeEvent
        fields = ["reason", "type", "involved_kind", "involved_name", "namespace"]


class RenderWarningFilterSet(django_filters.FilterSet):
    kind = django_filters.CharFilter(field_name="involved_kind")

    class Meta:
        model = KubeEvent
        fields = ["reason", "kind", "namespace"]


class RecoveryReviewFilterSet(django_filters.FilterSet):
    class Meta:
        model = RecoveryReview
        fields = ["status"]


class AuditLogFilterSet(django_filters.FilterSet):
    since = UTCDateTimeFilter(field_name="at", lookup_expr="gte")

    class Meta:
        model = AuditLog
        fields = ["action", "object_type", "object_id", "actor_name"]

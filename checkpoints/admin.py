"""Django admin: every model browsable; mirrored data and the audit log read-only."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from checkpoints.models import (
    AuditLog,
    AuxiliaryObject,
    Checkpoint,
    CheckpointFile,
    DeploymentIntent,
    HubStatus,
    KubeEvent,
    LeadershipTerm,
    MirrorState,
    PodReceipt,
    RecoveryReview,
    RecoveryVerdict,
    TaskRun,
)


class NoWrites:
    """Rows written only by the mirror or by the review flow: nobody edits them here."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ReadOnlyAdmin(NoWrites, admin.ModelAdmin):
    pass


class ReadOnlyInline(NoWrites, admin.TabularInline):
    extra = 0
    can_delete = False


class CheckpointFileInline(ReadOnlyInline):
    model = CheckpointFile
    fields = ("kind", "path", "checksum", "object_name")
    readonly_fields = fields


@admin.register(Checkpoint)
class CheckpointAdmin(ReadOnlyAdmin):
    list_display = (
        "name",
        "template_name",
        "checksum",
        "plan_id",
        "created_at",
        "promoted",
        "collected",
        "collected_at",
    )
    list_filter = ("collected", "promoted", "template_name", "namespace")
    search_fields = ("name", "uid", "checksum", "plan_id", "template_uid")
    date_hierarchy = "created_at"
    inlines = [CheckpointFileInline]


@admin.register(CheckpointFile)
class CheckpointFileAdmin(ReadOnlyAdmin):
    list_display = ("path", "kind", "checksum", "checkpoint")
    list_filter = ("kind",)
    search_fields = ("path", "checksum", "checkpoint__name")
    list_select_related = ("checkpoint",)


@admin.register(AuxiliaryObject)
class AuxiliaryObjectAdmin(ReadOnlyAdmin):
    list_display = ("name", "kind", "path", "checksum", "collected")
    list_filter = ("kind", "collected")
    search_fields = ("name", "uid", "path", "checksum")


@admin.register(DeploymentIntent)
class DeploymentIntentAdmin(ReadOnlyAdmin):
    list_display = ("plan_id", "checksum", "holder", "epoch", "recorded_at", "source")
    list_filter = ("source", "lease_name")
    search_fields = ("plan_id", "checksum", "holder", "template_uid")
    date_hierarchy = "recorded_at"


@admin.register(PodReceipt)
class PodReceiptAdmin(ReadOnlyAdmin):
    list_display = (
        "pod_name",
        "applied_plan_id",
        "checksum",
        "mode",
        "deployed_at",
        "consecutive_errors",
        "current",
    )
    list_filter = ("mode", "current")
    search_fields = ("pod_name", "pod_uid", "applied_plan_id", "checksum")
    date_hierarchy = "deployed_at"


@admin.register(LeadershipTerm)
class LeadershipTermAdmin(ReadOnlyAdmin):
    list_display = ("holder", "epoch", "lease_name", "acquired_at", "last_renew_at", "ended_at")
    list_filter = ("lease_name",)
    search_fields = ("holder",)


@admin.register(KubeEvent)
class KubeEventAdmin(ReadOnlyAdmin):
    list_display = (
        "last_timestamp",
        "type",
        "reason",
        "involved_kind",
        "involved_name",
        "count",
        "message",
    )
    list_filter = ("type", "reason", "involved_kind")
    search_fields = ("reason", "message", "involved_name")


@admin.register(HubStatus)
class HubStatusAdmin(ReadOnlyAdmin):
    list_display = ("template_name", "mode", "active_identity", "endpoint", "last_updated")
    list_filter = ("mode",)
    search_fields = ("template_name", "active_identity")


@admin.register(MirrorState)
class MirrorStateAdmin(ReadOnlyAdmin):
    list_display = ("kind", "resource_version", "last_synced_at", "lag_seconds", "events_total")
    search_fields = ("kind",)


class RecoveryVerdictInline(ReadOnlyInline):
    model = RecoveryVerdict
    fields = ("check_name", "pod_name", "passed", "detail")
    readonly_fields = fields


@admin.register(RecoveryReview)
class RecoveryReviewAdmin(ReadOnlyAdmin):
    """Reviews change only through the audited flow (dashboard or API), never here."""

    list_display = ("id", "status", "requested_by", "requested_at", "decided_by", "expires_at")
    list_filter = ("status",)
    search_fields = ("reason", "requested_by__username")
    list_select_related = ("requested_by", "decided_by")
    inlines = [RecoveryVerdictInline]


@admin.register(RecoveryVerdict)
class RecoveryVerdictAdmin(ReadOnlyAdmin):
    list_display = ("review", "check_name", "pod_name", "passed")
    list_filter = ("passed", "check_name")
    search_fields = ("check_name", "pod_name", "detail")


@admin.register(AuditLog)
class AuditLogAdmin(ReadOnlyAdmin):
    """Read-only for everyone, superusers included (the model refuses changes as well)."""

    list_display = ("at", "actor_name", "action", "object_type", "object_id")
    list_filter = ("action", "object_type")
    search_fields = ("actor_name", "action", "object_id")
    date_hierarchy = "at"
    actions = None


@admin.register(TaskRun)
class TaskRunAdmin(ReadOnlyAdmin):
    list_display = ("started_at", "task_name", "status", "worker", "finished_at")
    list_filter = ("status", "task_name")
    search_fields = ("task_id", "task_name", "args")

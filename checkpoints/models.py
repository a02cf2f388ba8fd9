"""Models of the mirrored history: checkpoints, intents, receipts, terms, events, reviews.

Mirrored rows come from Kubernetes through checkpoints.mirror; the site never edits them.
History is append-only: objects Kubernetes deletes are marked collected, never removed, and
every distinct intent, receipt and term ever seen keeps its own row.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models


class MirroredModel(models.Model):
    """Fields every object mirrored from Kubernetes carries."""

    uid = models.CharField(max_length=64, unique=True)
    name = models.CharField(max_length=253)
    namespace = models.CharField(max_length=253, db_index=True)
    resource_version = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(null=True, blank=True, db_index=True)
    first_seen_at = models.DateTimeField(auto_now_add=True)
    last_seen_at = models.DateTimeField(auto_now=True)
    collected = models.BooleanField(default=False, db_index=True)
    collected_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True


class Checkpoint(MirroredModel):
    """One content-addressed checkpoint HAProxyCfg (ADR-0033), kept after Kubernetes drops it."""

    template_name = models.CharField(max_length=253, blank=True, db_index=True)
    template_uid = models.CharField(max_length=64, blank=True, db_index=True)
    checksum = models.CharField(max_length=80, db_index=True)
    plan_id = models.CharField(max_length=80, blank=True, db_index=True)
    path = models.CharField(max_length=1024, blank=True)
    # spec.content exactly as stored (base64 gzip when compressed); the decoded text is the
    # CheckpointFile of kind "config".
    content = models.TextField(blank=True)
    compressed = models.BooleanField(default=False)
    retained_plan_encoding = models.CharField(max_length=32, blank=True)
    retained_plan_data = models.TextField(blank=True)
    # Worker receipt: historical evidence that a pod loaded this output.
    receipt_pod_name = models.CharField(max_length=253, blank=True)
    receipt_pod_uid = models.CharField(max_length=64, blank=True)
    receipt_runtime_id = models.CharField(max_length=253, blank=True)
    receipt_checksum = models.CharField(max_length=80, blank=True)
    receipt_applied_plan_id = models.CharField(max_length=80, blank=True)
    receipt_running_plan_id = models.CharField(max_length=80, blank=True)
    receipt_worker_ops_plan_id = models.CharField(max_length=80, blank=True)
    receipt_mode = models.CharField(max_length=32, blank=True)
    receipt_acknowledged_at = models.DateTimeField(null=True, blank=True)
    # The term whose token applied it ("" / None: a receipt older than this record).
    receipt_term_holder = models.CharField(max_length=253, blank=True)
    receipt_term_epoch = models.BigIntegerField(null=True, blank=True)
    # Exact auxiliary references as written in spec.auxiliaryFiles.
    auxiliary_refs = models.JSONField(default=dict, blank=True)
    # Whether the ordinary HAProxyCfg's status.retainedConfigs last named this checkpoint.
    promoted = models.BooleanField(default=False)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            # The history is read newest first, page by page.
            models.Index(fields=["-created_at", "-id"], name="checkpoint_newest_first"),
            models.Index(fields=["template_uid", "-created_at"], name="checkpoint_template_newest"),
        ]

    def __str__(self) -> str:
        return self.name


class AuxiliaryObject(MirroredModel):
    """A mirrored map, general or crt-list child object; its bytes fill CheckpointFile rows."""

    kind = models.CharField(max_length=16, db_index=True)
    path = models.CharField(max_length=1024)
    checksum = models.CharField(max_length=80, db_index=True)
    content = models.TextField(blank=True)
    owner_uids = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["path", "-id"]

    def __str__(self) -> str:
        return f"{self.kind}:{self.name}"


class CheckpointFile(models.Model):
    KIND_CHOICES = [
        ("config", "config"),
        ("map", "map"),
        ("general", "general"),
        ("certificate", "certificate"),
        ("crt-list", "crt-list"),
    ]

    checkpoint = models.ForeignKey(Checkpoint, on_delete=models.PROTECT, related_name="files")
    kind = models.CharField(max_length=16, choices=KIND_CHOICES)
    path = models.CharField(max_length=1024)
    checksum = models.CharField(max_length=80)
    # Name and uid of the child object (or Secret) the checkpoint references.
    object_name = models.CharField(max_length=253, blank=True)
    object_uid = models.CharField(max_length=64, blank=True, db_index=True)
    # Null while the child's bytes have not been mirrored yet, and always for certificates:
    # private keys are never stored here, only their checksum.
    content = models.TextField(null=True, blank=True)

    class Meta:
        ordering = ["checkpoint_id", "path"]
        constraints = [
            models.UniqueConstraint(
                fields=["checkpoint", "path"], name="checkpointfile_unique_path"
            )
        ]

    def __str__(self) -> str:
        return self.path


class DeploymentIntent(models.Model):
    """One distinct deployment intent ever seen on a Lease annotation."""

    fingerprint = models.CharField(max_length=64, unique=True)
    lease_name = models.CharField(max_length=253)
    lease_namespace = models.CharField(max_length=253)
    lease_resource_version = models.CharField(max_length=64, blank=True)
    # "retained-state" or "leader-election" (the place an earlier release kept it).
    source = models.CharField(max_length=32, default="retained-state")
    plan_id = models.CharField(max_length=80, db_index=True)
    checksum = models.CharField(max_length=80, db_index=True)
    holder = models.CharField(max_length=253, blank=True)
    epoch = models.BigIntegerField(null=True, blank=True)
    template_uid = models.CharField(max_length=64, blank=True, db_index=True)
    recorded_at = models.DateTimeField(null=True, blank=True, db_index=True)
    claim = models.JSONField(default=dict, blank=True)
    first_seen_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-recorded_at", "-id"]

    def __str__(self) -> str:
        return f"{self.plan_id[:12]} @ epoch {self.epoch}"


class PodReceipt(models.Model):
    """One distinct per-pod deployment receipt from an HAProxyCfg's status.deployedToPods."""

    fingerprint = models.CharField(max_length=64, unique=True)
    pod_name = models.CharField(max_length=253, db_index=True)
    pod_uid = models.CharField(max_length=64, blank=True, db_index=True)
    runtime_id = models.CharField(max_length=253, blank=True)
    checksum = models.CharField(max_length=80, blank=True, db_index=True)
    applied_plan_id = models.CharField(max_length=80, blank=True, db_index=True)
    running_plan_id = models.CharField(max_length=80, blank=True)
    worker_ops_plan_id = models.CharField(max_length=80, blank=True)
    mode = models.CharField(max_length=32, blank=True)
    last_error = models.TextField(blank=True)
    consecutive_errors = models.IntegerField(default=0)
    deployed_at = models.DateTimeField(null=True, blank=True, db_index=True)
    # The leader term whose fencing token applied the pod's plan: who deployed it. Empty
    # (holder "", epoch None) for receipts published before receipts carried it.
    term_holder = models.CharField(max_length=253, blank=True, db_index=True)
    term_epoch = models.BigIntegerField(null=True, blank=True, db_index=True)
    # Where the pod's agent answered when the leader published this receipt: the pod page
    # reads its unauthenticated /healthz live from here (docs/dashboard.md). Empty before.
    pod_ip = models.CharField(max_length=64, blank=True)
    agent_port = models.IntegerField(null=True, blank=True)
    source_name = models.CharField(max_length=253)
    source_uid = models.CharField(max_length=64, db_index=True)
    source_namespace = models.CharField(max_length=253)
    # True while the source's latest status still lists this exact receipt.
    current = models.BooleanField(default=True, db_index=True)
    first_seen_at = models.DateTimeField(auto_now_add=True)
    last_seen_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-deployed_at", "-id"]

    def __str__(self) -> str:
        return f"{self.pod_name} {self.applied_plan_id[:12]}"

    @property
    def applied_by(self) -> str:
        """Who deployed it, as the pages say it: "holder at epoch N", or "unknown"."""
        return term_label(self.term_holder, self.term_epoch)


def term_label(holder: str, epoch: int | None) -> str:
    return f"{holder} at epoch {epoch}" if holder and epoch is not None else "unknown"


class LeadershipTerm(models.Model):
    """One leadership term: a holder at a fencing epoch on the leader-election Lease."""

    lease_name = models.CharField(max_length=253)
    lease_namespace = models.CharField(max_length=253)
    lease_uid = models.CharField(max_length=64, blank=True)
    holder = models.CharField(max_length=253)
    epoch = models.BigIntegerField(null=True, blank=True)
    acquired_at = models.DateTimeField(null=True, blank=True, db_index=True)
    last_renew_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    first_seen_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-acquired_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["lease_namespace", "lease_name", "lease_uid", "holder", "epoch"],
                name="leadershipterm_unique_term",
            )
        ]

    def __str__(self) -> str:
        return f"{self.holder} epoch {self.epoch}"


class KubeEvent(models.Model):
    uid = models.CharField(max_length=64, unique=True)
    namespace = models.CharField(max_length=253)
    name = models.CharField(max_length=253)
    resource_version = models.CharField(max_length=64, blank=True)
    involved_kind = models.CharField(max_length=64, blank=True, db_index=True)
    involved_name = models.CharField(max_length=253, blank=True, db_index=True)
    involved_uid = models.CharField(max_length=64, blank=True)
    reason = models.CharField(max_length=128, blank=True, db_index=True)
    type = models.CharField(max_length=32, blank=True, db_index=True)
    message = models.TextField(blank=True)
    count = models.IntegerField(default=1)
    first_timestamp = models.DateTimeField(null=True, blank=True)
    last_timestamp = models.DateTimeField(null=True, blank=True, db_index=True)
    first_seen_at = models.DateTimeField(auto_now_add=True)
    collected = models.BooleanField(default=False)
    collected_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-last_timestamp", "-id"]

    def __str__(self) -> str:
        return f"{self.reason} {self.involved_kind}/{self.involved_name}"


class HubStatus(models.Model):
    """Cross-cluster Active/Standby state, from a HAProxyTemplateConfig and the leader Lease."""

    template_uid = models.CharField(max_length=64, unique=True)
    template_name = models.CharField(max_length=253)
    namespace = models.CharField(max_length=253)
    mode = models.CharField(max_length=32, default="standalone")
    active_identity = models.CharField(max_length=253, blank=True)
    endpoint = models.CharField(max_length=1024, blank=True)
    last_updated = models.DateTimeField(null=True, blank=True)
    lease_renew_time = models.DateTimeField(null=True, blank=True)
    # status.renderWarnings as the leader last wrote it: count, per reason, first ten.
    render_warnings = models.JSONField(default=dict, blank=True)
    observed_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["template_name"]
        verbose_name_plural = "hub status"

    def __str__(self) -> str:
        return f"{self.template_name}: {self.mode}"


class MirrorState(models.Model):
    """Where the mirror is for one watched kind, and how far behind it ran."""

    kind = models.CharField(max_length=64, unique=True)
    resource_version = models.CharField(max_length=64, blank=True)
    last_event_at = models.DateTimeField(null=True, blank=True)
    last_synced_at = models.DateTimeField(null=True, blank=True)
    last_relist_at = models.DateTimeField(null=True, blank=True)
    lag_seconds = models.FloatField(default=0.0)
    events_total = models.BigIntegerField(default=0)
    relists_total = models.BigIntegerField(default=0)
    # The current error only: both are cleared once a retry lists or watches again.
    last_error = models.TextField(blank=True)
    last_error_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["kind"]

    def __str__(self) -> str:
        return self.kind


class RecoveryReview(models.Model):
    """A manual recovery review: an operator's request, the leader's dry run, the decision."""

    class Status(models.TextChoices):
        REQUESTED = "requested"
        EVALUATING = "evaluating"
        ELIGIBLE = "eligible"
        INELIGIBLE = "ineligible"
        APPROVED = "approved"
        REJECTED = "rejected"
        EXPIRED = "expired"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    # The leader still works on it (or is about to): its timeline bar runs up to now.
    IN_FLIGHT = frozenset({Status.REQUESTED, Status.EVALUATING, Status.APPROVED, Status.RUNNING})
    # The dry run has answered: a decision waits or the review is over.
    ANSWERED = frozenset(
        {
            Status.ELIGIBLE,
            Status.INELIGIBLE,
            Status.APPROVED,
            Status.REJECTED,
            Status.EXPIRED,
            Status.SUCCEEDED,
            Status.FAILED,
        }
    )

    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="recovery_reviews"
    )
    requested_at = models.DateTimeField(auto_now_add=True, db_index=True)
    reason = models.TextField()
    status = models.CharField(
        max_length=16, choices=Status.choices, default=Status.REQUESTED, db_index=True
    )
    template_name = models.CharField(max_length=253, blank=True)
    # What the dry run selected: the checkpoint the intent names, if any.
    checkpoint = models.ForeignKey(
        Checkpoint, null=True, blank=True, on_delete=models.PROTECT, related_name="reviews"
    )
    summary = models.TextField(blank=True)
    haproxy_validation_output = models.TextField(blank=True)
    evaluated_at = models.DateTimeField(null=True, blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="decided_recovery_reviews",
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_comment = models.TextField(blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    outcome = models.TextField(blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-requested_at", "-id"]

    def __str__(self) -> str:
        return f"review #{self.pk} ({self.status})"


class RecoveryVerdict(models.Model):
    review = models.ForeignKey(RecoveryReview, on_delete=models.PROTECT, related_name="verdicts")
    check_name = models.CharField(max_length=128)
    pod_name = models.CharField(max_length=253, blank=True)
    passed = models.BooleanField()
    detail = models.TextField(blank=True)
    recorded_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["review_id", "id"]

    def __str__(self) -> str:
        return f"{self.check_name} {self.pod_name}: {'pass' if self.passed else 'fail'}"


class TaskRun(models.Model):
    """One run of a site Celery task (checkpoints.*), recorded from Celery's signals."""

    task_id = models.CharField(max_length=255, unique=True)
    task_name = models.CharField(max_length=255, db_index=True)
    args = models.TextField(blank=True)
    status = models.CharField(max_length=16, default="started", db_index=True)
    worker = models.CharField(max_length=255, blank=True)
    started_at = models.DateTimeField(auto_now_add=True, db_index=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    result = models.TextField(blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]

    def __str__(self) -> str:
        return f"{self.task_name} {self.status}"


class AppendOnlyError(Exception):
    """Raised when code tries to change or remove an audit record."""


class AuditLogQuerySet(models.QuerySet):
    def update(self, **kwargs: Any) -> int:
        raise AppendOnlyError("the audit log is append-only")

    def delete(self) -> tuple[int, dict[str, int]]:
        raise AppendOnlyError("the audit log is append-only")


class AuditLog(models.Model):
    """Append-only record of who did what and when; rows are never changed or deleted."""

    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="audit_entries",
    )
    # Kept as text too, so the record reads the same if the account is renamed.
    actor_name = models.CharField(max_length=150, blank=True)
    action = models.CharField(max_length=64, db_index=True)
    object_type = models.CharField(max_length=64, blank=True, db_index=True)
    object_id = models.CharField(max_length=64, blank=True, db_index=True)
    data = models.JSONField(default=dict, blank=True)
    at = models.DateTimeField(auto_now_add=True, db_index=True)

    objects = AuditLogQuerySet.as_manager()

    class Meta:
        ordering = ["-at", "-id"]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.actor_name} {self.action}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self.pk is not None or kwargs.get("force_update"):
            raise AppendOnlyError("the audit log is append-only")
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        raise AppendOnlyError("the audit log is append-only")

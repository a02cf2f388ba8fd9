"""REST serializers. List serializers stay small; details carry content."""

from __future__ import annotations

from typing import Any

from django.core.validators import RegexValidator
from rest_framework import serializers

from checkpoints.models import (
    AuditLog,
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

# Some character other than whitespace, and no NUL (which Django refuses in any text).
NON_BLANK_TEXT = r"^[^\x00]*[^\x00\s][^\x00]*$"


class StrictCharField(serializers.CharField):
    """Text that must arrive as a JSON string: DRF would turn 5 or true into "5", "True"."""

    default_error_messages = {"invalid": "A string is required."}

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


MIRROR_FIELDS = [
    "id",
    "uid",
    "name",
    "namespace",
    "resource_version",
    "created_at",
    "first_seen_at",
    "last_seen_at",
    "collected",
    "collected_at",
]


class CheckpointSerializer(serializers.ModelSerializer):
    class Meta:
        model = Checkpoint
        fields = [
            *MIRROR_FIELDS,
            "template_name",
            "template_uid",
            "checksum",
            "plan_id",
            "path",
            "compressed",
            "promoted",
            "receipt_pod_name",
            "receipt_acknowledged_at",
        ]


class CheckpointFileSerializer(serializers.ModelSerializer):
    class Meta:
        model = CheckpointFile
        fields = ["id", "kind", "path", "checksum", "object_name", "object_uid", "content"]


class WorkerReceiptSerializer(serializers.Serializer):
    pod_name = serializers.CharField(source="receipt_pod_name")
    pod_uid = serializers.CharField(source="receipt_pod_uid")
    runtime_id = serializers.CharField(source="receipt_runtime_id")
    checksum = serializers.CharField(source="receipt_checksum")
    applied_plan_id = serializers.CharField(source="receipt_applied_plan_id")
    running_plan_id = serializers.CharField(source="receipt_running_plan_id")
    worker_ops_plan_id = serializers.CharField(source="receipt_worker_ops_plan_id")
    mode = serializers.CharField(source="receipt_mode")
    acknowledged_at = serializers.DateTimeField(source="receipt_acknowledged_at", allow_null=True)
    term_holder = serializers.CharField(source="receipt_term_holder")
    term_epoch = serializers.IntegerField(source="receipt_term_epoch", allow_null=True)


class CheckpointDetailSerializer(CheckpointSerializer):
    files = CheckpointFileSerializer(many=True, read_only=True)
    worker_receipt = WorkerReceiptSerializer(source="*", read_only=True)

    class Meta(CheckpointSerializer.Meta):
        fields = [
            *CheckpointSerializer.Meta.fields,
            "retained_plan_encoding",
            "retained_plan_data",
            "auxiliary_refs",
            "worker_receipt",
            "files",
        ]


class DiffSideSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    checksum = serializers.CharField()
    plan_id = serializers.CharField()


class FileDiffSerializer(serializers.Serializer):
    path = serializers.CharField()
    kind = serializers.CharField()
    status = serializers.ChoiceField(choices=["unchanged", "changed", "added", "removed"])
    checksum_a = serializers.CharField(allow_null=True)
    checksum_b = serializers.CharField(allow_null=True)
    content_available = serializers.BooleanField()
    diff = serializers.CharField(allow_blank=True)


class CheckpointDiffSerializer(serializers.Serializer):
    a = DiffSideSerializer()
    b = DiffSideSerializer()
    files = FileDiffSerializer(many=True)


class DeploymentIntentSerializer(serializers.ModelSerializer):
    class Meta:
        model = DeploymentIntent
        exclude = ["fingerprint"]


class PodReceiptSerializer(serializers.ModelSerializer):
    class Meta:
        model = PodReceipt
        exclude = ["fingerprint"]


def _serves(field: str, kind: type[serializers.Field] = serializers.CharField) -> Any:
    """A field of what the pod still serves (`queries.current_state`'s `runs`): null when
    it has acknowledged no plan."""
    return kind(source=f"runs.{field}", read_only=True, allow_null=True)


class FleetPodSerializer(serializers.ModelSerializer):
    """A pod in its current state (checkpoints.queries.current_state), as the fleet page
    shows it: the plan it still serves (after a failed apply, the one it acknowledged last)
    and its last attempt's outcome beside it."""

    runtime_id = _serves("runtime_id")
    applied_plan_id = _serves("applied_plan_id")
    running_plan_id = _serves("running_plan_id")
    worker_ops_plan_id = _serves("worker_ops_plan_id")
    checksum = _serves("checksum")
    mode = _serves("mode")
    acknowledged_at = _serves("deployed_at", serializers.DateTimeField)
    term_holder = _serves("term_holder")
    term_epoch = _serves("term_epoch", serializers.IntegerField)
    last_attempt_checksum = serializers.CharField(source="checksum", read_only=True)
    matches_intent = serializers.BooleanField(read_only=True, allow_null=True)

    class Meta:
        model = PodReceipt
        fields = [
            "pod_name",
            "pod_uid",
            "runtime_id",
            "applied_plan_id",
            "running_plan_id",
            "worker_ops_plan_id",
            "checksum",
            "mode",
            "acknowledged_at",
            "term_holder",
            "term_epoch",
            "last_attempt_checksum",
            "last_error",
            "consecutive_errors",
            "deployed_at",
            "source_name",
            "matches_intent",
        ]


class LeadershipTermSerializer(serializers.ModelSerializer):
    class Meta:
        model = LeadershipTerm
        fields = "__all__"


class KubeEventSerializer(serializers.ModelSerializer):
    class Meta:
        model = KubeEvent
        fields = "__all__"


class RenderWarningSerializer(serializers.ModelSerializer):
    """A warning of the last render: the object, why, and the Event that reported it."""

    kind = serializers.CharField(source="involved_kind", read_only=True)
    name = serializers.CharField(source="involved_name", read_only=True)
    event = serializers.CharField(source="name", read_only=True)
    last_seen = serializers.DateTimeField(source="last_timestamp", read_only=True, allow_null=True)

    class Meta:
        model = KubeEvent
        fields = ["id", "kind", "namespace", "name", "reason", "message", "last_seen", "event"]


class HubStatusSerializer(serializers.ModelSerializer):
    class Meta:
        model = HubStatus
        fields = "__all__"


class MirrorStateSerializer(serializers.ModelSerializer):
    class Meta:
        model = MirrorState
        fields = "__all__"


class RecoveryVerdictSerializer(serializers.ModelSerializer):
    class Meta:
        model = RecoveryVerdict
        fields = ["id", "check_name", "pod_name", "passed", "detail", "recorded_at"]


class RecoveryReviewSerializer(serializers.ModelSerializer):
    requested_by = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )
    decided_by = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )
    checkpoint_name = serializers.CharField(
        source="checkpoint.name", read_only=True, default=None, allow_null=True
    )
    verdicts = RecoveryVerdictSerializer(many=True, read_only=True)

    class Meta:
        model = RecoveryReview
        fields = [
            "id",
            "status",
            "reason",
            "template_name",
            "requested_by",
            "requested_at",
            "checkpoint",
            "checkpoint_name",
            "summary",
            "haproxy_validation_output",
            "evaluated_at",
            "decided_by",
            "decided_at",
            "decision_comment",
            "expires_at",
            "outcome",
            "finished_at",
            "verdicts",
        ]
        read_only_fields = [f for f in fields if f not in ("reason", "template_name")]


class RecoveryReviewCreateSerializer(serializers.Serializer):
    # Kept as sent (request_review trims it), so the schema's length is the one checked.
    reason = StrictCharField(
        max_length=5000,
        trim_whitespace=False,
        validators=[RegexValidator(NON_BLANK_TEXT, "A reason is required.")],
    )
    template_name = StrictCharField(required=False, allow_blank=True, max_length=253)


class DecisionSerializer(serializers.Serializer):
    comment = StrictCharField(required=False, allow_blank=True, max_length=5000)


class TokenRequestSerializer(serializers.Serializer):
    username = StrictCharField(max_length=150, trim_whitespace=False)
    password = StrictCharField(max_length=4096, trim_whitespace=False)


class TokenSerializer(serializers.Serializer):
    token = serializers.CharField()


class ErrorSerializer(serializers.Serializer):
    """An error answer other than a validation error: {"detail": "..."}."""

    detail = serializers.CharField()


class AuditLogSerializer(serializers.ModelSerializer):
    class Meta:
        model = AuditLog
        fields = ["id", "at", "actor_name", "action", "object_type", "object_id", "data"]


def side(checkpoint: Checkpoint) -> dict[str, Any]:
    return {
        "id": checkpoint.pk,
        "name": checkpoint.name,
        "checksum": checkpoint.checksum,
        "plan_id": checkpoint.plan_id,
    }


class TaskRunSerializer(serializers.ModelSerializer):
    class Meta:
        model = TaskRun
        fields = "__all__"

"""REST API views. Shared base viewsets carry permissions, filtering and ordering."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import authenticate
from django.shortcuts import get_object_or_404
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.authtoken.models import Token
from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.decorators import action
from rest_framework.exceptions import AuthenticationFailed, ValidationError
from rest_framework.filters import OrderingFilter
from rest_framework.request import Request
from rest_framework.response import Response

from checkpoints import filtersets, queries, recovery
from checkpoints.api import serializers as s
from checkpoints.api.contract import ContractMixin
from checkpoints.api.permissions import IsViewer, ViewerReadsOperatorWrites
from checkpoints.models import (
    AuditLog,
    Checkpoint,
    DeploymentIntent,
    HubStatus,
    KubeEvent,
    LeadershipTerm,
    MirrorState,
    PodReceipt,
    RecoveryReview,
    TaskRun,
)

# Ids of checkpoints as the diff takes them (the schema's bounds are enforced).
CHECKPOINT_ID = {"type": "integer", "minimum": 1, "maximum": 2**62}

# Approving or rejecting a review in the wrong state is a conflict (409), not a bad request.
DECISION_RESPONSES = {200: s.RecoveryReviewSerializer, 409: s.ErrorSerializer}


class BaseReadOnlyViewSet(ContractMixin, viewsets.ReadOnlyModelViewSet):
    """Read-only listing for viewers, with filters and ordering."""

    permission_classes = [IsViewer]
    filter_backends = [DjangoFilterBackend, OrderingFilter]
    ordering_fields: list[str] | str = "__all__"


class CheckpointViewSet(BaseReadOnlyViewSet):
    queryset = Checkpoint.objects.all()
    filterset_class = filtersets.CheckpointFilterSet
    ordering_fields = ["created_at", "name", "first_seen_at", "collected_at"]

    def get_queryset(self) -> Any:
        queryset = super().get_queryset()
        if self.action == "retrieve":
            return queryset.prefetch_related("files")
        # The list never needs the stored bytes.
        return queryset.defer("content", "retained_plan_data", "auxiliary_refs")

    def get_serializer_class(self) -> type:
        return s.CheckpointDetailSerializer if self.action == "retrieve" else s.CheckpointSerializer

    @extend_schema(
        parameters=[
            OpenApiParameter("a", CHECKPOINT_ID, required=True, description="checkpoint id"),
            OpenApiParameter("b", CHECKPOINT_ID, required=True, description="checkpoint id"),
        ],
        responses={200: s.CheckpointDiffSerializer, 404: s.ErrorSerializer},
        filters=False,
    )
    @action(detail=False, methods=["get"], pagination_class=None, filter_backends=[])
    def diff(self, request: Request) -> Response:
        """Unified diff of the config and of each auxiliary file (by path) of two checkpoints."""
        # ContractMixin has checked both against CHECKPOINT_ID.
        ids = {key: int(request.query_params[key]) for key in ("a", "b")}
        files = Checkpoint.objects.prefetch_related("files")
        a = get_object_or_404(files, pk=ids["a"])
        b = get_object_or_404(files, pk=ids["b"])
        payload = {"a": s.side(a), "b": s.side(b), "files": queries.checkpoint_diff(a, b)}
        return Response(s.CheckpointDiffSerializer(payload).data)


class DeploymentIntentViewSet(BaseReadOnlyViewSet):
    queryset = DeploymentIntent.objects.all()
    serializer_class = s.DeploymentIntentSerializer
    filterset_class = filtersets.DeploymentIntentFilterSet
    ordering_fields = ["recorded_at", "epoch", "first_seen_at"]


class PodReceiptViewSet(BaseReadOnlyViewSet):
    queryset = PodReceipt.objects.all()
    serializer_class = s.PodReceiptSerializer
    filterset_class = filtersets.PodReceiptFilterSet
    ordering_fields = ["deployed_at", "pod_name", "first_seen_at"]


class FleetViewSet(ContractMixin, mixins.ListModelMixin, viewsets.GenericViewSet):
    """Pods in their current state, as the fleet page shows them: the plan each still
    serves, its last attempt, and whether what it serves matches the latest intent."""

    permission_classes = [IsViewer]
    serializer_class = s.FleetPodSerializer
    filter_backends: list[type] = []

    def get_queryset(self) -> Any:
        return queries.fleet()

    def paginate_queryset(self, queryset: Any) -> Any:
        # The page's pods in their current state (queries.current_state), the one function
        # the pages use too.
        page = super().paginate_queryset(queryset)
        intent = queries.latest_intent()
        return [queries.current_state(pod, intent) for pod in page] if page is not None else None


class LeadershipTermViewSet(BaseReadOnlyViewSet):
    queryset = LeadershipTerm.objects.all()
    serializer_class = s.LeadershipTermSerializer
    filterset_class = filtersets.LeadershipTermFilterSet
    ordering_fields = ["acquired_at", "epoch"]


class KubeEventViewSet(BaseReadOnlyViewSet):
    queryset = KubeEvent.objects.all()
    serializer_class = s.KubeEventSerializer
    filterset_class = filtersets.KubeEventFilterSet
    ordering_fields = ["last_timestamp", "count"]


class RenderWarningViewSet(ContractMixin, mixins.ListModelMixin, viewsets.GenericViewSet):
    """The objects the last render left out or degraded, with their reasons (one row per
    warning; checkpoints/warnings.py says which Events count as current)."""

    permission_classes = [IsViewer]
    serializer_class = s.RenderWarningSerializer
    filter_backends = [DjangoFilterBackend]
    filterset_class = filtersets.RenderWarningFilterSet

    def get_queryset(self) -> Any:
        return queries.current_render_warnings()


class HubStatusViewSet(BaseReadOnlyViewSet):
    queryset = HubStatus.objects.all()
    serializer_class = s.HubStatusSerializer
    filterset_fields = ["mode", "template_name"]


class MirrorStateViewSet(BaseReadOnlyViewSet):
    queryset = MirrorState.objects.all()
    serializer_class = s.MirrorStateSerializer
    filterset_fields = ["kind"]


class AuditLogViewSet(BaseReadOnlyViewSet):
    queryset = AuditLog.objects.all()
    serializer_class = s.AuditLogSerializer
    filterset_class = filtersets.AuditLogFilterSet
    ordering_fields = ["at"]


class TaskRunViewSet(BaseReadOnlyViewSet):
    queryset = TaskRun.objects.all()
    serializer_class = s.TaskRunSerializer
    filterset_fields = ["task_name", "status"]
    ordering_fields = ["started_at"]


class RecoveryReviewViewSet(
    ContractMixin,
    mixins.CreateModelMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet,
):
    """Manual recovery reviews: viewers read; operators request, approve and reject."""

    queryset = RecoveryReview.objects.select_related(
        "requested_by", "decided_by", "checkpoint"
    ).prefetch_related("verdicts")
    serializer_class = s.RecoveryReviewSerializer
    permission_classes = [ViewerReadsOperatorWrites]
    filter_backends = [DjangoFilterBackend, OrderingFilter]
    filterset_class = filtersets.RecoveryReviewFilterSet
    ordering_fields = ["requested_at", "status"]

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        # Expiry is lazy as well as periodic: nobody sees a stale "eligible".
        recovery.expire_stale()

    @extend_schema(
        request=s.RecoveryReviewCreateSerializer, responses={201: s.RecoveryReviewSerializer}
    )
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        body = s.RecoveryReviewCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            review = recovery.request_review(
                request.user,
                body.validated_data["reason"],
                body.validated_data.get("template_name", ""),
            )
        except recovery.ReviewError as exc:
            raise ValidationError({"reason": str(exc)}) from exc
        review = self.get_queryset().get(pk=review.pk)
        return Response(self.get_serializer(review).data, status=status.HTTP_201_CREATED)

    def _decide(self, request: Request, approve: bool) -> Response:
        review = self.get_object()
        body = s.DecisionSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        comment = body.validated_data.get("comment", "")
        try:
            if approve:
                recovery.approve(review.pk, request.user, comment)
            else:
                recovery.reject(review.pk, request.user, comment)
        except recovery.ReviewError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        review = self.get_queryset().get(pk=review.pk)
        return Response(self.get_serializer(review).data)

    @extend_schema(request=s.DecisionSerializer, responses=DECISION_RESPONSES)
    @action(detail=True, methods=["post"])
    def approve(self, request: Request, pk: str | None = None) -> Response:
        """Approve an eligible review; the leader then runs recovery, re-checking everything."""
        return self._decide(request, True)

    @extend_schema(request=s.DecisionSerializer, responses=DECISION_RESPONSES)
    @action(detail=True, methods=["post"])
    def reject(self, request: Request, pk: str | None = None) -> Response:
        return self._decide(request, False)


class TokenView(ObtainAuthToken):
    """POST username and password (JSON or a form) -> {"token": ...} for
    `Authorization: Token <key>`; 401 when they do not sign anybody in."""

    serializer_class = s.TokenRequestSerializer

    @extend_schema(
        request=s.TokenRequestSerializer,
        responses={200: s.TokenSerializer, 401: s.ErrorSerializer},
        auth=[],
    )
    def post(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        body = self.get_serializer(data=request.data)
        body.is_valid(raise_exception=True)
        user = authenticate(
            request=request,
            username=body.validated_data["username"],
            password=body.validated_data["password"],
        )
        if user is None:
            raise AuthenticationFailed("Unable to sign in with these credentials.")
        token, _ = Token.objects.get_or_create(user=user)
        return Response({"token": token.key})

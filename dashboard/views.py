"""Server-rendered dashboard pages. Readable without JavaScript; refresh.js only re-fetches
fragments of the same pages for live updates."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.mixins import AccessMixin
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import Count, Q
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views import View
from rest_framework.authtoken.models import Token

from checkpoints import filtersets, queries, recovery
from checkpoints.audit import audit
from checkpoints.diff import side_by_side
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
from checkpoints.roles import is_operator, is_viewer
from dashboard import hub, marks
from dashboard.live import differs_from_receipt, observe

PAGE_SIZE = 50
# Warning rows the fleet page shows; the warnings page has them all (issue 18).
FLEET_WARNING_ROWS = 5


class ViewerRequired(AccessMixin, View):
    """Anonymous users go to the login page; signed-in users without a role get 403."""

    template_name = ""
    fragment_template_name = ""

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_authenticated:
            return self.handle_no_permission()
        if not is_viewer(request.user):
            raise PermissionDenied("You need the viewer or operator role.")
        return super().dispatch(request, *args, **kwargs)

    def render(self, request: HttpRequest, context: dict[str, Any]) -> HttpResponse:
        # ?fragment=1 returns only the live part of the page, for refresh.js.
        if request.GET.get("fragment") and self.fragment_template_name:
            return render(request, self.fragment_template_name, context)
        return render(request, self.template_name, context)


def _page(request: HttpRequest, queryset: Any) -> Any:
    return Paginator(queryset, PAGE_SIZE).get_page(request.GET.get("page"))


class FilteredListView(ViewerRequired):
    """A page of one model's rows, narrowed by its filter set from the query string."""

    filterset_class: Any = None

    def get(self, request: HttpRequest) -> HttpResponse:
        model = self.filterset_class._meta.model
        filterset = self.filterset_class(request.GET, queryset=model.objects.all())
        return self.render(request, {"page": _page(request, filterset.qs), "filter": filterset})


def _filters_of(request: HttpRequest) -> str:
    """The query string without its page number, for a pager's links to keep the filters."""
    query = request.GET.copy()
    query.pop("page", None)
    query.pop("fragment", None)
    return query.urlencode()


class FleetView(ViewerRequired):
    template_name = "dashboard/fleet.html"
    fragment_template_name = "dashboard/_fleet.html"

    def get(self, request: HttpRequest) -> HttpResponse:
        summary = queries.render_summary()
        context = {
            # The latest outcome may be a failure; the pod still runs what it acknowledged.
            "pods": queries.fleet_states(),
            "intent": queries.latest_intent(),
            "term": LeadershipTerm.objects.filter(ended_at__isnull=True).first(),
            "hubs": HubStatus.objects.all(),
            "mirror": MirrorState.objects.all(),
            "render_warnings": summary.count,
            "warning_rows": queries.current_render_warnings(summary)[:FLEET_WARNING_ROWS],
            "open_reviews": RecoveryReview.objects.filter(
                status__in=RecoveryReview.IN_FLIGHT | {RecoveryReview.Status.ELIGIBLE}
            ).count(),
        }
        if not request.GET.get("fragment"):
            # The strip refreshes on its own, slower than the fleet fragment (0.5 s).
            context["strip"] = marks.default_picture(timezone.now())
        return self.render(request, context)


class PodView(ViewerRequired):
    """One HAProxy pod: what its agent reports now, against the intent, and every receipt
    (deployment outcome) it has had, newest first, with the events about it."""

    template_name = "dashboard/pod.html"
    fragment_template_name = "dashboard/_pod.html"

    def get(self, request: HttpRequest, pod: str) -> HttpResponse:
        receipts = PodReceipt.objects.filter(pod_name=pod)
        if not receipts.exists():
            raise Http404(f"no receipt of a pod named {pod!r} has been mirrored")
        current = queries.pod_state(pod)
        runs = current.runs if current is not None else None
        intent = queries.latest_intent()
        running = intended = None
        if runs is not None:
            running = queries.checkpoint_of(runs.applied_plan_id, runs.checksum)
        if intent is not None:
            intended = queries.checkpoint_of(intent.plan_id, intent.checksum)
        context = {
            "pod": pod,
            "current": current,
            "runs": runs,
            "intent": intent,
            "matches_intent": bool(current is not None and current.matches_intent),
            "running": running,
            "intended": intended,
            "page": _page(request, receipts),
            "events": KubeEvent.objects.filter(involved_name=pod)[:20],
        }
        context["live"] = live = observe(pod)
        context["live_differs"] = differs_from_receipt(live, runs)
        return self.render(request, context)


class CheckpointListView(ViewerRequired):
    template_name = "dashboard/checkpoints.html"
    fragment_template_name = "dashboard/_checkpoints.html"

    def get(self, request: HttpRequest) -> HttpResponse:
        queryset = Checkpoint.objects.defer("content", "retained_plan_data", "auxiliary_refs")
        filterset = filtersets.CheckpointFilterSet(request.GET, queryset=queryset)
        page = _page(request, filterset.qs)
        intent = queries.latest_intent()
        for checkpoint in page:
            checkpoint.intended = bool(
                intent
                and checkpoint.plan_id == intent.plan_id
                and checkpoint.checksum == intent.checksum
            )
        context = {
            "page": page,
            "filter": filterset,
            "intent": intent,
            "query": _filters_of(request),
        }
        return self.render(request, context)


class CheckpointDetailView(ViewerRequired):
    template_name = "dashboard/checkpoint_detail.html"

    def get(self, request: HttpRequest, pk: int) -> HttpResponse:
        checkpoint = get_object_or_404(Checkpoint.objects.prefetch_related("files"), pk=pk)
        intent = queries.latest_intent(checkpoint.template_uid)
        context = {
            "checkpoint": checkpoint,
            "intended": bool(
                intent
                and intent.plan_id == checkpoint.plan_id
                and intent.checksum == checkpoint.checksum
            ),
            "reviews": checkpoint.reviews.all()[:20],
        }
        return self.render(request, context)


class CheckpointDiffView(ViewerRequired):
    template_name = "dashboard/diff.html"

    def get(self, request: HttpRequest) -> HttpResponse:
        a_id, b_id = request.GET.get("a", ""), request.GET.get("b", "")
        if not (a_id.isdigit() and b_id.isdigit()):
            return HttpResponseBadRequest("choose two checkpoints (a and b)")
        files = Checkpoint.objects.prefetch_related("files")
        a = get_object_or_404(files, pk=int(a_id))
        b = get_object_or_404(files, pk=int(b_id))
        contents_a = {f.path: f.content for f in a.files.all()}
        contents_b = {f.path: f.content for f in b.files.all()}
        diffs = queries.checkpoint_diff(a, b)
        for entry in diffs:
            if entry["status"] != "unchanged" and entry["content_available"]:
                entry["rows"] = side_by_side(
                    contents_a.get(entry["path"]) or "",
                    contents_b.get(entry["path"]) or "",
                    context=3,
                )
        changed = sum(1 for d in diffs if d["status"] != "unchanged")
        context = {"a": a, "b": b, "diffs": diffs, "changed": changed}
        return self.render(request, context)


class TermsView(ViewerRequired):
    template_name = "dashboard/terms.html"
    fragment_template_name = "dashboard/_terms.html"

    def get(self, request: HttpRequest) -> HttpResponse:
        context = {
            "terms": LeadershipTerm.objects.all()[:100],
            "intents": DeploymentIntent.objects.all()[:100],
        }
        return self.render(request, context)


class EventsView(FilteredListView):
    template_name = "dashboard/events.html"
    fragment_template_name = "dashboard/_events.html"
    filterset_class = filtersets.KubeEventFilterSet


class WarningsView(ViewerRequired):
    """The last render's warnings: the summary's counts, and each object's current Event."""

    template_name = "dashboard/warnings.html"
    fragment_template_name = "dashboard/_warnings.html"

    def get(self, request: HttpRequest) -> HttpResponse:
        summary = queries.render_summary()
        filterset = filtersets.RenderWarningFilterSet(
            request.GET, queryset=queries.current_render_warnings(summary)
        )
        context = {
            "summary": summary,
            "reasons": sorted(summary.reasons.items()),
            "hubs": HubStatus.objects.all(),
            "page": _page(request, filterset.qs),
            "filter": filterset,
            # The filters, kept by the pager's links.
            "query": _filters_of(request),
        }
        return self.render(request, context)


class HubView(ViewerRequired):
    template_name = "dashboard/hub.html"
    fragment_template_name = "dashboard/_hub.html"

    def get(self, request: HttpRequest) -> HttpResponse:
        context = {
            "hubs": HubStatus.objects.all(),
            "mirror": MirrorState.objects.all(),
            "task_runs": TaskRun.objects.all()[:20],
            # Live reads of every hub cluster (bounded, cached briefly): see dashboard/hub.py.
            "active_hub": hub.active_hub(),
        }
        return self.render(request, context)


class ReviewListView(ViewerRequired):
    template_name = "dashboard/reviews.html"
    fragment_template_name = "dashboard/_reviews.html"

    def get(self, request: HttpRequest) -> HttpResponse:
        recovery.expire_stale()
        reviews = (
            RecoveryReview.objects.select_related("requested_by", "decided_by")
            .annotate(
                failed=Count("verdicts", filter=Q(verdicts__passed=False)),
                passed=Count("verdicts", filter=Q(verdicts__passed=True)),
            )
            .order_by("-requested_at", "-id")
        )  # aggregation drops Meta.ordering
        return self.render(request, {"page": _page(request, reviews)})

    def post(self, request: HttpRequest) -> HttpResponse:
        if not is_operator(request.user):
            raise PermissionDenied("Requesting a recovery review needs the operator role.")
        try:
            review = recovery.request_review(
                request.user, request.POST.get("reason", ""), request.POST.get("template_name", "")
            )
        except recovery.ReviewError as exc:
            messages.error(request, str(exc))
            return redirect("dashboard:reviews")
        messages.success(
            request, f"Recovery review #{review.pk} requested; the leader evaluates it."
        )
        return redirect("dashboard:review", pk=review.pk)


class ReviewDetailView(ViewerRequired):
    template_name = "dashboard/review_detail.html"
    fragment_template_name = "dashboard/_review.html"

    def get(self, request: HttpRequest, pk: int) -> HttpResponse:
        recovery.expire_stale()
        review = get_object_or_404(
            RecoveryReview.objects.select_related("requested_by", "decided_by", "checkpoint"),
            pk=pk,
        )
        verdicts = list(review.verdicts.all())
        checks: dict[str, list[Any]] = {}
        for verdict in verdicts:
            checks.setdefault(verdict.check_name, []).append(verdict)
        context = {
            "review": review,
            "checks": [
                {"name": name, "passed": all(v.passed for v in items), "verdicts": items}
                for name, items in checks.items()
            ],
            "audit": AuditLog.objects.filter(object_type="recoveryreview", object_id=str(pk)),
            "pending": review.status in RecoveryReview.IN_FLIGHT,
        }
        return self.render(request, context)


class ReviewDecisionView(ViewerRequired):
    approve = True

    def post(self, request: HttpRequest, pk: int) -> HttpResponse:
        if not is_operator(request.user):
            raise PermissionDenied("Approving or rejecting needs the operator role.")
        review = get_object_or_404(RecoveryReview, pk=pk)
        comment = request.POST.get("comment", "")
        try:
            if self.approve:
                recovery.approve(review.pk, request.user, comment)
                messages.success(request, "Approved: the leader runs recovery, re-checking all.")
            else:
                recovery.reject(review.pk, request.user, comment)
                messages.success(request, "Rejected.")
        except recovery.ReviewError as exc:
            messages.error(request, str(exc))
        return redirect("dashboard:review", pk=review.pk)


class AuditView(FilteredListView):
    template_name = "dashboard/audit.html"
    filterset_class = filtersets.AuditLogFilterSet


class TokenView(ViewerRequired):
    """The signed-in user's API token: shown, created or rotated (POST)."""

    template_name = "dashboard/token.html"

    def get(self, request: HttpRequest) -> HttpResponse:
        token = Token.objects.filter(user=request.user).first()
        return self.render(request, {"token": token})

    def post(self, request: HttpRequest) -> HttpResponse:
        Token.objects.filter(user=request.user).delete()
        token = Token.objects.create(user=request.user)
        audit(request.user, "api_token.rotated", None)
        messages.success(request, "A new API token was created; the old one no longer works.")
        return self.render(request, {"token": token})

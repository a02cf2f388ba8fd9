"""Routes of /api/v1/."""

from rest_framework.routers import APIRootView, DefaultRouter

from checkpoints.api import views
from checkpoints.api.permissions import IsViewer


class RootView(APIRootView):
    """The haptic API: checkpoints, intents, receipts, terms, events and recovery reviews."""

    permission_classes = [IsViewer]


router = DefaultRouter()
router.APIRootView = RootView
router.register("checkpoints", views.CheckpointViewSet)
router.register("intents", views.DeploymentIntentViewSet)
router.register("receipts", views.PodReceiptViewSet)
router.register("fleet", views.FleetViewSet, basename="fleet")
router.register("terms", views.LeadershipTermViewSet)
router.register("events", views.KubeEventViewSet)
router.register("render-warnings", views.RenderWarningViewSet, basename="render-warning")
router.register("hub-status", views.HubStatusViewSet)
router.register("mirror-state", views.MirrorStateViewSet)
router.register("recovery-reviews", views.RecoveryReviewViewSet)
router.register("audit-log", views.AuditLogViewSet)
router.register("task-runs", views.TaskRunViewSet)

app_name = "api"
urlpatterns = router.urls

from django.urls import path

from dashboard import timeline_views, views

app_name = "dashboard"
urlpatterns = [
    path("", views.FleetView.as_view(), name="fleet"),
    path("checkpoints/", views.CheckpointListView.as_view(), name="checkpoints"),
    path("checkpoints/diff/", views.CheckpointDiffView.as_view(), name="diff"),
    path("checkpoints/<int:pk>/", views.CheckpointDetailView.as_view(), name="checkpoint"),
    path("pods/<str:pod>/", views.PodView.as_view(), name="pod"),
    path("terms/", views.TermsView.as_view(), name="terms"),
    path("timeline/", timeline_views.TimelineView.as_view(), name="timeline"),
    path("records/<str:kind>/<int:pk>/", timeline_views.RecordView.as_view(), name="record"),
    path("events/", views.EventsView.as_view(), name="events"),
    path("warnings/", views.WarningsView.as_view(), name="warnings"),
    path("hub/", views.HubView.as_view(), name="hub"),
    path("reviews/", views.ReviewListView.as_view(), name="reviews"),
    path("reviews/<int:pk>/", views.ReviewDetailView.as_view(), name="review"),
    path(
        "reviews/<int:pk>/approve/",
        views.ReviewDecisionView.as_view(approve=True),
        name="review-approve",
    ),
    path(
        "reviews/<int:pk>/reject/",
        views.ReviewDecisionView.as_view(approve=False),
        name="review-reject",
    ),
    path("audit/", views.AuditView.as_view(), name="audit"),
    path("token/", views.TokenView.as_view(), name="token"),
]

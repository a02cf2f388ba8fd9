"""URL routes of the haptic site."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import include, path
from django.views.defaults import page_not_found
from drf_spectacular.views import SpectacularAPIView

from checkpoints.api.docs import api_docs
from checkpoints.api.permissions import IsViewer
from checkpoints.api.views import TokenView


def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """API clients get the API's own 404 body (JSON) even for a URL no route matches."""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": "Not found."}, status=404)
    return page_not_found(request, exception)


handler404 = not_found


urlpatterns = [
    path("admin/", admin.site.urls),
    path("healthz", healthz, name="healthz"),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/v1/", include("checkpoints.api.urls")),
    # POST username + password -> {"token": ...} for `Authorization: Token <key>`.
    path("api/auth/token/", TokenView.as_view(), name="api-token"),
    path(
        "api/schema/",
        SpectacularAPIView.as_view(permission_classes=[IsViewer]),
        name="api-schema",
    ),
    path("api/docs/", api_docs, name="api-docs"),
    path("", include("dashboard.urls")),
]

"""URL routes of the haptic site."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.http import HttpRequest, JsonResponse
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView
from rest_framework.authtoken.views import obtain_auth_token

from checkpoints.api.docs import api_docs
from checkpoints.api.permissions import IsViewer


def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


urlpatterns = [
    path("admin/", admin.site.urls),
    path("healthz", healthz, name="healthz"),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/v1/", include("checkpoints.api.urls")),
    # POST username + password -> {"token": ...} for `Authorization: Token <key>`.
    path("api/auth/token/", obtain_auth_token, name="api-token"),
    path(
        "api/schema/",
        SpectacularAPIView.as_view(permission_classes=[IsViewer]),
        name="api-schema",
    ),
    path("api/docs/", api_docs, name="api-docs"),
    path("", include("dashboard.urls")),
]

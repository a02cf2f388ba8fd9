"""Template context: what the signed-in user may do, for showing or hiding controls."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from checkpoints.roles import is_operator, is_viewer


def roles(request: HttpRequest) -> dict[str, Any]:
    user = getattr(request, "user", None)
    return {"user_is_viewer": is_viewer(user), "user_is_operator": is_operator(user)}

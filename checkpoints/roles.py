"""The two roles of the site: viewers read, operators also trigger and approve."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

VIEWER = "viewer"
OPERATOR = "operator"


def _groups(user: AbstractBaseUser | AnonymousUser) -> set[str]:
    # Cached on the user object: one query per request, however many checks a page makes.
    cached = getattr(user, "_haptic_groups", None)
    if cached is None:
        cached = set(user.groups.values_list("name", flat=True))
        user._haptic_groups = cached
    return cached


def is_viewer(user: AbstractBaseUser | AnonymousUser | None) -> bool:
    """Whether the user may read: viewers, operators and superusers."""
    if user is None or not user.is_authenticated or not user.is_active:
        return False
    return bool(user.is_superuser or _groups(user) & {VIEWER, OPERATOR})


def is_operator(user: AbstractBaseUser | AnonymousUser | None) -> bool:
    """Whether the user may request, approve and reject recovery reviews."""
    if user is None or not user.is_authenticated or not user.is_active:
        return False
    return bool(user.is_superuser or OPERATOR in _groups(user))

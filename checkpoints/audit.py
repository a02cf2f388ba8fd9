"""Writing the append-only audit log."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import models

from checkpoints.models import AuditLog


def audit(
    user: AbstractBaseUser | AnonymousUser | None,
    action: str,
    obj: models.Model | None = None,
    **data: Any,
) -> AuditLog:
    """Append one record: who (None for the system), what, on which object, with details."""
    actor = user if user is not None and getattr(user, "is_authenticated", False) else None
    return AuditLog.objects.create(
        actor=actor,
        actor_name=actor.get_username() if actor else "system",
        action=action,
        object_type=obj._meta.model_name if obj is not None else "",
        object_id=str(obj.pk) if obj is not None else "",
        data=data,
    )

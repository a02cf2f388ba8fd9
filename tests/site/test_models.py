"""The audit log is append-only; history models are protected; the roles command."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.db.models.deletion import ProtectedError

from checkpoints.audit import audit
from checkpoints.models import AppendOnlyError, AuditLog, Checkpoint
from checkpoints.roles import is_operator, is_viewer

pytestmark = pytest.mark.django_db


def test_audit_log_refuses_update_and_delete(operator: Any) -> None:
    entry = audit(operator, "test.action", None, answer=42)
    assert entry.actor_name == "otto" and entry.data == {"answer": 42}
    entry.action = "tampered"
    with pytest.raises(AppendOnlyError):
        entry.save()
    with pytest.raises(AppendOnlyError):
        entry.delete()
    with pytest.raises(AppendOnlyError):
        AuditLog.objects.filter(pk=entry.pk).update(action="tampered")
    with pytest.raises(AppendOnlyError):
        AuditLog.objects.all().delete()
    assert AuditLog.objects.get().action == "test.action"


def test_system_actor() -> None:
    assert audit(None, "mirror.started").actor_name == "system"


def test_checkpoint_files_cannot_be_cascaded_away(history: dict) -> None:
    with pytest.raises(ProtectedError):
        Checkpoint.objects.first().delete()


def test_bootstrap_roles_is_idempotent_and_creates_an_admin() -> None:
    call_command("haptic_bootstrap_roles", verbosity=0)
    call_command(
        "haptic_bootstrap_roles", admin_username="root", admin_password="s3cret-pass", verbosity=0
    )
    call_command("haptic_bootstrap_roles", admin_username="root", verbosity=0)
    assert set(Group.objects.values_list("name", flat=True)) == {"viewer", "operator"}
    admin = User.objects.get(username="root")
    assert admin.is_superuser and admin.check_password("s3cret-pass")
    assert is_operator(admin)
    viewer_perms = set(
        Group.objects.get(name="viewer").permissions.values_list("codename", flat=True)
    )
    assert "view_checkpoint" in viewer_perms and "add_recoveryreview" not in viewer_perms


def test_role_predicates(viewer: Any, operator: Any, nobody: Any) -> None:
    assert is_viewer(viewer) and not is_operator(viewer)
    assert is_viewer(operator) and is_operator(operator)
    assert not is_viewer(nobody) and not is_operator(nobody)
    nobody.is_active = False
    assert not is_viewer(nobody)
    assert not is_viewer(None)

"""python manage.py haptic_bootstrap_roles [--admin-username U --admin-password P]

Creates the groups `viewer` and `operator` with their model permissions, and optionally a
first superuser. Safe to run again: it only adds what is missing.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.core.management.base import BaseCommand, CommandError

from checkpoints.roles import OPERATOR, VIEWER
from config import env


class Command(BaseCommand):
    help = "Create the viewer and operator groups and, optionally, a first admin."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--admin-username")
        parser.add_argument(
            "--admin-password", help="or the environment variable HAPTIC_ADMIN_PASSWORD"
        )
        parser.add_argument("--admin-email", default="")

    def handle(self, *args: Any, **options: Any) -> None:
        view = Permission.objects.filter(content_type__app_label="checkpoints").filter(
            codename__startswith="view_"
        )
        viewer, _ = Group.objects.get_or_create(name=VIEWER)
        viewer.permissions.add(*view)
        operator, _ = Group.objects.get_or_create(name=OPERATOR)
        operator.permissions.add(*view)
        operator.permissions.add(
            *Permission.objects.filter(
                content_type__app_label="checkpoints",
                codename__in=["add_recoveryreview", "change_recoveryreview"],
            )
        )
        self.stdout.write(f"groups: {VIEWER}, {OPERATOR}")
        username = options.get("admin_username")
        if not username:
            return
        password = options.get("admin_password") or env.admin_password()
        user_model = get_user_model()
        if user_model.objects.filter(username=username).exists():
            self.stdout.write(f"admin {username} already exists")
            return
        if not password:
            raise CommandError("--admin-password (or HAPTIC_ADMIN_PASSWORD) is required")
        user = user_model.objects.create_superuser(username, options["admin_email"], password)
        user.groups.add(operator)
        self.stdout.write(f"created admin {username}")

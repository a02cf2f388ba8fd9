"""python manage.py request_review --reason TEXT: ask the leader for a recovery dry run."""

from __future__ import annotations

import logging
import time
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from config import env


class Command(BaseCommand):
    help = (
        "Request a manual recovery review (ADR-0033) as an operator: the review is recorded "
        "and audited in the database and the leader evaluates every recovery check as a dry "
        "run (task on the leader queue), recording a verdict per check and per pod. Approve "
        "or reject it in the dashboard or the API (/api/v1/recovery-reviews/ID/approve/). "
        "Uses the same database and broker as the running system (DATABASE_URL, REDIS_URL, "
        "else var/)."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--reason", required=True, help="why a review is needed (audited)")
        parser.add_argument(
            "--user",
            default=env.admin_user(),
            help="the requesting user; must be in the operator group or a superuser "
            "(default $HAPTIC_ADMIN_USER or admin)",
        )
        parser.add_argument(
            "--template",
            default=env.template_config(),
            help="HAProxyTemplateConfig the review is about (default haptic)",
        )
        parser.add_argument(
            "--wait",
            type=float,
            default=0.0,
            help="wait up to N seconds for the leader's evaluation and print the verdicts",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        from checkpoints import recovery
        from checkpoints.models import RecoveryReview
        from checkpoints.roles import OPERATOR

        user = get_user_model().objects.filter(username=options["user"]).first()
        if user is None:
            raise CommandError(f"no user {options['user']!r} (see --user)")
        if not (user.is_superuser or user.groups.filter(name=OPERATOR).exists()):
            raise CommandError(f"{user.username} is not an operator; only operators may ask")
        # kombu's filesystem transport warns about a missing hostname on every connection.
        logging.getLogger("kombu.connection").setLevel(logging.ERROR)
        try:
            review = recovery.request_review(user, options["reason"], options["template"])
        except recovery.ReviewError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(
            f"recovery review #{review.pk} requested by {user.username} "
            f"(status {review.status}, expires {review.expires_at:%Y-%m-%d %H:%M:%S} UTC)\n"
            f"  follow it: /api/v1/recovery-reviews/{review.pk}/ or the dashboard"
        )
        if options["wait"] <= 0:
            return
        deadline = time.monotonic() + options["wait"]
        while time.monotonic() < deadline:
            review = RecoveryReview.objects.get(pk=review.pk)
            if review.status in RecoveryReview.ANSWERED:
                break
            time.sleep(0.5)
        self.stdout.write(f"status: {review.status}")
        if review.summary:
            self.stdout.write(f"summary: {review.summary}")
        for verdict in review.verdicts.all():
            mark = "pass" if verdict.passed else "FAIL"
            pod = f" [{verdict.pod_name}]" if verdict.pod_name else ""
            self.stdout.write(f"  {mark}  {verdict.check_name}{pod}: {verdict.detail}")

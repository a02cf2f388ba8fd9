"""python manage.py run_mirror [--kubeconfig PATH] [--namespace NS] [--duration SECONDS]"""

from __future__ import annotations

import contextlib
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from checkpoints.mirror import run_forever


class Command(BaseCommand):
    help = "Mirror checkpoints, Leases, events and receipts from Kubernetes into the database."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--kubeconfig", default=settings.HAPTIC_KUBECONFIG or None)
        parser.add_argument("--namespace", default=settings.HAPTIC_NAMESPACE)
        parser.add_argument("--duration", type=float, default=None, help="stop after N seconds")

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write(f"mirroring namespace {options['namespace']}")
        with contextlib.suppress(KeyboardInterrupt):
            run_forever(options["kubeconfig"], options["namespace"], options["duration"])

"""Smoke tests of the foundation: Django on PostgreSQL, Celery round trip through Redis."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pytest
from django.db import connection

from tests.conftest import REPO_ROOT


@pytest.mark.django_db
def test_django_talks_to_postgresql() -> None:
    assert connection.vendor == "postgresql", "make test must run against PostgreSQL"
    with connection.cursor() as cursor:
        cursor.execute("select version()")
        (version,) = cursor.fetchone()
    assert version.startswith("PostgreSQL")


def test_celery_task_round_trips_through_redis_with_a_real_worker(redis_url: str) -> None:
    from haptic_site.celery import app

    assert app.conf.broker_url.startswith("redis://")
    queue = f"smoke-{uuid.uuid4().hex[:8]}"
    env = dict(os.environ, REDIS_URL=redis_url, DJANGO_SETTINGS_MODULE="haptic_site.settings")
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "haptic_site",
            "worker",
            "-Q",
            queue,
            "-c",
            "1",
            "--pool",
            "solo",
            "-n",
            f"{queue}@%h",
            "--without-gossip",
            "--without-mingle",
            "--loglevel",
            "WARNING",
        ],
        cwd=REPO_ROOT,
        env=env,
    )
    try:
        result = app.send_task("controller.ping", args=["hello"], queue=queue)
        answer = result.get(timeout=60)
        assert answer["payload"] == "hello"
        # Handled in the worker process, not eagerly in this one.
        assert answer["pid"] != os.getpid()
        assert answer["pid"] == worker.pid
    finally:
        worker.terminate()
        worker.wait(timeout=30)

"""Smoke tests of the foundation: Django on PostgreSQL, Celery round trip through Redis."""

from __future__ import annotations

import os
import uuid

import pytest
from django.db import connection

from tests.conftest import celery_worker


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
    with celery_worker(queue, REDIS_URL=redis_url) as worker:
        result = app.send_task("controller.ping", args=["hello"], queue=queue)
        answer = result.get(timeout=60)
        assert answer["payload"] == "hello"
        # Handled in the worker process, not eagerly in this one.
        assert answer["pid"] != os.getpid()
        assert answer["pid"] == worker.pid

"""Shared fixtures. Tests run against real PostgreSQL and Redis (DATABASE_URL, REDIS_URL)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

REPO_ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent

# Hypothesis's per-example deadline is a timing assertion, and timing claims live in bench/
# (a loaded 2-core CI machine took 549 ms for an example of a pure function): no deadline.
settings.register_profile("haptic", deadline=None)
settings.load_profile("haptic")


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def redis_url() -> str:
    url = os.environ.get("REDIS_URL")
    if not url:
        pytest.fail("REDIS_URL must point at a real Redis for the test suite (make test sets it)")
    return url


@contextlib.contextmanager
def celery_worker(queue: str, **env: str) -> Iterator[subprocess.Popen]:
    """A real Celery worker of haptic_site consuming only `queue` (solo pool), stopped on
    exit. `env` is added to this process's environment (e.g. REDIS_URL, DATABASE_URL)."""
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
            "--without-heartbeat",
            "--loglevel",
            "WARNING",
        ],
        cwd=REPO_ROOT,
        env=dict(os.environ, DJANGO_SETTINGS_MODULE="haptic_site.settings", **env),
        stdout=subprocess.DEVNULL,
    )
    try:
        yield worker
    finally:
        worker.terminate()
        try:
            worker.wait(20)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()

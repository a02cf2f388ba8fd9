"""Shared fixtures. Tests run against real PostgreSQL and Redis (DATABASE_URL, REDIS_URL)."""

from __future__ import annotations

import contextlib
import os
import socketserver
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

REPO_ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent


def _quiet_hang_ups(self: socketserver.BaseServer, request: object, client_address: object) -> None:
    """The tests' HTTP backends (http.server) print a traceback for every peer that hangs
    up mid-request: HAProxy's health checks close with a reset, as clients do in the
    timeout tests. That is not an error of the backend; anything else is still printed."""
    if isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
        return
    _print_error(self, request, client_address)


_print_error = socketserver.BaseServer.handle_error
socketserver.BaseServer.handle_error = _quiet_hang_ups  # type: ignore[method-assign]


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


# Modules whose every test starts its own system: under `--dist loadfile` their tests may
# run on different workers (each other module stays on one, sharing its module's stack).
SPREAD_ACROSS_WORKERS = frozenset({"tests/e2e/test_retained_configuration.py"})


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """`--dist loadfile`, except for SPREAD_ACROSS_WORKERS (the longest module would
    otherwise be one worker's tail). A scheduler of our own, since `--dist loadgroup` does
    not group under pytest 9 (xdist 3.8 sets an attribute pytest 9 no longer reads)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class ModuleScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return nodeid if module in SPREAD_ACROSS_WORKERS else module

    return ModuleScheduling(config, log)

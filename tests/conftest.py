"""Shared fixtures. Tests run against real PostgreSQL and Redis (DATABASE_URL, REDIS_URL)."""

from __future__ import annotations

import contextlib
import os
import socketserver
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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
SPREAD_ACROSS_WORKERS = frozenset(
    {"tests/e2e/test_retained_configuration.py", "tests/site/test_api_live_contract.py"}
)

# The longest modules of either tier (worker-seconds in `make test PYTEST_ARGS=--durations=100`,
# 2026-12-03), handed out first: a long module started last is one worker's tail while the
# others idle (longest processing time first). The rest follow in xdist's own order.
LONGEST_FIRST = (
    "tests/e2e/test_retained_configuration.py",  # local 218 s, real 372 s (spread)
    "tests/term/test_model.py",  # 173 s
    "tests/run/test_make_run.py",  # 131 s
    "tests/site/test_api_live_contract.py",  # 121 s
    "tests/hub/test_promoted_controller.py",  # real 66 s
    "tests/retained/test_term_holes.py",  # real 65 s
    "tests/e2e/test_routing.py",  # real 63 s
    "tests/real/test_manifests.py",  # real 58 s
    "tests/e2e/test_readiness_gate.py",  # real 55 s
    "tests/retained/test_seed_cases.py",  # real 54 s
    "tests/retained/test_drain.py",  # real 54 s
    "tests/hub/test_promoted_recovery.py",  # real 51 s
    "tests/site/test_browser_pages.py",  # 46 s
    "tests/hub/test_e2e.py",  # real 46 s
    "tests/real/test_make_run_real.py",  # real 42 s
    "tests/e2e/test_recovery_review.py",  # real 41 s
    "tests/e2e/test_http_store_leader.py",  # real 41 s
    "tests/e2e/test_ingress_status_http.py",  # real 38 s
    "tests/retained/test_renewal.py",  # real 38 s
    "tests/test_import_cycles.py",  # 35 s
    "tests/election/test_replicas.py",  # 32 s
)


def _longest_first(scopes: list[str]) -> list[str]:
    """Scopes (modules, or one test of a spread module) in LONGEST_FIRST's order, then
    the rest in the order given."""
    rank = {module: i for i, module in enumerate(LONGEST_FIRST)}
    return sorted(scopes, key=lambda scope: rank.get(scope.split("::", 1)[0], len(rank)))


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """`--dist loadfile`, except for SPREAD_ACROSS_WORKERS (the longest module would
    otherwise be one worker's tail), handing out LONGEST_FIRST first. A scheduler of our own,
    since `--dist loadgroup` does not group under pytest 9 (xdist 3.8 sets an attribute
    pytest 9 no longer reads)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class ModuleScheduling(LoadFileScheduling):
        ordered = False

        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return nodeid if module in SPREAD_ACROSS_WORKERS else module

        def _assign_work_unit(self, node: Any) -> None:
            if not self.ordered:  # the queue is complete before the first unit goes out
                self.ordered = True
                for scope in reversed(_longest_first(list(self.workqueue))):
                    self.workqueue.move_to_end(scope, last=False)
            super()._assign_work_unit(node)

    return ModuleScheduling(config, log)

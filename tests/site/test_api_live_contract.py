"""The REST API keeps its OpenAPI contract, checked by schemathesis against a live server.

gunicorn serves the site as `make run` starts it (devstack.stack.web_command), once on the
test's PostgreSQL database and once on an SQLite file (`make run`'s embedded default, in WAL
mode with immediate transactions: haptic_site/settings.py), each holding the same mirrored
history. schemathesis reads the served schema
and runs every check through its examples, coverage, fuzzing and stateful phases: with an
operator's token on every operation, and at the same time with a viewer's token on the
operations that write (the only ones where the two roles differ). Every undocumented status
code, schema-violating request accepted, schema-valid request refused, response outside its
schema and server error is a failure here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.core.management import call_command
from django.db import connection
from rest_framework.authtoken.models import Token

from devstack.stack import web_command
from localcluster.ports import free_port
from tests.conftest import REPO_ROOT

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(480)]

# Examples per operation in the fuzzing and stateful phases; the coverage phase derives its
# own cases from the schema. Fixed seed: a failure reproduces.
MAX_EXAMPLES = 20
SEED = 20


def _schemathesis(url: str, token: str, report: Path, *only: str) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "schemathesis.cli",
            "run",
            f"{url}/api/schema/",
            "--header",
            f"Authorization: Token {token}",
            "--checks",
            "all",
            "--phases",
            "examples,coverage,fuzzing,stateful",
            "--max-examples",
            str(MAX_EXAMPLES),
            "--seed",
            str(SEED),
            # One worker: hypothesis's lambda introspection is not thread-safe on 3.11.
            "--workers",
            "1",
            "--wait-for-schema",
            "30",
            "--report",
            "json",
            "--report-json-path",
            str(report),
            *only,
        ],
        cwd=report.parent,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _wait_up(url: str, web: subprocess.Popen, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert web.poll() is None, "gunicorn exited"
        try:
            if httpx.get(url + "/healthz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    pytest.fail("gunicorn did not answer /healthz")


def _sqlite_copy(tmp_path: Path, env: dict[str, str]) -> str:
    """The test database's users, tokens and history in a migrated SQLite file, as `make run`
    keeps them; its DATABASE_URL."""
    dump = tmp_path / "history.json"
    call_command(
        "dumpdata", "auth.user", "authtoken", "checkpoints", "--natural-foreign",
        "--output", str(dump), verbosity=0,
    )  # fmt: skip
    url = f"sqlite:///{tmp_path / 'haptic.sqlite3'}"
    for argv in (["migrate", "--noinput"], ["haptic_bootstrap_roles"], ["loaddata", str(dump)]):
        subprocess.run(
            [sys.executable, "manage.py", *argv, "-v", "0"], cwd=REPO_ROOT,
            env={**env, "DATABASE_URL": url}, check=True, capture_output=True, timeout=120,
        )  # fmt: skip
    return url


@pytest.mark.parametrize("database", ["postgresql", "sqlite"])
def test_schemathesis_finds_no_contract_failure(
    viewer: Any, operator: Any, history: dict, redis_url: str, tmp_path: Path, database: str
) -> None:
    tokens = {
        "viewer": Token.objects.create(user=viewer).key,
        "operator": Token.objects.create(user=operator).key,
    }
    db = connection.settings_dict
    queue = f"leader-contract-{uuid.uuid4().hex[:8]}"
    env = dict(
        os.environ,
        DATABASE_URL=f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        REDIS_URL=redis_url,
        # Reviews the operator requests go to a queue nobody consumes, removed afterwards.
        HAPTIC_LEADER_QUEUE=queue,
        DJANGO_SETTINGS_MODULE="haptic_site.settings",
    )
    if database == "sqlite":
        env["DATABASE_URL"] = _sqlite_copy(tmp_path, env)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = (tmp_path / "web.log").open("wb")
    web = subprocess.Popen(web_command(port), cwd=REPO_ROOT, env=env, stdout=log, stderr=log)
    outputs: dict[str, str] = {}
    reports: dict[str, dict[str, Any]] = {}
    try:
        _wait_up(url, web)
        runs = {
            "operator": _schemathesis(url, tokens["operator"], tmp_path / "operator.json"),
            # The roles differ only where an operation writes: every read answers a viewer
            # exactly as it answers an operator (IsViewer admits both), so the viewer's run
            # covers the writes, which must refuse it (403), and does not repeat the reads.
            "viewer": _schemathesis(
                url, tokens["viewer"], tmp_path / "viewer.json", "--include-method", "POST"
            ),
        }
        for role, run in runs.items():
            outputs[role], _ = run.communicate(timeout=450)
            reports[role] = json.loads((tmp_path / f"{role}.json").read_text())
    finally:
        web.terminate()
        web.wait(30)
        log.close()
        import redis

        broker = redis.Redis.from_url(redis_url)
        broker.delete(queue)
        broker.close()
    for role, report in reports.items():
        summary = outputs[role][-6000:]
        assert report["failures"] == [], f"{role}: {report['failures']}\n{summary}"
        assert report["errors"] == [], f"{role}: {report['errors']}\n{summary}"
        assert report["exit_code"] == 0, summary
        assert report["test_cases"]["generated"] > (500 if role == "operator" else 50), summary
        assert report["complete"], summary
    assert b"Traceback" not in (tmp_path / "web.log").read_bytes()

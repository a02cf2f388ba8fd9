"""`make run`'s embedded SQLite database under the writers it really has at once.

Two mirror-like processes (three writer threads each, through `checkpoints.store`) and four
API clients requesting and rejecting recovery reviews through a real gunicorn (two workers,
as `make run` starts it) share one SQLite file. Nobody may see "database is locked", and the
API may never answer 500.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest

from devstack.stack import web_command
from localcluster.ports import free_port
from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.timeout(180)

SECONDS = 10.0


def _embedded_env(var_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env |= {"HAPTIC_VAR_DIR": str(var_dir), "DJANGO_SETTINGS_MODULE": "haptic_site.settings"}
    return env


def _wait_up(url: str, web: subprocess.Popen, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert web.poll() is None, "gunicorn exited"
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    pytest.fail("gunicorn did not answer /healthz")


def _api_client(url: str, token: str, deadline: float, codes: Counter, bodies: list) -> None:
    """An operator's script: request a review, reject it, list reviews; again and again."""
    headers = {"Authorization": f"Token {token}"}
    with httpx.Client(base_url=url, headers=headers, timeout=60) as http:
        while time.monotonic() < deadline:
            created = http.post("/api/v1/recovery-reviews/", json={"reason": "load"})
            codes[("create", created.status_code)] += 1
            if created.status_code != 201:
                bodies.append(created.text[:300])
                continue
            review = created.json()["id"]
            rejected = http.post(f"/api/v1/recovery-reviews/{review}/reject/", json={})
            codes[("reject", rejected.status_code)] += 1
            if rejected.status_code != 200:
                bodies.append(rejected.text[:300])
            listed = http.get("/api/v1/recovery-reviews/?limit=5")
            codes[("list", listed.status_code)] += 1


def test_mirror_and_api_writers_never_see_database_is_locked(tmp_path: Path) -> None:
    env = _embedded_env(tmp_path)
    py = [sys.executable, "-m", "tests.site.sqlite_load"]
    setup = subprocess.run(
        [*py, "setup"], cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=True
    )
    token = setup.stdout.strip().splitlines()[-1]
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    web_log = tmp_path / "web.log"
    with web_log.open("wb") as log:
        web = subprocess.Popen(
            web_command(port),
            cwd=REPO_ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            _wait_up(url, web)
            mirrors = [
                subprocess.Popen(
                    [*py, "mirror", "--seconds", str(SECONDS), "--name", f"m{i}"],
                    cwd=REPO_ROOT,
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
                for i in range(2)
            ]
            codes: Counter = Counter()
            bodies: list[str] = []
            deadline = time.monotonic() + SECONDS
            clients = [
                threading.Thread(target=_api_client, args=(url, token, deadline, codes, bodies))
                for _ in range(4)
            ]
            for client in clients:
                client.start()
            for client in clients:
                client.join()
            results: list[dict[str, Any]] = []
            for proc in mirrors:
                stdout, stderr = proc.communicate(timeout=120)
                assert proc.returncode == 0, stderr
                results.append(json.loads(stdout.strip().splitlines()[-1]))
        finally:
            web.terminate()
            web.wait(20)
    errors = [e for r in results for e in r["errors"]]
    unexpected = {k: n for k, n in codes.items() if k[1] not in (200, 201)}
    assert (len(errors), unexpected) == (0, {}), f"mirror: {errors[:3]}; API: {bodies[:3]}"
    assert all(r["writes"] > 0 for r in results)
    assert codes[("reject", 200)] > 0
    assert "database is locked" not in web_log.read_text()

"""Checkpoint list API with 10,000 checkpoints in PostgreSQL: latency and query count.

Runs in a child process on its own throwaway database (haptic_bench_api on the server of
DATABASE_URL), so it neither touches the dev database nor depends on which Django settings
other benchmarks loaded. Latency is measured over real HTTP against gunicorn (one sync
worker); the query count per request in-process with Django's query capture.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from bench.harness import summarize
from localcluster.ports import free_port

REPO_ROOT = Path(__file__).resolve().parent.parent
BENCH_DB = "haptic_bench_api"
CHECKPOINTS = 10_000
REQUESTS = 300
TARGET_P95_MS = 100.0


def _server_url() -> str:
    url = os.environ.get("DATABASE_URL") or "postgres://postgres@127.0.0.1:5432/haptic"
    if not url.startswith(("postgres://", "postgresql://")):
        raise RuntimeError("bench_api needs PostgreSQL in DATABASE_URL")
    return url


def _with_db(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


def _admin(url: str, sql: str) -> None:
    import psycopg

    with psycopg.connect(_with_db(url, "postgres"), autocommit=True) as conn:
        conn.execute(sql)


def run() -> list[dict[str, Any]]:
    url = _server_url()
    _admin(url, f"DROP DATABASE IF EXISTS {BENCH_DB} WITH (FORCE)")
    _admin(url, f"CREATE DATABASE {BENCH_DB}")
    try:
        env = dict(os.environ, DATABASE_URL=_with_db(url, BENCH_DB))
        env.setdefault("DJANGO_SETTINGS_MODULE", "haptic_site.settings")
        env["DJANGO_SETTINGS_MODULE"] = "haptic_site.settings"
        result = subprocess.run(
            [sys.executable, "-m", "bench.bench_api", "--child"],
            cwd=REPO_ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(f"bench child failed:\n{result.stderr[-4000:]}")
        return json.loads(result.stdout.strip().splitlines()[-1])
    finally:
        _admin(url, f"DROP DATABASE IF EXISTS {BENCH_DB} WITH (FORCE)")


# --- child process ------------------------------------------------------------------------


def _populate() -> str:
    import hashlib
    from datetime import UTC, datetime, timedelta

    from django.contrib.auth.models import User
    from django.core.management import call_command
    from rest_framework.authtoken.models import Token

    from checkpoints.models import Checkpoint, CheckpointFile

    call_command("migrate", verbosity=0)
    call_command("haptic_bootstrap_roles", verbosity=0)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    rows = []
    for i in range(CHECKPOINTS):
        checksum = "sha256:" + hashlib.sha256(f"cfg-{i}".encode()).hexdigest()
        rows.append(
            Checkpoint(
                uid=f"uid-{i:06d}",
                name=f"checkpoint-{checksum[7:23]}",
                namespace="haptic",
                resource_version=str(i + 1),
                created_at=start + timedelta(minutes=i),
                template_name="haptic" if i % 10 else "other",
                template_uid="tmpl-a" if i % 10 else "tmpl-b",
                checksum=checksum,
                plan_id=hashlib.sha256(checksum.encode()).hexdigest(),
                path="haproxy.cfg",
                content="global\n" * 200,
                receipt_pod_name=f"haproxy-{i % 5}",
                collected=i < CHECKPOINTS - 50,
            )
        )
    created = Checkpoint.objects.bulk_create(rows, batch_size=2000)
    CheckpointFile.objects.bulk_create(
        (
            CheckpointFile(
                checkpoint=c,
                kind="config",
                path="haproxy.cfg",
                checksum=c.checksum,
                content=c.content,
            )
            for c in created
        ),
        batch_size=2000,
    )
    # Autovacuum analyses a table this size soon after it grows; a freshly bulk-loaded one has
    # no statistics yet, so do what it would do before measuring.
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    user = User.objects.create_user("bench", password="bench-password-unused")
    from django.contrib.auth.models import Group

    user.groups.add(Group.objects.get(name="viewer"))
    return Token.objects.create(user=user).key


def _query_counts(token: str) -> dict[int, int]:
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    client = Client(HTTP_AUTHORIZATION=f"Token {token}", HTTP_HOST="127.0.0.1")
    counts = {}
    for limit in (10, 50, 200, 1000):
        with CaptureQueriesContext(connection) as ctx:
            response = client.get(f"/api/v1/checkpoints/?limit={limit}&offset=100")
        assert response.status_code == 200, response.content[:300]
        assert len(response.json()["results"]) == limit
        counts[limit] = len(ctx.captured_queries)
    return counts


def _latencies(token: str, paths: list[str]) -> list[float]:
    import httpx

    port = free_port()
    server = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "gunicorn"),
            "haptic_site.wsgi",
            "--workers",
            "1",
            "--bind",
            f"127.0.0.1:{port}",
            "--log-level",
            "warning",
        ],
        cwd=REPO_ROOT,
        env=dict(os.environ, DATABASE_CONN_MAX_AGE="600"),
    )
    try:
        base = f"http://127.0.0.1:{port}"
        headers = {"Authorization": f"Token {token}"}
        with httpx.Client(base_url=base, headers=headers, timeout=30) as http:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if http.get("/healthz").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError("gunicorn did not start")
                time.sleep(0.2)
            for path in paths[:20]:  # warm up connections and caches
                http.get(path)
            samples = []
            for path in paths:
                t0 = time.perf_counter()
                response = http.get(path)
                elapsed = (time.perf_counter() - t0) * 1000
                if response.status_code != 200:
                    raise RuntimeError(f"{path}: {response.status_code}")
                samples.append(elapsed)
            return samples
    finally:
        server.terminate()
        server.wait(20)


def child() -> list[dict[str, Any]]:
    import django

    django.setup()
    token = _populate()
    counts = _query_counts(token)
    rng = random.Random(7)
    pages = [
        f"/api/v1/checkpoints/?offset={rng.randrange(0, CHECKPOINTS - 50)}" for _ in range(REQUESTS)
    ]
    filtered = [
        "/api/v1/checkpoints/?template=haptic&collected=true"
        f"&created_after=2026-01-0{rng.randrange(1, 6)}T00:00:00Z&offset={rng.randrange(0, 2000)}"
        for _ in range(REQUESTS)
    ]
    plain = summarize(_latencies(token, pages))
    filt = summarize(_latencies(token, filtered))
    constant = len(set(counts.values())) == 1
    return [
        {
            "metric": "checkpoint_list_latency",
            "checkpoints": CHECKPOINTS,
            "page_size": 50,
            "transport": "HTTP, gunicorn 1 sync worker, token auth",
            **plain,
            "load_average_1m": round(os.getloadavg()[0], 2),
            "target": f"p95 <= {TARGET_P95_MS:.0f} ms",
            "meets_target": plain["p95_ms"] <= TARGET_P95_MS,
        },
        {
            "metric": "checkpoint_list_filtered_latency",
            "checkpoints": CHECKPOINTS,
            "filters": "template, collected, created_after",
            **filt,
            "load_average_1m": round(os.getloadavg()[0], 2),
            "target": f"p95 <= {TARGET_P95_MS:.0f} ms",
            "meets_target": filt["p95_ms"] <= TARGET_P95_MS,
        },
        {
            "metric": "checkpoint_list_queries_per_request",
            "by_page_size": {str(k): v for k, v in counts.items()},
            "target": "constant: does not grow with page size",
            "meets_target": constant,
        },
    ]


if __name__ == "__main__":
    if sys.argv[1:] == ["--child"]:
        print(json.dumps(child()))
    else:
        print(json.dumps(run(), indent=2))

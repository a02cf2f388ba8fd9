"""Processes for the SQLite concurrency test: set up the embedded database, or write to it
as the mirror does, from several threads, for a while.

    python -m tests.site.sqlite_load setup            # prints the operator's API token
    python -m tests.site.sqlite_load mirror --seconds 8 --threads 3 --name w1

Run with DATABASE_URL unset and HAPTIC_VAR_DIR set, so the settings choose `make run`'s
SQLite file. `mirror` prints one JSON line: writes done and every error raised.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
import uuid
from typing import Any

import django


def setup() -> None:
    from django.contrib.auth.models import Group, User
    from django.core.management import call_command
    from rest_framework.authtoken.models import Token

    call_command("migrate", verbosity=0)
    call_command("haptic_bootstrap_roles", verbosity=0)
    user = User.objects.create_user("load-operator", password=uuid.uuid4().hex)
    user.groups.add(Group.objects.get(name="operator"))
    print(Token.objects.create(user=user).key)


def _mirror_writes(name: str, index: int, deadline: float, out: dict[str, Any]) -> None:
    """What a mirror thread does: upsert checkpoints, receipts, leases, events, state."""
    from django.db import connection
    from django.utils import timezone

    from checkpoints import store
    from checkpoints.models import MirrorState
    from tests.site import factories as f

    state_key = f"haptic/{name}-{index}"
    n = 0
    try:
        while time.monotonic() < deadline:
            n += 1
            try:
                at = "2026-11-30T08:00:00Z"
                cfg = f.checkpoint(f"global\n  maxconn {n}\n# {name}-{index}\n", created=at)
                store.apply_haproxycfg(cfg)
                # Every writer updates the same published object: contention on one row.
                receipts = [f.receipt(f"haproxy-{index}", "p", "c", at)]
                store.apply_haproxycfg(f.published(receipts, [cfg], rv=str(n)))
                store.apply_event(f.event("Deployed", f"{name} {n}"))
                store.apply_lease(
                    f.leader_lease(name, n, at, at, rv=str(n), uid=f"lease-{name}-{index}")
                )
                MirrorState.objects.update_or_create(
                    kind=state_key,
                    defaults={"resource_version": str(n), "last_synced_at": timezone.now()},
                )
                out["writes"] += 1
            except Exception as exc:  # counted, the test fails on any
                out["errors"].append(f"{type(exc).__name__}: {exc}")
    finally:
        connection.close()


def mirror(name: str, seconds: float, threads: int) -> None:
    out: dict[str, Any] = {"writes": 0, "errors": []}
    deadline = time.monotonic() + seconds
    workers = [
        threading.Thread(target=_mirror_writes, args=(name, i, deadline, out))
        for i in range(threads)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    print(json.dumps(out))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["setup", "mirror"])
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--threads", type=int, default=3)
    parser.add_argument("--name", default="mirror")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "haptic_site.settings")
    django.setup()
    if args.command == "setup":
        setup()
    else:
        mirror(args.name, args.seconds, args.threads)


if __name__ == "__main__":
    main()

"""Who this replica is in the election: the pod name, else hostname_pid."""

from __future__ import annotations

import os
import socket

from config.env import environ as process_environ


def replica_identity(environ: dict[str, str] | None = None) -> str:
    env = process_environ() if environ is None else environ
    name = (env.get("POD_NAME") or "").strip()
    return name or f"{socket.gethostname()}_{os.getpid()}"

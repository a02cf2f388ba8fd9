"""Celery tasks of the controller."""

from __future__ import annotations

import os
import socket

from celery import shared_task


@shared_task(name="controller.ping")
def ping(payload: str) -> dict[str, str | int]:
    """Round-trip check: answers with the payload and which worker process handled it."""
    return {"payload": payload, "hostname": socket.gethostname(), "pid": os.getpid()}


# Leader tasks live beside the code they drive; importing registers them with Celery.
from controller import leader_tasks  # noqa: E402, F401
from controller.deploy import tasks as deploy_tasks  # noqa: E402, F401

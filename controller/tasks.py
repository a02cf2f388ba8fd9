"""Celery tasks of the controller."""

from __future__ import annotations

import os
import socket

from celery import shared_task


@shared_task(name="controller.ping")
def ping(payload: str) -> dict[str, str | int]:
    """Round-trip check: answers with the payload and which worker process handled it."""
    return {"payload": payload, "hostname": socket.gethostname(), "pid": os.getpid()}

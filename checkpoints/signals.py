"""Task history from Celery signals: every checkpoints.* task run gets a TaskRun row."""

from __future__ import annotations

import logging
from typing import Any

from celery.signals import task_failure, task_postrun, task_prerun
from django.db import DatabaseError
from django.utils import timezone

log = logging.getLogger(__name__)
PREFIX = "checkpoints."


def _ours(task: Any) -> bool:
    return bool(task is not None and str(getattr(task, "name", "")).startswith(PREFIX))


@task_prerun.connect
def on_prerun(task_id: str = "", task: Any = None, args: Any = None, **_: Any) -> None:
    if not _ours(task):
        return
    from checkpoints.models import TaskRun

    try:
        TaskRun.objects.update_or_create(
            task_id=task_id,
            defaults={
                "task_name": task.name,
                "args": repr(args)[:1000],
                "status": "started",
                "worker": str(getattr(task.request, "hostname", "") or ""),
            },
        )
    except DatabaseError:  # history must never break the task itself
        log.exception("could not record the start of task %s", task_id)


@task_postrun.connect
def on_postrun(
    task_id: str = "", task: Any = None, retval: Any = None, state: str = "", **_: Any
) -> None:
    if not _ours(task):
        return
    from checkpoints.models import TaskRun

    try:
        TaskRun.objects.filter(task_id=task_id).update(
            status=(state or "SUCCESS").lower(),
            finished_at=timezone.now(),
            result=repr(retval)[:2000],
        )
    except DatabaseError:
        log.exception("could not record the end of task %s", task_id)


@task_failure.connect
def on_failure(task_id: str = "", exception: Any = None, sender: Any = None, **_: Any) -> None:
    if not _ours(sender):
        return
    from checkpoints.models import TaskRun

    try:
        TaskRun.objects.filter(task_id=task_id).update(
            status="failure", finished_at=timezone.now(), result=repr(exception)[:2000]
        )
    except DatabaseError:
        log.exception("could not record the failure of task %s", task_id)

"""The project's Celery app for the election tests' worker subprocesses
(`celery -A tests.election.celery_app worker --leader-election`).

haptic_site/celery.py installs the elector bootstep and, at worker_init, registers the
controller's own components; these tests are about the election and the leader queue only,
so the other components (tested in their own suites) are unregistered after that.

The two leader tasks below exist only for these tests (registered by this module, never by
the product): `tests.leader.whoami` shows who consumes the leader queue, and
`tests.leader.record_marker` is a fenced side effect to observe.
"""

import os
from typing import Any

from celery import signals
from kubernetes import client

from controller.leader_tasks import Fence, leader_task
from controller.replica_runtime import LeaderComponents, ReplicaComponents, install
from haptic_site.celery import app

install(app)  # idempotent; haptic_site.celery already did it


@signals.worker_init.connect
def _only_the_election(**_: object) -> None:
    LeaderComponents.clear()
    ReplicaComponents.clear()


@leader_task("tests.leader.whoami")
def whoami(fence: Fence) -> dict[str, Any]:
    """Which replica and term ran this (used to see who consumes the leader queue)."""
    return {
        "status": "done",
        "holder": fence.token.holder,
        "epoch": fence.token.epoch,
        "pid": os.getpid(),
    }


@leader_task("tests.leader.record_marker")
def record_marker(fence: Fence, configmap: str, key: str, value: str) -> dict[str, Any]:
    """Write `key=value` into a ConfigMap of the controller namespace, fenced by the term:
    an example of the side-effect pattern every leader task follows."""
    core = client.CoreV1Api(fence.api_client)
    fence.check()  # proof right before the write
    body = {
        "data": {key: value},
        "metadata": {
            "annotations": {
                "haproxy-haptic.org/written-by": f"{fence.token.holder}@{fence.token.epoch}"
            }
        },
    }
    core.patch_namespaced_config_map(configmap, fence.token.namespace, body, _request_timeout=5.0)
    return {"status": "done", "holder": fence.token.holder, "epoch": fence.token.epoch}


__all__ = ["app"]

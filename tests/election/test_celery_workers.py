"""Real Celery workers (Redis broker) as replicas: only the leader consumes the leader
queue, a graceful stop moves consumption, and an old term's task changes nothing."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from controller.election.record import EPOCH_ANNOTATION
from controller.election.term import FencingToken
from controller.leader_tasks import send_leader_task
from devstack.stack import wait_for
from tests.conftest import REPO_ROOT
from tests.election.conftest import NAMESPACE

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]


@pytest.fixture
def celery_app() -> Any:
    from tests.election.celery_app import app

    return app


class Workers:
    def __init__(self, api_server: Any, redis_url: str, template: str, leader_queue: str):
        self.api_server = api_server
        self.redis_url = redis_url
        self.template = template
        self.leader_queue = leader_queue
        self.default_queue = f"default-{uuid.uuid4().hex[:8]}"
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, identity: str) -> subprocess.Popen[bytes]:
        env = dict(
            os.environ,
            POD_NAME=identity,
            HAPTIC_KUBECONFIG=str(self.api_server.kubeconfig),
            HAPTIC_NAMESPACE=NAMESPACE,
            HAPTIC_TEMPLATE_CONFIG=self.template,
            HAPTIC_LEADER_QUEUE=self.leader_queue,
            REDIS_URL=self.redis_url,
            DJANGO_SETTINGS_MODULE="haptic_site.settings",
            PYTHONPATH=str(REPO_ROOT),
        )
        argv = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "tests.election.celery_app",
            "worker",
            "--leader-election",
            "--pool",
            "threads",
            "-c",
            "2",
            "-Q",
            self.default_queue,  # a private default queue: the shared Redis has others
            "-n",
            f"{identity}@%h",
            "--without-gossip",
            "--without-mingle",
            "--loglevel",
            "INFO",
        ]
        proc = subprocess.Popen(argv, cwd=REPO_ROOT, env=env)
        self.procs[identity] = proc
        return proc

    def node(self, identity: str) -> str:
        return f"{identity}@{socket.gethostname()}"

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


@pytest.fixture
def workers(api_server: Any, redis_url: str, lease_name: str) -> Iterator[Workers]:
    template = f"haptic-{uuid.uuid4().hex[:8]}"
    custom = client.CustomObjectsApi(api_server.api_client())
    custom.create_namespaced_custom_object(
        "haproxy-haptic.org",
        "v1alpha1",
        NAMESPACE,
        "haproxytemplateconfigs",
        {
            "apiVersion": "haproxy-haptic.org/v1alpha1",
            "kind": "HAProxyTemplateConfig",
            "metadata": {"name": template},
            "spec": {
                "podSelector": {"matchLabels": {"app": "haproxy"}},
                "controller": {
                    "leaderElection": {
                        "leaseName": lease_name,
                        "leaseDuration": "2s",
                        "renewDeadline": "1500ms",
                        "retryPeriod": "300ms",
                    }
                },
            },
        },
    )
    group = Workers(api_server, redis_url, template, f"leader-{uuid.uuid4().hex[:8]}")
    try:
        yield group
    finally:
        group.stop_all()


def holder(api_server: Any, lease_name: str) -> tuple[str, int] | None:
    leases = client.CoordinationV1Api(api_server.api_client())
    try:
        lease = leases.read_namespaced_lease(lease_name, NAMESPACE)
    except client.exceptions.ApiException:
        return None
    name = lease.spec.holder_identity or ""
    return (name, int(lease.metadata.annotations[EPOCH_ANNOTATION])) if name else None


def leader_queue_consumers(app: Any, workers: Workers) -> set[str]:
    nodes = [workers.node(i) for i, p in workers.procs.items() if p.poll() is None]
    replies = app.control.inspect(destination=nodes, timeout=3.0).active_queues() or {}
    return {
        node.split("@")[0]
        for node, queues in replies.items()
        if any(q["name"] == workers.leader_queue for q in queues)
    }


def test_only_the_leader_consumes_and_a_handover_moves_consumption(
    api_server: Any, lease_name: str, workers: Workers, celery_app: Any
) -> None:
    procs = {name: workers.start(name) for name in ("worker-a", "worker-b")}
    first, epoch = wait_for(lambda: holder(api_server, lease_name), timeout=60)
    follower = next(name for name in procs if name != first)

    # Leader tasks without a token run under the term of whoever consumes them.
    results = [
        send_leader_task(celery_app, "tests.leader.whoami", None, queue=workers.leader_queue)
        for _ in range(4)
    ]
    answers = [r.get(timeout=60) for r in results]
    assert {a["holder"] for a in answers} == {first}
    assert {a["pid"] for a in answers} == {procs[first].pid}
    assert {a["epoch"] for a in answers} == {epoch}
    both_up = wait_for(
        lambda: (
            len(workers.procs) == 2
            and (consumers := leader_queue_consumers(celery_app, workers))
            and consumers
        ),
        timeout=30,
    )
    assert both_up == {first}, "only the leader consumes the leader queue"

    # A fenced side effect under the current term.
    core = client.CoreV1Api(api_server.api_client())
    configmap = f"marker-{uuid.uuid4().hex[:8]}"
    core.create_namespaced_config_map(NAMESPACE, {"metadata": {"name": configmap}})
    old_token = FencingToken.of(first, epoch, lease_name, NAMESPACE)
    done = send_leader_task(
        celery_app,
        "tests.leader.record_marker",
        old_token,
        configmap,
        "k",
        "v1",
        queue=workers.leader_queue,
    ).get(timeout=60)
    assert done["status"] == "done"
    assert core.read_namespaced_config_map(configmap, NAMESPACE).data == {"k": "v1"}

    # Graceful stop of the leader worker: the other takes over and consumes the queue.
    stopped_at = time.monotonic()
    procs[first].send_signal(signal.SIGTERM)
    second = wait_for(
        lambda: (h := holder(api_server, lease_name)) and h[0] == follower and h, timeout=30
    )
    handover = time.monotonic() - stopped_at
    print(f"celery graceful hand-over: {handover:.2f}s")
    assert second[1] > epoch
    assert handover < 2.0, f"hand-over through a Celery warm shutdown took {handover:.1f}s"
    assert procs[first].wait(30) == 0

    answers = [
        send_leader_task(celery_app, "tests.leader.whoami", None, queue=workers.leader_queue).get(
            timeout=60
        )
        for _ in range(3)
    ]
    assert {(a["holder"], a["pid"], a["epoch"]) for a in answers} == {
        (follower, procs[follower].pid, second[1])
    }
    assert leader_queue_consumers(celery_app, workers) == {follower}

    # A task carrying the ended term's token changes nothing.
    stale = send_leader_task(
        celery_app,
        "tests.leader.record_marker",
        old_token.to_dict(),
        configmap,
        "k",
        "stale-write",
        queue=workers.leader_queue,
    ).get(timeout=60)
    assert stale["status"] == "stale"
    assert "epoch" in stale["reason"] or "held by" in stale["reason"]
    assert core.read_namespaced_config_map(configmap, NAMESPACE).data == {"k": "v1"}


def test_sigkill_of_the_leader_worker_moves_consumption_within_lease_plus_retry(
    api_server: Any, lease_name: str, workers: Workers, celery_app: Any
) -> None:
    procs = {name: workers.start(name) for name in ("worker-c", "worker-d")}
    first, epoch = wait_for(lambda: holder(api_server, lease_name), timeout=60)
    follower = next(name for name in procs if name != first)
    # The follower worker is up and its elector has seen the leader.
    wait_for(
        lambda: celery_app.control.ping(destination=[workers.node(follower)], timeout=1.0),
        timeout=60,
    )
    time.sleep(1.0)

    killed_at = time.monotonic()
    procs[first].kill()
    procs[first].wait(10)
    second = wait_for(
        lambda: (h := holder(api_server, lease_name)) and h[0] == follower and h,
        timeout=15,
        interval=0.02,
    )
    handover = time.monotonic() - killed_at
    print(f"celery SIGKILL hand-over: {handover:.2f}s")
    assert handover <= 2.0 + 0.3 * 1.2 + 1.5, f"SIGKILL hand-over took {handover:.2f}s"
    assert second[1] == epoch + 1
    answer = send_leader_task(
        celery_app, "tests.leader.whoami", None, queue=workers.leader_queue
    ).get(timeout=60)
    assert (answer["holder"], answer["pid"]) == (follower, procs[follower].pid)
    assert leader_queue_consumers(celery_app, workers) == {follower}


def test_a_worker_cut_off_from_the_api_stops_consuming_and_resumes_in_a_new_term(
    api_server: Any, lease_name: str, workers: Workers, celery_app: Any
) -> None:
    workers.start("worker-e")
    name, epoch = wait_for(lambda: holder(api_server, lease_name), timeout=60)
    assert name == "worker-e"
    wait_for(lambda: leader_queue_consumers(celery_app, workers) == {"worker-e"}, timeout=30)

    fault = api_server.add_fault(path_regex="/leases", blackhole=True)
    try:
        # Past the renew deadline the term ends and the elector thread cancels the leader
        # queue consumer through the worker's event loop (the broker is still reachable).
        wait_for(lambda: leader_queue_consumers(celery_app, workers) == set(), timeout=15)
    finally:
        api_server.remove_fault(fault)

    # API back: a fresh election round in the same process, a new epoch, consuming again.
    wait_for(lambda: (h := holder(api_server, lease_name)) and h[1] > epoch and h, timeout=30)
    wait_for(lambda: leader_queue_consumers(celery_app, workers) == {"worker-e"}, timeout=30)
    answer = send_leader_task(
        celery_app, "tests.leader.whoami", None, queue=workers.leader_queue
    ).get(timeout=60)
    assert answer["holder"] == "worker-e" and answer["epoch"] > epoch

    # Same holder, older epoch: the lost term's work changes nothing.
    core = client.CoreV1Api(api_server.api_client())
    configmap = f"marker-{uuid.uuid4().hex[:8]}"
    core.create_namespaced_config_map(NAMESPACE, {"metadata": {"name": configmap}})
    old = FencingToken.of("worker-e", epoch, lease_name, NAMESPACE)
    stale = send_leader_task(
        celery_app,
        "tests.leader.record_marker",
        old,
        configmap,
        "k",
        "from-the-lost-term",
        queue=workers.leader_queue,
    ).get(timeout=60)
    assert stale["status"] == "stale"
    assert not core.read_namespaced_config_map(configmap, NAMESPACE).data

"""Two processes race compare-and-swap updates on one Lease: one winner per round, no lost
update."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

import kubernetes
from kubernetes.client import ApiException

ROUNDS = 1000
COUNTER = "example.com/counter"


def _racer(kubeconfig: str, namespace: str, me: str, barrier, results) -> None:
    config = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(config_file=kubeconfig, client_configuration=config)
    wins = []
    with kubernetes.client.ApiClient(config) as client:
        coord = kubernetes.client.CoordinationV1Api(client)
        for round_no in range(ROUNDS):
            lease = coord.read_namespaced_lease("race", namespace)
            barrier.wait()  # both hold the same resourceVersion now
            count = int(lease.metadata.annotations[COUNTER])
            lease.metadata.annotations[COUNTER] = str(count + 1)
            lease.spec.holder_identity = me
            try:
                coord.replace_namespaced_lease("race", namespace, lease)
                wins.append(round_no)
            except ApiException as exc:
                if exc.status != 409:
                    raise
            barrier.wait()  # the round is over for both
    results.put((me, wins))


def test_two_process_lease_cas_race(apiserver, core, namespace, client):
    coord = kubernetes.client.CoordinationV1Api(client)
    coord.create_namespaced_lease(
        namespace, {"metadata": {"name": "race", "annotations": {COUNTER: "0"}}, "spec": {}}
    )
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(2, timeout=60)
    results = ctx.Queue()
    procs = [
        ctx.Process(
            target=_racer, args=(str(Path(apiserver.kubeconfig)), namespace, name, barrier, results)
        )
        for name in ("racer-a", "racer-b")
    ]
    for p in procs:
        p.start()
    try:
        outcome = dict(results.get(timeout=240) for _ in procs)
    finally:
        for p in procs:
            p.join(30)
            if p.is_alive():
                p.kill()
                p.join()
    assert all(p.exitcode == 0 for p in procs)
    a, b = set(outcome["racer-a"]), set(outcome["racer-b"])
    assert not a & b, "two winners in one round"
    assert a | b == set(range(ROUNDS)), "a round without a winner"
    final = coord.read_namespaced_lease("race", namespace)
    assert int(final.metadata.annotations[COUNTER]) == ROUNDS == len(a) + len(b)


def _incrementer(kubeconfig: str, namespace: str, times: int, results) -> None:
    """Increment the counter `times` times with read-modify-CAS, retrying on conflict."""
    config = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(config_file=kubeconfig, client_configuration=config)
    conflicts = 0
    with kubernetes.client.ApiClient(config) as client:
        coord = kubernetes.client.CoordinationV1Api(client)
        done = 0
        while done < times:
            lease = coord.read_namespaced_lease("free", namespace)
            count = int(lease.metadata.annotations[COUNTER])
            lease.metadata.annotations[COUNTER] = str(count + 1)
            try:
                coord.replace_namespaced_lease("free", namespace, lease)
                done += 1
            except ApiException as exc:
                if exc.status != 409:
                    raise
                conflicts += 1
    results.put((done, conflicts))


def test_free_running_cas_increments_lose_nothing(apiserver, namespace, client):
    coord = kubernetes.client.CoordinationV1Api(client)
    coord.create_namespaced_lease(
        namespace, {"metadata": {"name": "free", "annotations": {COUNTER: "0"}}, "spec": {}}
    )
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    per_process = 300
    procs = [
        ctx.Process(
            target=_incrementer,
            args=(str(apiserver.kubeconfig), namespace, per_process, results),
        )
        for _ in range(2)
    ]
    for p in procs:
        p.start()
    try:
        outcome = [results.get(timeout=240) for _ in procs]
    finally:
        for p in procs:
            p.join(30)
            if p.is_alive():
                p.kill()
                p.join()
    assert all(p.exitcode == 0 for p in procs)
    final = coord.read_namespaced_lease("free", namespace)
    assert int(final.metadata.annotations[COUNTER]) == sum(d for d, _ in outcome) == 600

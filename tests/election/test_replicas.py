"""Election between replica processes against the local API server over HTTP.

Timings: lease 2 s, renew deadline 1.5 s, retry 0.3 s. Bounds below are those timings with
generous slack for a loaded two-core machine.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client

from controller.election.record import EPOCH_ANNOTATION
from devstack.stack import wait_for
from tests.election.conftest import NAMESPACE, Replica, terms_of

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

LEASE, RENEW, RETRY = 2.0, 1.5, 0.3
SLACK = 1.5  # scheduling on a busy machine, process start-up of the API calls


def lease_of(api_server: Any, name: str) -> client.V1Lease:
    return client.CoordinationV1Api(api_server.api_client()).read_namespaced_lease(name, NAMESPACE)


def the_leader(group: list[Replica]) -> Replica:
    leaders = [r for r in group if r.leading]
    assert len(leaders) <= 1, f"two replicas lead at once: {[r.identity for r in leaders]}"
    return leaders[0] if leaders else None  # type: ignore[return-value]


def watch_leaders(group: list[Replica], seconds: float) -> None:
    """Sample for `seconds`: never more than one replica reports leading."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        the_leader(group)
        time.sleep(0.02)


def all_following(group: list[Replica]) -> Replica:
    """Wait until every replica runs and has polled the Lease; returns the leader."""
    wait_for(lambda: all(r.events("ready") for r in group), timeout=30)
    time.sleep(RETRY * 3)
    return wait_for(lambda: the_leader(group), timeout=20)


def new_leader_after(group: list[Replica], since: float, timeout: float) -> tuple[Replica, float]:
    def found() -> tuple[Replica, float] | None:
        the_leader(group)
        for replica in group:
            for start in replica.events("started"):
                if start["t"] > since and replica.alive:
                    return replica, start["t"]
        return None

    return wait_for(found, timeout, interval=0.02)


def assert_safe(group: list[Replica]) -> list[dict[str, Any]]:
    terms = terms_of(group)
    epochs = [term["epoch"] for term in terms]
    assert epochs == sorted(set(epochs)), f"epochs must strictly increase per term: {terms}"
    for earlier, later in itertools.pairwise(terms):
        assert later["start"] >= earlier["end"], f"terms overlap: {earlier} and {later}"
    return terms


@pytest.mark.parametrize("count", [2, 3])
def test_one_leader_among_replicas_and_sigkill_hands_over_within_lease_plus_retry(
    api_server: Any, lease_name: str, replicas: Callable[..., Replica], count: int
) -> None:
    group = [replicas(f"replica-{i}", LEASE, RENEW, RETRY) for i in range(count)]
    first = all_following(group)
    watch_leaders(group, 2.5)  # several renewals: still exactly one
    assert the_leader(group) is first
    lease = lease_of(api_server, lease_name)
    assert lease.spec.holder_identity == first.identity
    first_epoch = int(lease.metadata.annotations[EPOCH_ANNOTATION])

    killed_at = first.kill()
    second, started = new_leader_after(group, killed_at, timeout=LEASE + RETRY + SLACK + 3)
    assert second is not first
    handover = started - killed_at
    assert handover <= LEASE + RETRY * 1.2 + SLACK, f"SIGKILL hand-over took {handover:.2f}s"
    watch_leaders(group, 1.0)

    lease = lease_of(api_server, lease_name)
    assert lease.spec.holder_identity == second.identity
    assert int(lease.metadata.annotations[EPOCH_ANNOTATION]) == first_epoch + 1
    terms = assert_safe(group)
    assert [t["holder"] for t in terms][-1] == second.identity


def test_graceful_stop_hands_over_within_one_second_and_epochs_increase(
    api_server: Any, lease_name: str, replicas: Callable[..., Replica]
) -> None:
    group = [replicas(f"replica-{i}", LEASE, RENEW, RETRY) for i in range(3)]
    all_following(group)
    epochs = []
    for _ in range(2):
        leader = the_leader(group)
        epochs.append(int(lease_of(api_server, lease_name).metadata.annotations[EPOCH_ANNOTATION]))
        sent = leader.terminate()
        successor, started = new_leader_after(group, sent, timeout=5)
        assert successor is not leader
        assert started - sent <= 1.0, f"graceful hand-over took {started - sent:.2f}s"
        leader.proc.wait(10)
        assert leader.events("stopped")[-1]["reason"] == "graceful_shutdown"
        assert leader.events("exited"), "the stopped replica exits cleanly"
    epochs.append(int(lease_of(api_server, lease_name).metadata.annotations[EPOCH_ANNOTATION]))
    assert epochs == sorted(set(epochs)) and len(epochs) == 3
    assert_safe(group)


def test_a_follower_takes_a_released_lease_before_its_next_retry(
    api_server: Any, lease_name: str, replicas: Callable[..., Replica]
) -> None:
    """The Lease watch wakes the follower: the read that acquires the released Lease comes
    sooner after the follower's previous read than any retry could (a retry waits at least
    the retry period; jitter only lengthens it). Long retry period, so a retry cannot pass
    for a wake-up."""
    lease, renew, retry = 30.0, 20.0, 10.0
    leader = replicas("watch-0", lease, renew, retry)
    wait_for(lambda: leader.leading, timeout=20)
    follower = replicas("watch-1", lease, renew, retry)
    wait_for(lambda: follower.events("read"), timeout=20)  # it saw the Lease held
    sent = leader.terminate()
    started = wait_for(lambda: follower.events("started"), timeout=2 * retry)[-1]
    reads = [r["t"] for r in follower.events("read") if r["t"] <= started["t"]]
    assert len(reads) >= 2, f"the follower acquired without reading the released Lease: {reads}"
    woke_after = reads[-1] - reads[-2]
    assert woke_after < retry, (
        f"the acquiring read came {woke_after:.2f}s after the previous one: a retry, not the watch"
    )
    # The order of the hand-over: the old term ended (gracefully) before the new one began.
    leader.proc.wait(10)
    stopped = leader.events("stopped")[-1]
    assert stopped["reason"] == "graceful_shutdown"
    assert sent <= stopped["t"] <= started["t"]
    assert started["epoch"] == leader.events("started")[-1]["epoch"] + 1
    assert_safe([leader, follower])


def test_same_identity_reacquiring_after_a_restart_gets_a_new_epoch(
    api_server: Any, lease_name: str, replicas: Callable[..., Replica]
) -> None:
    first = replicas("pod-a", LEASE, RENEW, RETRY)
    wait_for(lambda: first.leading, timeout=20)
    epoch = first.events("started")[-1]["epoch"]
    first.kill()
    # The same POD_NAME comes back (a restarted container): the Lease still names it, and
    # taking it back starts a new term with a new epoch.
    again = replicas("pod-a", LEASE, RENEW, RETRY)
    wait_for(lambda: again.leading, timeout=20)
    assert again.events("started")[-1]["epoch"] == epoch + 1
    lease = lease_of(api_server, lease_name)
    assert lease.spec.holder_identity == "pod-a"
    assert lease.metadata.annotations[EPOCH_ANNOTATION] == str(epoch + 1)


def test_lease_events_are_recorded(
    api_server: Any, lease_name: str, replicas: Callable[..., Replica]
) -> None:
    group = [replicas(f"ev-{i}", LEASE, RENEW, RETRY) for i in range(2)]
    leader = all_following(group)
    sent = leader.terminate()
    new_leader_after(group, sent, timeout=5)
    core = client.CoreV1Api(api_server.api_client())

    def reasons() -> set[str]:
        events = core.list_namespaced_event(NAMESPACE).items
        return {
            e.reason
            for e in events
            if e.involved_object.name == lease_name and e.involved_object.kind == "Lease"
        }

    wanted = {"LeaderElectionStarted", "BecameLeader", "LostLeadership", "NewLeaderObserved"}
    try:
        wait_for(lambda: wanted <= reasons(), timeout=10)
    except TimeoutError:
        raise AssertionError(f"events on the Lease: {reasons()}") from None


def test_a_recreated_lease_does_not_restart_the_epoch(
    api_server: Any, lease_name: str, replicas: Callable[..., Replica]
) -> None:
    group = [replicas(f"rc-{i}", LEASE, RENEW, RETRY) for i in range(2)]
    leader = all_following(group)
    sent = leader.terminate()  # one hand-over: epoch 2
    new_leader_after(group, sent, timeout=5)
    before = int(lease_of(api_server, lease_name).metadata.annotations[EPOCH_ANNOTATION])
    assert before >= 2
    # Someone deletes the Lease: the running replica recreates it above what it saw.
    client.CoordinationV1Api(api_server.api_client()).delete_namespaced_lease(lease_name, NAMESPACE)
    lease = wait_for(lambda: _lease_or_none(api_server, lease_name), timeout=10)
    assert int(lease.metadata.annotations[EPOCH_ANNOTATION]) > before
    assert_safe(group)


def _lease_or_none(api_server: Any, name: str) -> client.V1Lease | None:
    try:
        return lease_of(api_server, name)
    except client.exceptions.ApiException:
        return None

"""Lease reads, guards, the hub elector and the epoch claim against a real local API server."""

from __future__ import annotations

import socket
import threading
import time

import pytest
from kubernetes import client

from controller.election import ElectionTiming, LeaderElector
from controller.election.lease_store import KubeLeaseStore
from controller.election.rounds import ElectionSupervisor
from controller.hub.config import HaMode, HubConfig
from controller.hub.elector import HubElector, LeaseHeld
from controller.hub.epoch import EpochClaim
from controller.hub.guards import attempt as run
from controller.hub.guards import self_healthy
from controller.hub.hub import _self_check
from controller.hub.leases import EPOCH_ANNOTATION, LeaseNotFound, read_lease
from controller.kubeclient import bounded_copy


def _elector(cluster, ns: str, identity: str, **kw) -> HubElector:
    timings = {"lease_duration": 2.0, "renew_deadline": 1.2, "retry_period": 0.2}
    timings.update(kw)
    return HubElector(
        cluster.client, namespace=ns, name="haptic-hub", identity=identity,
        request_timeout=0.5, **timings,
    )  # fmt: skip


def test_bounded_read(clusters, ns) -> None:
    a, _ = clusters
    _elector(a, ns, "hub-a").try_acquire_or_renew()
    a.api.add_fault(path_regex="/leases", blackhole=True)
    started = time.monotonic()
    with pytest.raises(Exception):  # noqa: B017 - any transport error will do
        read_lease(a.client, ns, "haptic-hub", 1.0)
    # One dial timeout: not four (urllib3's default retries), nor the OS TCP timeout.
    assert time.monotonic() - started < 2.0


def test_hub_clients_are_bounded_copies(clusters, ns) -> None:
    a, _ = clusters
    controllers_client = a.api.api_client()  # as the controller builds it: unbounded
    try:
        policy = controllers_client.configuration.retries
        hub_client = bounded_copy(controllers_client)
        assert hub_client is not controllers_client
        assert controllers_client.configuration.retries is policy  # untouched
        a.api.add_fault(path_regex="/leases", blackhole=True)
        started = time.monotonic()
        _, error = run(lambda: read_lease(hub_client, ns, "haptic-hub", 1.0))
        assert error is not None
        assert time.monotonic() - started < 2.0  # the default client takes four timeouts
        hub_client.close()
    finally:
        controllers_client.close()


def test_bounded_read_against_a_silent_socket() -> None:
    # A listener that accepts and never answers: the case of a powered-off peer behind a
    # load balancer, with nothing to break the connection.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except OSError:
                continue

    t = threading.Thread(target=accept)
    t.start()
    configuration = client.Configuration()
    configuration.host = f"http://127.0.0.1:{listener.getsockname()[1]}"
    api_client = bounded_copy(client.ApiClient(configuration))
    try:
        started = time.monotonic()
        _, error = run(lambda: read_lease(api_client, "haptic", "haptic-hub", 1.0))
        assert error is not None
        assert time.monotonic() - started < 2.0
    finally:
        stop.set()
        t.join(5)
        for s in accepted:
            s.close()
        listener.close()
        api_client.close()


class TestSelfHealthy_NotFoundCountsAsHealthy:
    """Seed 004, through a real API server: NotFound is healthy, 503 and a black hole are not."""

    def test_through_the_api(self, clusters, ns) -> None:
        _, b = clusters
        config = HubConfig(mode=HaMode.ACTIVE, identity="hub-b", namespace=ns,
                           promotion_dial_timeout=0.5)  # fmt: skip
        _, error = run(lambda: _self_check(b.client, config))
        assert isinstance(error, LeaseNotFound)
        assert self_healthy(error)
        b.api.add_fault(path_regex="/leases", status=503)
        _, error = run(lambda: _self_check(b.client, config))
        assert not self_healthy(error)
        b.api.clear_faults()
        b.api.add_fault(path_regex="/leases", blackhole=True)
        _, error = run(lambda: _self_check(b.client, config))
        assert not self_healthy(error)


def test_elector_renews_and_loses_after_renew_deadline_without_exiting(clusters, ns) -> None:
    a, _ = clusters
    elector = _elector(a, ns, "hub-a")
    elector.start()
    try:
        _until(elector.is_leader)
        first = read_lease(a.client, ns, "haptic-hub", 2).renew_time
        _until(lambda: read_lease(a.client, ns, "haptic-hub", 2).renew_time != first)
        a.api.add_fault(path_regex="/leases", blackhole=True)
        _until(lambda: not elector.is_leader())
        assert elector.running  # did not exit
        a.api.clear_faults()
        _until(elector.is_leader)  # and took its own Lease back
    finally:
        elector.stop(release=True)
    assert read_lease(a.client, ns, "haptic-hub", 2).holder == ""


def test_acquire_once_refuses_a_live_lease_of_another_hub(clusters, ns) -> None:
    a, _ = clusters
    holder = _elector(a, ns, "hub-a", lease_duration=30, renew_deadline=20, retry_period=5)
    assert holder.try_acquire_or_renew()
    with pytest.raises(LeaseHeld):
        _elector(a, ns, "hub-b").acquire_once()


def test_epoch_claim_only_raises(clusters, ns) -> None:
    _, b = clusters
    claim = EpochClaim(b.client, namespace=ns, lease_name="haptic-leader", request_timeout=2)
    assert claim(5) == 5  # creates the Lease carrying the floor
    assert read_lease(b.client, ns, "haptic-leader", 2).epoch == 5
    assert claim(3) == 5  # never lowered
    assert claim(9) == 9 and claim.claimed == 9
    lease = client.CoordinationV1Api(b.client).read_namespaced_lease("haptic-leader", ns)
    assert lease.metadata.annotations[EPOCH_ANNOTATION] == "9"


def test_epoch_claim_hands_the_controller_a_new_term_at_once(clusters, ns) -> None:
    """The promoted side's controller elector, fenced in a low-epoch term, starts a term
    above the claimed floor as soon as it is asked to recheck, not a retry period later."""
    _, b = clusters
    store = KubeLeaseStore(b.client, ns, "haptic-leader")
    timing = ElectionTiming(lease_duration=30.0, renew_deadline=20.0, retry_period=10.0)
    elector = LeaderElector(store, "controller-b-0", timing)
    supervisor = ElectionSupervisor(elector).start()
    try:
        _until(lambda: elector.is_leader())
        fenced = elector.term
        assert fenced is not None and fenced.token.epoch == 1
        claim = EpochClaim(b.client, namespace=ns, lease_name="haptic-leader", request_timeout=2)
        assert claim(42) == 42
        asked = time.monotonic()
        elector.recheck()
        _until(lambda: elector.is_leader() and elector.term.token.epoch > 42, timeout=8.0)
        assert not fenced.is_valid()
        # Well inside one retry period: neither the renew wait nor the supervisor's back-off.
        assert time.monotonic() - asked < timing.retry_period / 2
        assert read_lease(b.client, ns, "haptic-leader", 2).epoch == 43
    finally:
        supervisor.stop(timeout=10)


def _until(predicate, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError("condition not reached")

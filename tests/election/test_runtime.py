"""The replica runtime (what the worker bootstep starts) against the local API server:
leader components start per term with its token, drain on a graceful stop while the term
still renews, and stop on loss before the lease could pass; all-replica components start
once per process."""

from __future__ import annotations

import time
from typing import Any

import pytest

from controller.election.timing import ElectionSettings, ElectionTiming
from controller.fencing import check_term
from controller.replica_runtime import (
    LeaderComponents,
    ReplicaComponents,
    ReplicaRuntime,
    RuntimeConfig,
)
from devstack.stack import wait_for
from tests.election.conftest import NAMESPACE

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(90)]

TIMING = ElectionTiming(lease_duration=3.0, renew_deadline=1.5, retry_period=0.3)


def test_components_follow_terms(api_server: Any, lease_name: str, registries: None) -> None:
    log: list[tuple[str, Any, float]] = []
    api = api_server.api_client()

    def start(term: Any) -> None:
        # The token handed to leader work is the Lease's current term.
        assert check_term(api, term.token)
        log.append(("start", term, time.monotonic()))

    LeaderComponents.register(
        start,
        lambda term: log.append(("stop", term, time.monotonic())),
        name="probe",
        drain_fn=lambda term: log.append(("drain", term.is_valid(), time.monotonic())),
    )
    ReplicaComponents.register(
        lambda rt: log.append(("replica-start", rt.identity, 0.0)),
        lambda rt: log.append(("replica-stop", rt.identity, 0.0)),
    )
    cfg = RuntimeConfig("runtime-a", NAMESPACE, "unused", "leader-unused", "")
    runtime = ReplicaRuntime(cfg, api, ElectionSettings(lease_name=lease_name, timing=TIMING))
    runtime.start()
    try:
        wait_for(lambda: any(kind == "start" for kind, *_ in log), timeout=20)
        first = runtime.current_term()
        assert first is not None and runtime.current_token() == first.token
        assert first.token.lease_name == lease_name and first.token.holder == "runtime-a"

        # Cut off from the API server past the renew deadline: leader work stops in time.
        fault = api_server.add_fault(path_regex="/leases", blackhole=True)
        try:
            wait_for(lambda: any(kind == "stop" for kind, *_ in log), timeout=10)
            (_, stopped_term, stopped_at) = next(e for e in log if e[0] == "stop")
            assert stopped_term is first
            assert stopped_at < first.valid_until - TIMING.renew_deadline + TIMING.lease_duration
            assert runtime.current_term() is None and runtime.current_token() is None
        finally:
            api_server.remove_fault(fault)

        # Back online: a fresh term in the same process, components started again.
        wait_for(lambda: [kind for kind, *_ in log].count("start") == 2, timeout=15)
        second = runtime.current_term()
        assert second is not None and second.token.epoch > first.token.epoch
    finally:
        runtime.shutdown()
    kinds = [kind for kind, *_ in log]
    assert kinds == [
        "replica-start",
        "start",
        "stop",
        "start",
        "drain",
        "stop",
        "replica-stop",
    ]
    drain = next(e for e in log if e[0] == "drain")
    assert drain[1] is True, "the drain runs while the term still renews"
    lease = runtime.store.get(timeout=5)
    assert lease is not None and lease.released and lease.epoch == second.token.epoch

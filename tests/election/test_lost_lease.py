"""A leader cut off from the API server (black-holed longer than the renew deadline) stops
its leader work before the lease could pass to anyone else, then re-enters election."""

from __future__ import annotations

import time
from typing import Any

import pytest

from controller.election.elector import RENEW_DEADLINE
from controller.election.timing import ElectionTiming
from devstack.stack import wait_for
from tests.election.inproc import member

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(90)]

TIMING = ElectionTiming(lease_duration=3.0, renew_deadline=1.5, retry_period=0.3)


def test_black_holed_leader_stops_work_before_the_lease_could_expire_and_reelects(
    api_server: Any, lease_name: str
) -> None:
    group = [member(api_server, lease_name, f"m{i}", TIMING) for i in range(2)]
    for m in group:
        m.supervisor.start()
    try:
        leader = wait_for(lambda: next((m for m in group if m.elector.is_leader()), None), 20)
        time.sleep(1.0)  # a few renewals
        term = leader.elector.term
        assert term is not None and term.is_valid()
        epoch = term.token.epoch

        fault = api_server.add_fault(path_regex="/leases", blackhole=True)
        cut_at = time.monotonic()
        try:
            wait_for(lambda: leader.stopped, timeout=TIMING.renew_deadline + 5)
            ended, reason, stopped_at = leader.stopped[-1]
            assert ended is term and reason == RENEW_DEADLINE
            # The last successful renewal was sent at valid_until - renew_deadline; no other
            # replica can take the lease before that plus the lease duration.
            last_renewal_sent = term.valid_until - TIMING.renew_deadline
            earliest_takeover = last_renewal_sent + TIMING.lease_duration
            assert stopped_at < earliest_takeover
            assert stopped_at - cut_at <= TIMING.renew_deadline + 1.0
            last_tick = max(t for t, e in leader.work if e == epoch)
            assert last_tick < term.valid_until < earliest_takeover
            assert not any(m.elector.is_leader() for m in group)
            time.sleep(TIMING.renew_deadline)  # stay cut off well past the renew deadline
        finally:
            api_server.remove_fault(fault)

        # Back online: a new term (either replica), with a new epoch, after the old one.
        def new_term() -> Any:
            for m in group:
                t = m.elector.term
                if t is not None and t.is_valid() and t.token.epoch > epoch:
                    return t
            return None

        successor = wait_for(new_term, timeout=TIMING.lease_duration + 10)
        assert successor.started_at > stopped_at
        assert leader.supervisor.rounds >= 2, "the cut-off replica re-entered election"
        work_epochs = sorted({e for m in group for _, e in m.work})
        assert work_epochs[0] == epoch and work_epochs[-1] == successor.token.epoch
    finally:
        for m in group:
            m.supervisor.stop(timeout=10)

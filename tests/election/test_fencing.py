"""check_term against the local API server: only the current term's token passes."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import pytest
from prometheus_client import generate_latest

from controller.election.term import FencingToken
from controller.election.timing import ElectionTiming
from controller.fencing import StaleTerm, check_term
from devstack.stack import wait_for
from tests.election.conftest import NAMESPACE
from tests.election.inproc import member

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]

TIMING = ElectionTiming(lease_duration=2.0, renew_deadline=1.5, retry_period=0.3)


def test_only_the_current_terms_token_passes(api_server: Any, lease_name: str) -> None:
    api = api_server.api_client()
    a = member(api_server, lease_name, "a", TIMING)
    a.supervisor.start()
    try:
        wait_for(a.elector.is_leader, 20)
        term = a.elector.term
        assert term is not None
        token = term.token
        assert token == FencingToken.of("a", token.epoch, lease_name, NAMESPACE)
        assert check_term(api, token) is True
        assert check_term(api, token.to_dict()) is True  # as Celery tasks carry it

        for stale, why in [
            (replace(token, term=replace(token.term, epoch=token.epoch - 1)), "epoch"),
            (replace(token, term=replace(token.term, epoch=token.epoch + 1)), "epoch"),
            (replace(token, term=replace(token.term, holder="b")), "held by a"),
            (replace(token, lease_name="no-such-lease"), "does not exist"),
        ]:
            with pytest.raises(StaleTerm, match=why):
                check_term(api, stale)

        # An unreachable API server proves nothing: refuse, within the timeout.
        fault = api_server.add_fault(path_regex=f"/leases/{lease_name}$", blackhole=True)
        try:
            began = time.monotonic()
            with pytest.raises(StaleTerm, match="cannot read"):
                check_term(api, token, timeout=0.5)
            assert time.monotonic() - began < 5
        finally:
            api_server.remove_fault(fault)
    finally:
        a.supervisor.stop(timeout=10)
    # After a graceful stop the Lease is released: the old token is refused.
    with pytest.raises(StaleTerm, match="released"):
        check_term(api, token)
    assert a.stopped[-1][1] == "graceful_shutdown"


def test_metrics_follow_the_term(api_server: Any, lease_name: str) -> None:
    a = member(api_server, lease_name, "solo", TIMING)
    a.supervisor.start()
    try:
        wait_for(a.elector.is_leader, 20)
        time.sleep(0.8)
        text = generate_latest(a.registry).decode()
        assert "haptic_leader_election_is_leader 1.0" in text
        assert "haptic_leader_election_transitions_total 1.0" in text
    finally:
        a.supervisor.stop(timeout=10)
    text = generate_latest(a.registry).decode()
    assert "haptic_leader_election_is_leader 0.0" in text
    assert "haptic_leader_election_transitions_total 2.0" in text
    seconds = a.registry.get_sample_value("haptic_leader_election_time_as_leader_seconds_total")
    assert seconds is not None and 0.5 < seconds < 30

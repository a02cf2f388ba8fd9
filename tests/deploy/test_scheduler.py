"""The deployment scheduler: coalescing, pacing, draining, term reset."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from controller.deploy.scheduler import DeploymentScheduler, Dispatch, Idle, WaitUntil


def test_back_to_back_renders_coalesce_to_the_newest() -> None:
    s: DeploymentScheduler[str] = DeploymentScheduler(min_interval=1.0)
    s.submit("p1", "out1")
    first = s.next_action(0.0)
    assert first == Dispatch("p1", "out1")
    s.submit("p2", "out2")
    s.submit("p3", "out3")
    assert s.next_action(0.1) == Idle()  # p1 still in flight
    s.completed("p1")
    assert s.next_action(0.2) == WaitUntil(1.0)  # paced
    assert s.next_action(1.0) == Dispatch("p3", "out3")
    assert s.coalesced == 1


def test_drain_dispatches_nothing_but_the_last_dispatched_plan() -> None:
    s: DeploymentScheduler[str] = DeploymentScheduler(min_interval=0.0)
    s.submit("p1", "o1")
    assert isinstance(s.next_action(0.0), Dispatch)
    s.submit("p2", "o2")
    s.begin_drain()
    s.completed("p1")
    assert s.next_action(1.0) == Idle()  # p2 was dropped
    assert not s.submit("p3", "o3")
    assert s.submit("p1", "o1")  # the last dispatched plan may be followed up
    assert s.next_action(2.0) == Dispatch("p1", "o1")


def test_reset_clears_every_candidate() -> None:
    s: DeploymentScheduler[str] = DeploymentScheduler(min_interval=5.0)
    s.submit("p1", "o1")
    s.next_action(0.0)
    s.submit("p2", "o2")
    s.reset()
    assert s.next_action(0.1) == Idle()
    assert s.last_dispatched is None
    s.submit("p3", "o3")
    assert s.next_action(0.2) == Dispatch("p3", "o3")  # no pacing carried across terms


@given(
    st.lists(st.tuples(st.sampled_from(["submit", "tick", "done"]), st.integers(0, 5)), max_size=40)
)
def test_scheduler_properties(ops) -> None:
    s: DeploymentScheduler[int] = DeploymentScheduler(min_interval=1.0)
    now = 0.0
    last_submitted = None
    dispatch_times: list[float] = []
    for op, n in ops:
        now += 0.4
        if op == "submit":
            s.submit(f"p{n}", n)
            last_submitted = f"p{n}"
        elif op == "tick":
            action = s.next_action(now)
            if isinstance(action, Dispatch):
                # Never two in flight, and only the newest submission is dispatched.
                assert action.plan_id == last_submitted
                dispatch_times.append(now)
        elif s.in_flight is not None:
            s.completed(s.in_flight.plan_id)
    assert all(b - a >= 1.0 - 1e-9 for a, b in itertools.pairwise(dispatch_times))

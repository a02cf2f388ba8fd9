"""The hub elector judges its own cluster's Lease by the election package's rule (expiry
from when a record was first seen unchanged, by the local monotonic clock), so a hub whose
wall clock is skewed can never take a live hub Lease.

Explored over interleavings of two hubs' attempts, crashes and time, with wall clocks that
disagree by up to an hour; and once against the real local API server.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.hub.elector import HubElector
from tests.election.fakes import FakeClock, FakeLeaseStore

LEASE, DEADLINE, RETRY = 4.0, 2.5, 0.5


class SkewedClock:
    """One shared monotonic time line; each hub's wall clock off by its own skew."""

    def __init__(self, base: FakeClock, skew_seconds: float) -> None:
        self.base = base
        self.skew = timedelta(seconds=skew_seconds)

    def monotonic(self) -> float:
        return self.base.monotonic()

    def wall(self) -> datetime:
        return self.base.wall() + self.skew

    def wait(self, event: threading.Event, timeout: float) -> bool:
        return self.base.wait(event, timeout)


def _hub(store: FakeLeaseStore, clock: SkewedClock, identity: str) -> HubElector:
    return HubElector(
        None,  # type: ignore[arg-type]  # the store stands in for the API
        namespace="haptic",
        name="haptic-hub",
        identity=identity,
        lease_duration=LEASE,
        renew_deadline=DEADLINE,
        retry_period=RETRY,
        request_timeout=0.5,
        clock=clock,
        store=store,
    )


STEP = st.one_of(
    st.tuples(st.just("tick"), st.integers(0, 1)),
    st.tuples(st.just("crash"), st.integers(0, 1)),  # stops renewing; the Lease just ages
    st.tuples(st.just("restart"), st.integers(0, 1)),
    st.tuples(st.just("advance"), st.floats(0.0, 3.0)),
)


@settings(max_examples=300, deadline=None)
@given(
    skews=st.tuples(st.floats(-3600, 3600), st.floats(-3600, 3600)),
    steps=st.lists(STEP, max_size=60),
)
def test_never_two_hub_leaders(skews: tuple[float, float], steps: list) -> None:
    base = FakeClock()
    store = FakeLeaseStore(base, name="haptic-hub")
    clocks = [SkewedClock(base, skews[0]), SkewedClock(base, skews[1])]
    hubs = [_hub(store, clocks[i], f"hub-{i}") for i in range(2)]
    alive = [True, True]
    for action, arg in steps:
        if action == "tick" and alive[arg]:
            hubs[arg].tick()
        elif action == "crash":
            alive[arg] = False
        elif action == "restart" and not alive[arg]:
            hubs[arg] = _hub(store, clocks[arg], f"hub-{arg}")
            alive[arg] = True
        elif action == "advance":
            base.advance(arg)
        # A crashed hub's process is gone; a live one must not believe it leads while the
        # other does.
        leaders = [i for i in range(2) if alive[i] and hubs[i].is_leader()]
        assert len(leaders) <= 1, (leaders, store.record)


def test_a_hub_ahead_by_an_hour_does_not_take_a_live_lease() -> None:
    base = FakeClock()
    store = FakeLeaseStore(base, name="haptic-hub")
    active = _hub(store, SkewedClock(base, 0), "hub-a")
    ahead = _hub(store, SkewedClock(base, 3600), "hub-b")
    assert active.try_acquire_or_renew()
    for _ in range(20):
        base.advance(RETRY)
        assert active.try_acquire_or_renew()
        assert not ahead.try_acquire_or_renew()
    # Once the Active stops renewing, the other takes over after a full lease duration.
    base.advance(LEASE + RETRY)
    assert ahead.try_acquire_or_renew()
    assert store.record is not None and store.record.holder == "hub-b"


def test_skewed_hub_against_the_api_server(clusters, ns) -> None:
    a, _ = clusters
    from controller.election.clock import SYSTEM_CLOCK

    class Ahead:
        def monotonic(self) -> float:
            return SYSTEM_CLOCK.monotonic()

        def wall(self) -> datetime:
            return SYSTEM_CLOCK.wall() + timedelta(hours=1)

        def wait(self, event: threading.Event, timeout: float) -> bool:
            return SYSTEM_CLOCK.wait(event, timeout)

    def hub(identity: str, **kw) -> HubElector:
        return HubElector(
            a.client, namespace=ns, name="haptic-hub", identity=identity, lease_duration=30,
            renew_deadline=20, retry_period=5, request_timeout=2, **kw,
        )  # fmt: skip

    assert hub("hub-a").try_acquire_or_renew()
    assert not hub("hub-b", clock=Ahead()).try_acquire_or_renew()

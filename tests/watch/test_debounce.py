"""Reconciler debounce: the pure decision core (hypothesis) and the thread driver."""

from __future__ import annotations

import threading

from hypothesis import given
from hypothesis import strategies as st

from controller.reconciler import DebounceConfig, Debouncer, Reconciler, Trigger
from devstack.stack import wait_for

CONFIG = DebounceConfig(
    default_delay=0.2, delays={"endpointslices": 0.0, "pods": 0.0}, max_wait=1.0
)
KINDS = ["ingresses", "services", "secrets", "endpointslices", "pods", "haproxy-pods"]


def test_a_burst_becomes_one_trigger_after_the_quiet_period():
    d = Debouncer(CONFIG)
    for i in range(5):
        d.observe("ingresses", 10.0 + 0.05 * i)
    last = 10.2
    assert d.deadline() == last + 0.2
    assert d.poll(last + 0.19) is None
    trig = d.poll(last + 0.2)
    assert trig == Trigger(frozenset({"ingresses"}), "debounced", 5)
    assert d.poll(100.0) is None and d.deadline() is None


def test_endpointslices_do_not_wait_and_carry_pending_kinds_along():
    d = Debouncer(CONFIG)
    d.observe("ingresses", 1.0)
    d.observe("endpointslices", 1.05)
    trig = d.poll(1.05)
    assert trig is not None and trig.kinds == {"ingresses", "endpointslices"}
    assert trig.events == 2


def test_continuous_churn_is_bounded_by_max_wait():
    d = Debouncer(CONFIG)
    t = 0.0
    fired = []
    while t < 3.0:
        d.observe("services", t)
        trig = d.poll(t)
        if trig:
            fired.append(t)
        t = round(t + 0.1, 3)
    # Changes every 100 ms never give 200 ms of quiet, yet a render happens every max_wait.
    assert fired and fired[0] == 1.0 and len(fired) >= 2


def test_ignored_kinds_and_immediate_triggers():
    d = Debouncer(CONFIG)
    assert d.observe("haproxy-pods", 0.0) is False
    assert d.deadline() is None
    d.observe("ingresses", 0.0)
    d.observe("leader", 0.01, immediate=True)
    trig = d.poll(0.01)
    assert trig.reason == "immediate" and trig.kinds == {"ingresses", "leader"}


events_st = st.lists(
    st.tuples(st.floats(0.0, 0.5), st.sampled_from(KINDS), st.booleans()), max_size=40
)


@given(events_st)
def test_every_change_is_covered_by_exactly_one_timely_trigger(events):
    """Drive the core like the thread does (poll at each observation and at each deadline)
    and check: nothing is lost, nothing fires early, nothing waits past its bound."""
    d = Debouncer(CONFIG)
    now = 0.0
    observed = 0
    pending_since: dict[str, float] = {}
    fired: list[tuple[float, Trigger]] = []

    def advance_to(t: float) -> None:
        nonlocal now
        while (dl := d.deadline()) is not None and dl <= t:
            if dl > now:
                assert d.poll(now) is None  # never before the deadline
            now = max(now, dl)
            trig = d.poll(now)
            assert trig is not None
            for k in trig.kinds:
                # No kind waits longer than max_wait from its first pending change.
                assert now - pending_since.pop(k) <= CONFIG.max_wait + 1e-9
            fired.append((now, trig))
        now = t

    for gap, kind, immediate in events:
        advance_to(now + gap)
        if d.observe(kind, now, immediate=immediate and kind == "ingresses"):
            observed += 1
            pending_since.setdefault(kind, now)
    advance_to(now + 10.0)
    assert sum(t.events for _, t in fired) == observed
    assert not d.pending and not pending_since
    assert all("haproxy-pods" not in t.kinds for _, t in fired)


def test_driver_coalesces_a_burst_and_bypasses_debounce_for_endpointslices():
    got: list[Trigger] = []
    # Long debounce for ingresses: the trigger below can only come from the EndpointSlice.
    cfg = DebounceConfig(default_delay=60.0, delays={"endpointslices": 0.0}, max_wait=120.0)
    r = Reconciler(got.append, cfg).start()
    try:
        for _ in range(20):
            r.notify("ingresses")
        r.notify("endpointslices")
        wait_for(lambda: len(got) == 1, 10)
        assert got[0].kinds == {"ingresses", "endpointslices"} and got[0].events == 21
    finally:
        assert r.stop()
    assert len(got) == 1


def test_driver_fires_after_quiet_period_and_survives_a_failing_callback():
    calls: list[Trigger] = []
    done = threading.Event()

    def callback(trig: Trigger) -> None:
        calls.append(trig)
        if len(calls) == 1:
            raise RuntimeError("render exploded")
        done.set()

    r = Reconciler(callback, DebounceConfig(default_delay=0.05, max_wait=0.5)).start()
    try:
        r.notify("services")
        wait_for(lambda: len(calls) == 1, 10)
        r.trigger_now("leader")
        assert done.wait(10)
        assert calls[1].reason == "immediate" and r.fired == 2
    finally:
        assert r.stop()

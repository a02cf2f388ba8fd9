"""Per-term leader components (TermWork): start order, stop once in reverse, slow starts."""

from __future__ import annotations

import threading
import time

import pytest

from controller.election.term import FencingToken, Term
from controller.replica_runtime import TermWork, _Component

pytestmark = pytest.mark.timeout(30)


def live_term() -> Term:
    return Term(FencingToken.of("a", 7, "haptic-leader", "haptic"), time.monotonic() + 60)


def test_start_in_order_stop_once_in_reverse() -> None:
    calls: list[str] = []
    term = live_term()
    components = [
        _Component(
            n,
            lambda t, n=n: calls.append(f"start {n} {t.token.epoch}"),
            lambda t, n=n: calls.append(f"stop {n}"),
        )
        for n in ("x", "y")
    ]
    work = TermWork(term, components, "a")
    work.start()
    work.drain(timeout=5)  # nothing to drain; waits for the starts
    term.end("lost")
    work.stop()
    work.stop()  # idempotent
    assert calls == ["start x 7", "start y 7", "stop y", "stop x"]


def test_a_slow_start_is_undone_when_it_returns_after_the_term_stopped() -> None:
    calls: list[str] = []
    release = threading.Event()
    term = live_term()

    def slow_start(t: Term) -> None:
        calls.append("start slow")
        release.wait(10)

    components = [
        _Component("slow", slow_start, lambda t: calls.append("stop slow")),
        _Component(
            "next", lambda t: calls.append("start next"), lambda t: calls.append("stop next")
        ),
    ]
    work = TermWork(term, components, "a")
    work.start()
    time.sleep(0.1)
    term.end("lost")
    began = time.monotonic()
    work.stop(start_wait=0.2)
    assert time.monotonic() - began < 2, "stop does not wait for a stuck start"
    assert calls == ["start slow"]
    release.set()
    deadline = time.monotonic() + 5
    while "stop slow" not in calls and time.monotonic() < deadline:
        time.sleep(0.01)
    assert calls == ["start slow", "stop slow"], "undone at once; later components never start"


def test_drain_runs_only_while_the_term_is_valid() -> None:
    drained: list[bool] = []
    term = live_term()
    component = _Component("d", lambda t: None, None, lambda t: drained.append(t.is_valid()))
    work = TermWork(term, [component], "a")
    work.start()
    work.drain(timeout=5)
    term.end("lost")
    work.drain(timeout=5)
    assert drained == [True]


def test_a_token_names_its_term_as_the_retained_state_records_it() -> None:
    from controller.retained.intent import Claim, claim_outranks

    token = FencingToken.of("a", 7, "haptic-leader", "haptic")
    assert token.term == Claim("a", 7)
    # The same value the retained state compares: a claim at a later epoch outranks it.
    assert claim_outranks(Claim("b", 8), token.term)
    assert not claim_outranks(Claim("a", 7), token.term)
    with pytest.raises(AttributeError):
        token.term = Claim("a", 8)  # type: ignore[misc]

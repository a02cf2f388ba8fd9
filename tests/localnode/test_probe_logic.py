"""Probe thresholds and crash backoff."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from localcluster.node.probe_logic import ProbeSpec, ProbeState, record, restart_backoff


def run(spec: ProbeSpec, outcomes: list[bool]) -> list[bool]:
    state = ProbeState()
    out = []
    for ok in outcomes:
        state = record(state, spec, ok)
        out.append(state.result)
    return out


def test_defaults_from_dict() -> None:
    spec = ProbeSpec.from_dict({"httpGet": {"port": 80}})
    assert (spec.period, spec.timeout, spec.success_threshold, spec.failure_threshold) == (
        10.0,
        1.0,
        1,
        3,
    )


def test_thresholds() -> None:
    spec = ProbeSpec(success_threshold=2, failure_threshold=3)
    assert run(spec, [True, True, False, False, True, False, False, False]) == [
        False,
        True,
        True,
        True,
        True,
        True,
        True,
        False,
    ]


@settings(deadline=None)  # a loaded 2-core machine must not fail on speed
@given(st.lists(st.booleans(), max_size=40), st.integers(1, 4), st.integers(1, 4))
def test_result_changes_only_after_a_full_run(outcomes: list[bool], s: int, f: int) -> None:
    spec = ProbeSpec(success_threshold=s, failure_threshold=f)
    results = run(spec, outcomes)
    for i, result in enumerate(results):
        previous = results[i - 1] if i else False
        if result != previous:
            need = s if result else f
            assert i + 1 >= need
            assert all(o == result for o in outcomes[i + 1 - need : i + 1])


def test_backoff_doubles_to_cap() -> None:
    values = [0.0]
    for _ in range(8):
        values.append(restart_backoff(values[-1]))
    assert values[1:5] == [0.5, 1.0, 2.0, 4.0]
    assert max(values) == 10.0

"""The convergence benchmark's detection rule (bench/bench_convergence.py): which answer
through an HAProxy pod proves an endpoint change is served."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from bench.bench_convergence import converged_index


def test_added_endpoint_is_proven_by_its_first_answer() -> None:
    assert converged_index(["a", "a", "b", "a"], "b", added=True, run=4) == 2
    assert converged_index(["a", "", "a"], "b", added=True, run=4) is None


def test_removed_endpoint_needs_a_run_of_other_answers() -> None:
    assert converged_index(["a", "b", "a", "a", "a", "a"], "b", added=False, run=4) == 2
    assert converged_index(["a", "b", "a", "b", "a", "b"], "b", added=False, run=4) is None
    # A failed request (no backend) proves nothing and breaks the run.
    assert converged_index(["a", "a", "", "a", "a", "a", "a"], "b", added=False, run=4) == 3


@given(st.lists(st.sampled_from(["a", "b", ""]), max_size=30), st.integers(1, 5))
def test_removal_index_starts_a_run_without_the_target(answers: list[str], run: int) -> None:
    index = converged_index(answers, "b", added=False, run=run)
    if index is None:
        return
    window = answers[index : index + run]
    assert len(window) == run and all(a and a != "b" for a in window)
    # It is the earliest such run.
    for i in range(index):
        earlier = answers[i : i + run]
        assert not (len(earlier) == run and all(a and a != "b" for a in earlier))

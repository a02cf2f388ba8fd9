"""The convergence benchmark's detection rule (bench/bench_convergence.py): which answer
through an HAProxy pod proves an endpoint change is served."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from bench.bench_convergence import _leader_share, converged_index


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


def test_the_leaders_share_is_the_mean_of_each_step_between_two_scrapes() -> None:
    before = {"renders:full": 3, "fence:sum": 1.0, "fence:count": 10, "intent:count": 4}
    after = {
        "renders:full": 4,
        "renders:incremental": 20,
        "fence:sum": 1.05,
        "fence:count": 30,
        "intent:sum": 0.2,
        "intent:count": 24,
        "apply_to_every_pod:sum": 0.0,
        "apply_to_every_pod:count": 0,
    }
    renders, steps = _leader_share(before, after)
    assert renders == {"full": 1, "incremental": 20}
    # 50 ms over 20 fences; 200 ms over 20 intent records; no apply: no mean.
    assert steps == {"fence": 2.5, "intent": 10.0}

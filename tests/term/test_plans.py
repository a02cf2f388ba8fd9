"""PlanMemory (controller/term/plans.py): the plans pods run stay known through a burst of
outputs that were superseded before any dispatch (docs/design/incremental.md)."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from controller.render import RenderInput, RenderOutput
from controller.render.engine import render
from controller.term.plans import PlanMemory
from tests.render import builders as b

BASE = render(RenderInput(b.template_config()))


def _output(n: int) -> RenderOutput:
    return replace(BASE, plan_id=f"plan-{n}")


def test_a_dispatched_plan_outlives_a_burst_of_undispatched_outputs() -> None:
    memory = PlanMemory(limit=16)
    memory.remember(_output(0))
    memory.dispatched("plan-0")  # the pods run it
    for n in range(1, 100):
        memory.remember(_output(n))  # a burst: superseded before any dispatch
    assert memory.get("plan-0") is not None  # the deployer can still diff against it
    assert memory.get("plan-99") is not None
    assert len(memory.plans()) == 16


@given(st.lists(st.tuples(st.integers(0, 40), st.booleans()), max_size=200))
def test_the_memory_stays_bounded_and_keeps_the_newest_dispatches(steps) -> None:
    memory = PlanMemory(limit=6, dispatched_limit=3)
    dispatched: list[str] = []
    for n, dispatch in steps:
        memory.remember(_output(n))
        if dispatch:
            memory.dispatched(f"plan-{n}")
            dispatched = [p for p in dispatched if p != f"plan-{n}"] + [f"plan-{n}"]
        assert len(memory.plans()) <= 6
        assert memory.get(f"plan-{n}") is not None  # the newest is always known
        for plan in dispatched[-3:]:
            assert memory.get(plan) is not None

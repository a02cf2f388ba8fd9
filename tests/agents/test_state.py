"""The agent's durable record (agents/state.py) survives a save and a load unchanged, and its
JSON is every field of the dataclasses (the shallow encoding of issue 19 loses nothing)."""

from __future__ import annotations

import json
from dataclasses import asdict

from hypothesis import given
from hypothesis import strategies as st

from agents.state import STATE_VERSION, DurableState, PlanRecord

ids = st.text(alphabet="0123456789abcdef", min_size=1, max_size=8)
records = st.builds(
    PlanRecord,
    plan_id=ids,
    checksum=ids,
    structure_digest=ids,
    files=st.dictionaries(
        st.text(min_size=1, max_size=12),
        st.fixed_dictionaries({"kind": st.sampled_from(["config", "map"]), "size": st.integers(0)}),
        max_size=4,
    ),
)
states = st.builds(
    DurableState,
    applied=st.none() | records,
    applied_token=st.none() | st.fixed_dictionaries({"holder": ids, "epoch": st.integers(0)}),
    running_plan_id=st.none() | ids,
    last_known_good=st.none() | records,
    last_apply=st.none() | st.dictionaries(ids, st.integers() | ids, max_size=3),
    invariant_violation=st.none() | st.text(max_size=20),
    apply_count=st.integers(0),
    extra=st.dictionaries(ids, ids, max_size=2),
)


@given(states)
def test_a_saved_state_loads_as_it_was_with_every_field(state: DurableState) -> None:
    data = state.to_json()
    assert json.loads(data) == {"version": STATE_VERSION, **asdict(state)}
    assert DurableState.from_json(data) == state

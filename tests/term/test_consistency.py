"""The consistency check off the coordinator's thread (controller/term/consistency.py;
docs/design/incremental.md): the full render of the very input the incremental path
answered, compared byte for byte; a mismatch makes the coordinator's next render full."""

from __future__ import annotations

import copy
import threading
import time
from types import SimpleNamespace

from hypothesis import given
from hypothesis import strategies as st

from controller.metrics import INCREMENTAL_CHECKS, INCREMENTAL_MISMATCH
from controller.render import incremental as inc
from controller.render.engine import render_with_basis
from controller.term.consistency import CHECK_SHARE, ConsistencyChecker, check_interval
from controller.term.coordinator import CONSISTENCY_INTERVAL, Coordinator
from tests.render.test_incremental import _input, _objects, _replace_slice


def _step():
    objects = _objects()
    output, basis = render_with_basis(_input(objects, None))
    assert basis is not None
    changed = copy.deepcopy(objects["endpointslices"][0])
    changed["endpoints"][0]["conditions"]["ready"] = False
    inp = _input(_replace_slice(objects, 0, changed), output)
    step = inc.update(basis, inp)
    assert step is not None and step.output.plan_id != output.plan_id
    return inp, step, output, basis


def test_an_incremental_output_that_is_its_full_render_passes() -> None:
    inp, step, _, _ = _step()
    called: list[int] = []
    checks, mismatches = INCREMENTAL_CHECKS._value.get(), INCREMENTAL_MISMATCH._value.get()
    assert ConsistencyChecker(lambda: True, lambda: called.append(1)).check(inp, step.output)
    assert INCREMENTAL_CHECKS._value.get() == checks + 1
    assert INCREMENTAL_MISMATCH._value.get() == mismatches and called == []


def test_a_wrong_output_is_counted_and_handed_back_from_the_checkers_thread() -> None:
    """The output before the change stands for a broken incremental path: the check, run
    on its own thread after `submit`, counts the mismatch and calls back."""
    inp, _, stale, _ = _step()
    called = threading.Event()
    mismatches = INCREMENTAL_MISMATCH._value.get()
    checker = ConsistencyChecker(lambda: not called.is_set(), called.set)
    checker.submit(inp, stale)
    assert called.wait(30)
    assert INCREMENTAL_MISMATCH._value.get() == mismatches + 1


def test_after_a_mismatch_the_coordinator_drops_the_chain_and_renders_in_full() -> None:
    """`Coordinator._incremental` answers None (the full render, through the gate) once the
    checker reported a mismatch, though the basis would still update."""
    inp, _, _, basis = _step()
    ctx = SimpleNamespace(
        wake=threading.Condition(),
        alive=lambda: True,
        state=SimpleNamespace(usable=lambda output: True),
    )
    coordinator = Coordinator(ctx, None, None, None)  # type: ignore[arg-type]
    coordinator.request_render = lambda: None  # type: ignore[method-assign]
    coordinator._basis, coordinator._accepted_root = basis, basis.root_checksum
    assert coordinator._incremental(inp, basis.output) is not None
    coordinator._mismatched()
    assert coordinator._incremental(inp, basis.output) is None
    assert coordinator._basis is None


@given(st.floats(0, 600), st.floats(0, 60))
def test_the_check_never_takes_more_than_its_share_of_a_core(minimum, cpu) -> None:
    interval = check_interval(minimum, cpu)
    assert interval >= minimum
    assert cpu <= CHECK_SHARE * interval + 1e-9
    if cpu <= CHECK_SHARE * minimum:
        assert interval == minimum


def test_a_costly_full_render_makes_the_check_due_later() -> None:
    """The check is due CONSISTENCY_INTERVAL after the last full render while a full render
    is cheap, and later when it costs more CPU than CHECK_SHARE of a core at that pace (issue
    19: at 5,000 Ingresses a check every 30 s was most of the leader's CPU per change)."""
    _, step, _, _ = _step()
    ctx = SimpleNamespace(wake=threading.Condition(), alive=lambda: True)
    coordinator = Coordinator(ctx, None, None, None)  # type: ignore[arg-type]
    coordinator._basis = step.basis  # one update since the full render
    coordinator._full_at = time.monotonic() - CONSISTENCY_INTERVAL - 1
    coordinator._full_cpu = 0.1
    assert coordinator._check_due()
    coordinator._check_requested = False
    coordinator.checker.render_cpu = 2.0  # 2 s of CPU: due after 100 s, not 31
    assert not coordinator._check_due()
    coordinator._full_at = time.monotonic() - 2.0 / CHECK_SHARE - 1
    assert coordinator._check_due()

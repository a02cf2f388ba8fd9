"""The consistency check off the coordinator's thread (controller/term/consistency.py;
docs/design/incremental.md): the full render of the very input the incremental path
answered, compared byte for byte; a mismatch makes the coordinator's next render full."""

from __future__ import annotations

import copy
import threading
from types import SimpleNamespace

from controller.metrics import INCREMENTAL_CHECKS, INCREMENTAL_MISMATCH
from controller.render import incremental as inc
from controller.render.engine import render_with_basis
from controller.term.consistency import ConsistencyChecker
from controller.term.coordinator import Coordinator
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

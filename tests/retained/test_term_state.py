"""TermState's locked operations (controller/term/state.py): each takes exactly what it
says, over explored sequences of acknowledgements, publications and failed publications
(the interleavings of the dispatcher, Celery task threads and the publisher)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from controller.render import RenderedFile, RenderOutput, build_plan, checksum, plan_id
from controller.retained.receipts import PodReceipt
from controller.term.state import TermState

PODS = ["p0", "p1", "p2"]
SUMS = ["sha256:a", "sha256:b", "sha256:c"]


def _receipt(pod: str, sums: str, n: int) -> PodReceipt:
    return PodReceipt(pod, f"uid-{pod}", f"rt-{n}", sums, f"plan-{sums}", "x", "x", "reload")


def _output(n: int) -> RenderOutput:
    files = (RenderedFile("haproxy.cfg", "config", f"global\n# {n}\n".encode()),)
    plan = build_plan(list(files))
    return RenderOutput(files, plan, plan_id(plan), checksum(files), plan["structure_digest"])


ops = st.lists(
    st.one_of(
        st.tuples(st.just("ack"), st.sampled_from(PODS), st.sampled_from(SUMS)),
        st.tuples(st.just("take"), st.sampled_from(SUMS), st.booleans()),  # bool: it fails
    ),
    max_size=40,
)


@given(ops)
def test_take_unsaved_returns_exactly_what_it_removes_and_nothing_is_lost(steps) -> None:
    state = TermState()
    saved: list[PodReceipt] = []
    newest: dict[str, PodReceipt] = {}
    for n, step in enumerate(steps):
        if step[0] == "ack":
            receipt = _receipt(step[1], step[2], n)
            state.acknowledged(receipt, {})
            newest[receipt.pod_name] = receipt
            continue
        _, sums, fails = step
        before = dict(state.unsaved)
        taken = state.take_unsaved(sums)
        assert {r.pod_name: r for r in taken} == {
            p: r for p, r in before.items() if r.checksum == sums
        }
        assert state.unsaved == {p: r for p, r in before.items() if r.checksum != sums}
        if fails:
            state.put_back_unsaved(taken)
            assert state.unsaved == before
        else:
            saved += taken
    # Every pod's newest receipt is saved or still waits: none was dropped.
    for pod, receipt in newest.items():
        assert receipt in saved or state.unsaved.get(pod) == receipt


def test_a_put_back_receipt_never_replaces_a_newer_one() -> None:
    state = TermState()
    old, new = _receipt("p0", SUMS[0], 1), _receipt("p0", SUMS[1], 2)
    state.acknowledged(old, {})
    taken = state.take_unsaved(SUMS[0])
    state.acknowledged(new, {})  # absorbed while the publication ran
    state.put_back_unsaved(taken)
    assert state.unsaved == {"p0": new}


def test_a_refused_output_is_withdrawn_and_the_one_before_it_comes_back() -> None:
    state = TermState()
    a, b = _output(1), _output(2)
    assert state.accept(a) and state.accept(b)
    state.acknowledged(_receipt("p0", b.checksum, 3), {})
    assert state.refuse(b)
    assert state.last_good is a and state.publication_latched
    assert not state.usable(b) and not state.accept(b)
    assert state.take_unsaved(b.checksum) == []
    assert state.take_reverts() == [b] and state.take_reverts() == []
    assert not state.refuse(b)  # once only

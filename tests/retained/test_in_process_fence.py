"""Issue 19, "no broker on the hot path": a term deploys in place, on its own threads, and the
fence that used to come from the leader task's re-check now comes from the term itself
(`TermContext.check_term` under the dispatcher's lock). Through the real parts: a
`LeaderPipeline` in this process wired as `ControllerReplica._start_term` wires it (no
`run_deployment` given), the local API server over HTTP, real agents running real haproxy.

A deployment from a term that has ended is refused, whichever way it ended: the elector
ended it locally (the Lease may still name it for a moment), or another replica holds the
Lease (this process has not noticed yet). Nothing is applied and no intent is recorded.
"""

from __future__ import annotations

import threading

from devstack.stack import wait_for
from tests.retained.test_drain import Harness


def _led_term(harness: Harness, ended: threading.Event):
    """A term of replica-a@1 that deployed to the first agent; a second agent, bootstrap,
    is known to the pipeline but was never deployed to."""
    first, second = harness.add_agents(2, ["--min-reload-interval", "0"])
    harness.pods = [harness.pod_for(first, 0)]
    harness.set_leader("replica-a", 1)
    pipeline = harness.pipeline("replica-a", 1, term_valid=lambda: not ended.is_set())
    harness.start_term(pipeline)
    pipeline.request_render()
    output = harness.wait_acknowledged(pipeline, [first])
    harness.pods = [harness.pod_for(first, 0), harness.pod_for(second, 1)]
    assert second.client.state().bootstrap, "premise: the second pod was never deployed to"
    return pipeline, output, second


def _refused(harness: Harness, pipeline, output, second) -> None:
    intent_before = pipeline.store.read_intent()
    # The path every dispatcher push, repair and recovery apply takes in a worker.
    answer = pipeline.run_deployment(output, {"haproxy-1"})
    assert answer == {}, f"an ended term deployed: {answer}"
    state = second.client.state()
    assert state.bootstrap and state.applied_plan_id is None, "the agent was given a plan"
    assert pipeline.store.read_intent() == intent_before, "an ended term recorded an intent"


def test_a_term_the_elector_ended_deploys_nothing(harness: Harness) -> None:
    """The local term ended (renew deadline passed, graceful stop) while the Lease still
    names it: the leader task's `term.is_valid()` re-check is kept in place.

    Failed before the fix: the in-place path checked only the Lease, so the ended term's
    push reached the bootstrap pod."""
    ended = threading.Event()
    pipeline, output, second = _led_term(harness, ended)
    ended.set()
    wait_for(lambda: not pipeline.alive(), 10, what="the term to know it ended")
    _refused(harness, pipeline, output, second)


def test_a_term_whose_lease_moved_deploys_nothing(harness: Harness) -> None:
    """Another replica holds the Lease at a higher epoch; this process still believes it
    leads. The fence reads the Lease right before the apply and refuses."""
    ended = threading.Event()
    pipeline, output, second = _led_term(harness, ended)
    harness.set_leader("replica-b", 2)
    _refused(harness, pipeline, output, second)


def _new_output(harness: Harness, pipeline):
    """A render of one more host: an output the intent does not name yet."""
    from controller.render import RenderInput, render

    harness.hosts.append("b")
    previous = pipeline.ctx.state.last_good
    return render(RenderInput(**harness.snapshot(), previous_plan=previous.plan))


def test_an_apply_that_records_an_intent_proves_the_term_with_the_records_reads(
    harness: Harness,
) -> None:
    """Issue 19: an apply that records an intent reads the leader Lease twice, the record's
    own reads before its write and after it (ADR-0033), not a third time for the fence; an
    apply of the output the intent names already reads it once, for the fence.

    Failed before: three reads (the fence's, then the record's two)."""
    ended = threading.Event()
    pipeline, _, _ = _led_term(harness, ended)
    reads: list[str] = []
    store, ctx = pipeline.store, pipeline.ctx
    read_leader, fence = store.read_leader, ctx.given_check_term
    store.read_leader = lambda: (reads.append("record"), read_leader())[1]  # type: ignore
    ctx.given_check_term = lambda: (reads.append("fence"), fence())[1]  # type: ignore
    output = _new_output(harness, pipeline)
    outcomes = pipeline.dispatcher.deploy(output, {"haproxy-0"})
    assert outcomes and not any(o.action.is_error for o in outcomes), outcomes
    assert reads == ["record", "record"]
    reads.clear()
    pipeline.dispatcher.deploy(output, {"haproxy-0"})  # the intent names it: the fence reads
    assert reads == ["fence"]


def test_an_apply_that_records_an_intent_after_the_lease_moved_does_nothing(
    harness: Harness,
) -> None:
    """The record's read before its write refuses a term whose Lease another replica holds:
    no intent, no apply, as when the fence read refused."""
    ended = threading.Event()
    pipeline, first_output, _ = _led_term(harness, ended)
    first = harness.agents[0]
    intent_before = pipeline.store.read_intent()
    harness.set_leader("replica-b", 2)
    output = _new_output(harness, pipeline)
    assert pipeline.run_deployment(output, {"haproxy-0"}) == {}
    assert first.client.state().applied_plan_id == first_output.plan_id
    assert pipeline.store.read_intent() == intent_before

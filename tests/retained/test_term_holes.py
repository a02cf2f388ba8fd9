"""Holes of issue 15 in the leader term, each through the real parts: a `LeaderPipeline` in
this process, the local API server over HTTP, the real `RetainedStateStore` and publishers,
and real agents running real haproxy (their fencing is agents/decide.py's).

- hole 1: the intent names the last output dispatched (A -> B -> A);
- hole 2: a publication never drops receipts it did not publish.
"""

from __future__ import annotations

from controller.publish.checkpoints import pointers_from_status
from tests.agents.helpers import wait_for
from tests.retained.test_drain import Harness


def _render(harness: Harness, pipeline, hosts: list[str], agents) -> object:
    """Render `hosts` and wait until every agent runs the new output."""
    before = pipeline.state.last_good
    harness.hosts = list(hosts)
    pipeline.request_render()
    wait_for(lambda: pipeline.state.last_good is not before, 30, f"the render of {hosts}")
    return harness.wait_acknowledged(pipeline, agents)


def test_reverting_a_change_records_the_intent_for_the_output_applied_again(
    harness: Harness,
) -> None:
    """A -> B -> A in one term: every pod runs A again, so the intent must name A.

    Bug (controller/leader.py, LeaderPipeline.deploy): `state.intents_recorded` recorded an
    intent once per plan ID per term, so A's second apply recorded nothing and the intent
    kept naming B while every pod ran A."""
    agents = harness.add_agents(2, ["--min-reload-interval", "0"])
    harness.pods = [harness.pod_for(a, i) for i, a in enumerate(agents)]
    harness.set_leader("replica-a", 1)
    pipeline = harness.pipeline("replica-a", 1)
    harness.start_term(pipeline)
    plan_a = _render(harness, pipeline, ["a"], agents)
    plan_b = _render(harness, pipeline, ["a", "b"], agents)
    again = _render(harness, pipeline, ["a"], agents)
    assert plan_b.plan_id != plan_a.plan_id
    assert again.plan_id == plan_a.plan_id, "premise: removing the path renders A again"
    assert {s.applied_plan_id for s in harness.states(agents)} == {plan_a.plan_id}

    intent = pipeline.store.read_intent()
    assert intent is not None
    assert intent.names(plan_a.plan_id, plan_a.checksum), (
        f"every pod runs {plan_a.plan_id}, the intent names {intent.plan_id}"
    )


def test_receipts_absorbed_during_a_publication_are_published_next(harness: Harness) -> None:
    """A deployment of B acknowledged while the checkpoint of A is being written: B's
    receipts must survive that publication and be checkpointed by the next one.

    Bug (controller/leader.py, LeaderPipeline.publish): it snapshotted the receipts of A's
    checksum, then cleared all of `state.unsaved`, B's receipts included, so B (which the
    intent names) never got a checkpoint until some later deployment."""
    agents = harness.add_agents(2, ["--min-reload-interval", "0"])
    harness.pods = [harness.pod_for(a, i) for i, a in enumerate(agents)]
    harness.set_leader("replica-a", 1)
    pipeline = harness.pipeline("replica-a", 1)
    harness.start_term(pipeline)
    plan_a = _render(harness, pipeline, ["a"], agents)

    write_checkpoint = pipeline.checkpoints.publish
    concurrent: list[object] = []

    def publish_while_b_is_deployed(files, receipt, acknowledged_at):
        if not concurrent:
            # The dispatcher deploys B (and absorbs its receipts) while this publication of
            # A runs.
            concurrent.append(_render(harness, pipeline, ["a", "b"], agents))
        return write_checkpoint(files, receipt, acknowledged_at)

    pipeline.checkpoints.publish = publish_while_b_is_deployed  # type: ignore[method-assign]
    pipeline.publish()
    pipeline.checkpoints.publish = write_checkpoint  # type: ignore[method-assign]
    assert concurrent, "premise: B was deployed during the publication"
    plan_b = concurrent[0]
    assert plan_b.plan_id != plan_a.plan_id
    published = pointers_from_status(harness.published())
    assert plan_a.checksum in [p.checksum for p in published]

    pipeline.publish()

    intent = pipeline.store.read_intent()
    assert intent is not None and intent.names(plan_b.plan_id, plan_b.checksum)
    pointers = pointers_from_status(harness.published())
    assert pointers and pointers[0].checksum == plan_b.checksum, (
        f"B's receipts were lost: no checkpoint for the intent's output in {pointers}"
    )

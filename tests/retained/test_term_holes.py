"""Holes of issue 15 in the leader term, each through the real parts: a `LeaderPipeline` in
this process, the local API server over HTTP, the real `RetainedStateStore` and publishers,
and real agents running real haproxy (their fencing is agents/decide.py's).

- hole 1: the intent names the last output dispatched (A -> B -> A);
- hole 2: a publication never drops receipts it did not publish;
- hole 3: the drain pushes new pods nothing but the scheduler's last dispatched plan;
- hole 4: the drain's bound holds when publication hangs (fault injection);
- hole 7: a render-gate refusal that arrives after dispatch is acted on;
- hole 8: a term whose claim had to Reclaim acts under the lifted epoch at once.
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import replace

from controller.health import RECONCILIATION_COORDINATOR
from controller.publish.checkpoints import pointers_from_status
from controller.retained.intent import Term
from controller.retained.store import RetainedStateStore
from devstack.stack import wait_for
from localcluster.testing import ApiServer
from tests.retained.test_drain import NS, Harness, stored_versions


def _render(harness: Harness, pipeline, hosts: list[str], agents) -> object:
    """Render `hosts` and wait until every agent runs the new output."""
    before = pipeline.state.last_good
    harness.hosts = list(hosts)
    pipeline.request_render()
    wait_for(lambda: pipeline.state.last_good is not before, 30, what=f"the render of {hosts}")
    return harness.wait_acknowledged(pipeline, agents)


def test_reverting_a_change_records_the_intent_for_the_output_applied_again(
    harness: Harness,
) -> None:
    """A -> B -> A in one term: every pod runs A again, so the intent must name A.

    Bug (controller/leader.py, LeaderPipeline.deploy): `state.intents_recorded` recorded an
    intent once per plan ID per term, so A's second apply recorded nothing and the intent
    kept naming B while every pod ran A."""
    agents, pipeline, _ = harness.lead(2)
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
    agents, pipeline, _ = harness.lead(2)
    plan_a = _render(harness, pipeline, ["a"], agents)

    write_checkpoint = pipeline.checkpoints.publish
    concurrent: list[object] = []

    def publish_while_b_is_deployed(files, receipt, acknowledged_at, plan_id=None):
        if not concurrent:
            # The dispatcher deploys B (and absorbs its receipts) while this publication of
            # A runs.
            concurrent.append(_render(harness, pipeline, ["a", "b"], agents))
        return write_checkpoint(files, receipt, acknowledged_at, plan_id)

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


def test_drain_pushes_a_new_pod_only_the_last_dispatched_plan(harness: Harness) -> None:
    """A pod discovered during the drain, while a newer render waits that the draining
    scheduler refused: the pod gets the last dispatched plan, never the newer render.

    Bug (controller/leader.py, LeaderPipeline._push_to_new_pods): it pushed
    `state.last_good`, the newer render, and `deploy()` recorded an intent for it."""
    agents, pipeline, deployer = harness.lead(2, spare=1, hold_call=2)
    spare = agents.pop()
    _, plan2, plan3 = harness.hold_second_render(pipeline, deployer, agents, newer_render=True)
    assert plan3 is not None

    drain = threading.Thread(target=pipeline.stop, kwargs={"drain": True})
    drain.start()
    try:
        wait_for(lambda: pipeline.scheduler.draining, 10, what="the drain to begin")
        harness.pods.append(harness.pod_for(spare, 2))
        pipeline.pods_changed()
    finally:
        deployer.release.set()
    drain.join(40)
    assert not drain.is_alive()

    assert plan3.plan_id not in deployer.started
    assert spare.client.state().applied_plan_id in (None, plan2.plan_id)
    intent = pipeline.store.read_intent()
    assert intent is not None and intent.names(plan2.plan_id, plan2.checksum), intent


def _fault_hits(api: ApiServer, fault: int) -> int:
    rules = api._admin("GET", "/admin/faults")["faults"]
    return next(int(r["hits"]) for r in rules if int(r["id"]) == fault)


def test_the_drain_bound_holds_when_publication_hangs(api: ApiServer, harness: Harness) -> None:
    """HAProxyCfg writes hang (black-holed by the API server): the drain still ends within
    its bound, and no write is attempted after it.

    Bug (controller/leader.py, LeaderPipeline._drain -> publish): the publication ran with
    no deadline, each request with its own 5 s timeout (retried by urllib3), so a hanging
    API server kept the drain, and the Lease, long past the bound."""
    agents, pipeline, _ = harness.lead(2)
    pipeline.request_render()
    harness.wait_acknowledged(pipeline, agents)
    assert harness.published() is None, "premise: the receipt waits in the throttle"
    fault = api.add_fault(path_regex="/haproxycfgs", methods=["POST", "PUT"], blackhole=True)
    try:
        started = time.monotonic()
        pipeline.stop(drain=True, timeout=3.0)
        took = time.monotonic() - started
        hits = _fault_hits(api, fault)
        time.sleep(2.0)
        assert _fault_hits(api, fault) == hits, "a write was attempted after the drain"
    finally:
        api.remove_fault(fault)
    assert hits >= 1, "premise: the drain tried to publish"
    assert took < 3.0 + 0.5, f"the drain took {took:.1f}s, its bound is 3s"


def test_a_refusal_after_dispatch_reverts_the_pods_and_withdraws_the_output(
    harness: Harness,
) -> None:
    """The gate is optimistic after the term's first render: a render it later refuses was
    already dispatched. The pods that took it go back to their last-known-good, the intent
    names what they run, /healthz says why, an Event is emitted, publication holds and the
    refused output is never used again.

    Bug (controller/leader.py, controller/replica.py): the RenderGate got no `on_verdict`,
    so a refused plan stayed `last_good`, the intent named it, and it was pushed to new
    pods and re-deployed by drift prevention."""
    agents, pipeline, _ = harness.lead(2, "4", spare=1)
    spare = agents.pop()
    plan_a = _render(harness, pipeline, ["a"], agents)
    assert not pipeline.gate.pessimistic

    harness.template_obj["spec"]["extraContext"] = {"hardStopAfter": "bogus"}
    pipeline.request_render()
    wait_for(
        lambda: any(r == "RenderFailed" and "refused" in m for _, r, m in harness.events),
        30,
        what="the refusal reported as an Event",
    )
    error = pipeline.health.error(RECONCILIATION_COORDINATOR)
    assert error is not None and "refused" in error
    assert pipeline.gate.pessimistic
    assert pipeline.state.last_good is not None
    assert pipeline.state.last_good.checksum == plan_a.checksum
    assert pipeline.state.publication_latched

    def reverted() -> bool:
        intent = pipeline.store.read_intent()
        return (
            intent is not None
            and intent.names(plan_a.plan_id, plan_a.checksum)
            and all(s.applied_plan_id == plan_a.plan_id for s in harness.states(agents))
        )

    # Within the agents' 4 s pacing: the revert, not the agent's failed reload, did it.
    wait_for(reverted, 3.5, what="every pod back on A, and the intent naming A")

    # A pod discovered now gets A, not the refused output.
    harness.pods.append(harness.pod_for(spare, 2))
    pipeline.pods_changed()
    wait_for(
        lambda: spare.client.state().applied_plan_id == plan_a.plan_id, 30, what="the new pod on A"
    )


def test_a_reclaimed_term_records_intents_under_the_lifted_epoch(harness: Harness) -> None:
    """The leader-election Lease was recreated (its epoch counter restarted at 1) after a
    term at epoch 5 claimed the retained state: the next term's claim Reclaims epoch 6 and
    the term must act under it at once.

    Bug (controller/leader.py, LeaderPipeline._coordinator): it ignored `ClaimResult.term`,
    so every intent record of the term (epoch 1) was refused and nothing was deployed."""
    agents = harness.add_agents(2, ["--min-reload-interval", "0"])
    harness.pods = [harness.pod_for(a, i) for i, a in enumerate(agents)]
    harness.set_leader("replica-a", 5)
    RetainedStateStore(harness.client, harness.template, harness.lease_name, NS).claim(
        Term("replica-a", 5)
    )
    harness.leases.delete_namespaced_lease(harness.lease_name, NS)
    harness.leases.create_namespaced_lease(
        NS, {"metadata": {"name": harness.lease_name}, "spec": {}}
    )
    harness.set_leader("replica-b", 1)

    pipeline = harness.pipeline("replica-b", 1)
    harness.start_term(pipeline)
    pipeline.request_render()
    output = wait_for(lambda: pipeline.state.last_good, 30, what="the render")
    wait_for(
        lambda: all(s.applied_plan_id == output.plan_id for s in harness.states(agents)),
        30,
        what="the render applied under the reclaimed epoch",
    )
    assert pipeline.term == Term("replica-b", 6)
    assert {s.applied_token["epoch"] for s in harness.states(agents)} == {6}
    intent = pipeline.store.read_intent()
    assert intent is not None and intent.names(output.plan_id, output.checksum)
    assert intent.epoch == 6


def test_pods_that_took_a_refused_plan_are_reverted_through_their_agent(
    harness: Harness,
) -> None:
    """The revert itself, with real agents: B is dispatched optimistically and every agent
    schedules its paced reload (files in place, not loaded); the gate's verdict on B is
    turned into a refusal (HAProxy accepts B, so the refusal is injected at the verdict,
    the one thing not real here); the agents must be sent `revert_lkg` and serve A again
    before their paced reload of B would run, and the intent must name A."""
    agents, pipeline, _ = harness.lead(2, "4")
    plan_a = _render(harness, pipeline, ["a"], agents)
    report = pipeline.gate.on_term_verdict
    assert report is not None

    def refuse_all_but_a(output, verdict) -> None:
        if output.checksum != plan_a.checksum:
            # The scenario is a refusal after dispatch: hold the verdict until B is on every
            # agent. A quick `haproxy -c` once gave its verdict before the paced dispatch of
            # B, B was never sent and there was nothing to revert (a real-tier flake).
            wait_for(
                lambda: all(s.applied_plan_id == output.plan_id for s in harness.states(agents)),
                10,
                what="B on every agent before the gate's verdict",
            )
            verdict = replace(verdict, accepted=False, output="refused (injected)")
        report(output, verdict)

    pipeline.gate.on_term_verdict = refuse_all_but_a
    harness.hosts = ["a", "b"]
    pipeline.request_render()

    def reverted() -> bool:
        intent = pipeline.store.read_intent()
        states = harness.states(agents)
        return (
            intent is not None
            and intent.names(plan_a.plan_id, plan_a.checksum)
            and all(s.applied_plan_id == plan_a.plan_id for s in states)
            and all((s.last_apply or {}).get("mode") == "revert_lkg" for s in states)
        )

    wait_for(reverted, 3.5, what="every agent reverted to A through revert_lkg")
    wait_for(
        lambda: all(
            s.running_plan_id == plan_a.plan_id and not s.pending_reload
            for s in harness.states(agents)
        ),
        15,
        what="every worker on A, no reload pending",
    )
    assert pipeline.state.last_good is not None
    assert pipeline.state.last_good.checksum == plan_a.checksum


def test_a_publication_stops_writing_once_the_lease_moved(harness: Harness) -> None:
    """The term is re-checked before every write of a publication, not only at its start:
    once another replica holds the Lease, not one more object is written.

    Bug (controller/leader.py, LeaderPipeline.publish): one `check_term()` at the start,
    then every write of the output, the receipts and the checkpoint went ahead."""
    agents, pipeline, _ = harness.lead(2)
    output = _render(harness, pipeline, ["a"], agents)
    ordinary = pipeline.publisher.ordinary if hasattr(pipeline, "publisher") else pipeline.ordinary
    write_output = ordinary.publish_output

    def publish_then_lose_the_lease(out):
        written = write_output(out)
        harness.set_leader("replica-b", 2)  # taken between two writes
        return written

    ordinary.publish_output = publish_then_lose_the_lease  # type: ignore[method-assign]
    before = stored_versions(harness.objects, harness.template)
    with contextlib.suppress(Exception):  # the publication gives up: the term is over
        pipeline.publish()
    after = stored_versions(harness.objects, harness.template)
    published = harness.published()
    assert published is not None, "premise: the output itself was written"
    assert not pointers_from_status(published), "a checkpoint was promoted after the Lease moved"
    assert not (published.get("status") or {}).get("deployedToPods"), "receipts were written"
    new = {k for k in after if k not in before and k[0] == "haproxycfgs"}
    assert new == {("haproxycfgs", harness.name)}, f"written after the Lease moved: {new}"
    assert output is not None

"""ADR-0033 Verification: every unit-test case the seed lists, mapped to its test.

Cases already covered elsewhere in tests/retained/ are referenced, not duplicated; the rest
are here, against the local API server over HTTP and, where an agent is involved, real
agents running real haproxy.

seed case -> where it is tested (`here:` = this module; others are in tests/retained/)

complete artifact reconstruction
    test_checkpoint_objects.py::test_complete_artifact_reconstruction
    test_publication_api.py::test_publish_verify_promote_and_reuse
incomplete publication
    test_checkpoint_objects.py::test_incomplete_publication_is_refused
    test_publication_api.py::test_interrupted_publication_leaves_the_previous_pointer_usable
forged ownership
    test_checkpoint_objects.py::test_forged_ownership_identity_or_receipt_is_refused
    test_selection.py::test_tampered_or_forged_checkpoint_is_refused
mismatched content
    test_checkpoint_objects.py::test_tampered_bytes_without_changing_the_checksum_are_refused
    test_checkpoint_objects.py::test_tampered_main_config_is_refused
    test_checkpoint_objects.py::test_tampered_certificate_bytes_are_refused
    test_checkpoint_objects.py::test_pointer_naming_another_checksum_is_refused
pod disagreement
    test_selection.py::test_pod_disagreement_rejects_recovery
    test_selection.py::test_recovery_properties
guard against applying to configured pods
    test_selection.py::test_configured_pods_must_agree_and_only_bootstrap_pods_are_targets
    here: test_a_pod_configured_after_the_last_check_refuses_the_recovery_apply
    here: test_a_good_render_after_the_evaluation_stops_the_recovery_apply
    here: test_recovery_never_records_its_intent_over_a_newer_one
    here: test_a_conditional_record_only_restamps_the_intent_it_names
    here: test_fleet_changes_before_dispatch_stop_recovery
takeover during an intent update
    test_intent.py::test_a_deposed_term_never_applies_after_its_successor_and_never_loses_an_intent
    test_store_api.py::test_record_refused_when_the_leader_lease_moved_before_the_write
    here: test_takeover_during_an_intent_update_refuses_the_apply_and_keeps_the_intent
delayed writes from the previous leader
    test_intent.py::test_delayed_record_after_the_successors_claim_is_refused
    here: test_delayed_write_from_the_previous_leader_is_refused_and_changes_nothing
acknowledgement reordering
    test_selection.py::test_selects_only_the_checkpoint_the_intent_names_whatever_the_order
    here: test_an_older_acknowledgement_published_last_is_not_selected
a newer apply without a saved checkpoint
    test_selection.py::test_a_newer_apply_without_a_saved_checkpoint_refuses_the_older_one
    here: test_newer_apply_without_a_saved_checkpoint_refuses_the_older_one_even_without_old_pods
fleet changes before dispatch
    test_selection.py::test_fleet_changes_before_dispatch_are_seen_by_a_fresh_evaluation
    here: test_fleet_changes_before_dispatch_stop_recovery
a deposed term recording before and during its successor's takeover
    test_intent.py::test_a_deposed_term_never_applies_after_its_successor_and_never_loses_an_intent
      (every interleaving of the two terms' steps)
    here: test_delayed_write_from_the_previous_leader_is_refused_and_changes_nothing (before)
    here: test_takeover_during_an_intent_update_refuses_the_apply_and_keeps_the_intent (during)
a delayed claim
    test_intent.py::test_delayed_claim_of_an_older_term_is_refused
    here: test_delayed_claim_is_refused_and_writes_nothing
a recreated leader-election Lease
    test_intent.py::test_reclaim_after_a_recreated_leader_lease
    test_store_api.py::test_reclaim_after_the_leader_lease_was_recreated
moving the copy on the leader-election Lease
    test_store_api.py::test_upgraded_leader_adopts_moves_and_removes_the_earlier_release_copy
    here: test_upgraded_leader_keeps_the_deployment_intent_of_an_earlier_release (pipeline)
dropping the copy
    test_intent.py::test_legacy_copy_without_a_plan_preserves_and_unreadable_adopts_nothing
    test_intent.py::test_legacy_copy_of_another_template_is_dropped
    here: test_claim_drops_a_legacy_copy_without_a_usable_plan
superseding with the copy
    test_intent.py::test_legacy_copy_with_a_plan_supersedes_the_retained_intent
    here: test_claim_supersedes_the_retained_intent_with_a_newer_legacy_copy
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable

import pytest

from controller.deploy.deployer import Deployer, HAProxyPod
from controller.leader import LeaderPipeline
from controller.publish.checkpoints import CheckpointPublisher, pointers_from_status
from controller.publish.ordinary import OrdinaryPublisher
from controller.recovery import dispatch, evaluate
from controller.render import RenderedFile, RenderOutput, build_plan, checksum, plan_id
from controller.retained.fleet import PodReport
from controller.retained.intent import INTENT_ANNOTATION
from controller.retained.intent import Term as IntentTerm
from controller.retained.receipts import PodReceipt
from controller.retained.selection import evaluate_recovery
from controller.retained.store import IntentRefused, RetainedStateStore
from devstack.stack import wait_for
from tests.agents.helpers import Site, manifest_for
from tests.retained.test_drain import NS, Harness, RecordingDeployer, read_checkpoint

A = IntentTerm("replica-a", 1)
B = IntentTerm("replica-b", 2)


def _store(h: Harness) -> RetainedStateStore:
    return RetainedStateStore(h.client, h.template, h.lease_name, NS)


def _retained_version(h: Harness, store: RetainedStateStore) -> str:
    return h.leases.read_namespaced_lease(store.name, NS).metadata.resource_version


# -- the deposed term, delayed writes, delayed claims ---------------------------------------


def test_takeover_during_an_intent_update_refuses_the_apply_and_keeps_the_intent(
    harness: Harness,
) -> None:
    store = _store(harness)
    harness.set_leader(A.holder, A.epoch)
    store.claim(A)
    store.record_intent(A, "plan-1", "sha256:1")
    write = store._write_retained

    def write_then_takeover(lease, state) -> None:
        write(lease, state)
        # The successor bumps the epoch after the write landed, before the second read.
        harness.set_leader(B.holder, B.epoch)

    store._write_retained = write_then_takeover  # type: ignore[method-assign]
    with pytest.raises(IntentRefused, match="changed during the intent write"):
        store.record_intent(A, "plan-2", "sha256:2")
    store._write_retained = write  # type: ignore[method-assign]
    # The successor's claim preserves the intent that landed: recovery then refuses the
    # older checkpoint (plan-1) until a fresh render; it can only delay recovery.
    claimed = store.claim(B)
    assert claimed.state.intent is not None
    assert claimed.state.intent.plan_id == "plan-2" and claimed.state.intent.epoch == A.epoch


def test_delayed_write_from_the_previous_leader_is_refused_and_changes_nothing(
    harness: Harness,
) -> None:
    store = _store(harness)
    successor = _store(harness)
    harness.set_leader(A.holder, A.epoch)
    store.claim(A)
    before = store.record_intent(A, "plan-1", "sha256:1")
    write = store._write_retained
    taken: list[str] = []

    def takeover_then_write(lease, state) -> None:
        if not taken:
            # The deposed term read and decided; its write is delayed past the successor's
            # epoch increment and claim.
            harness.set_leader(B.holder, B.epoch)
            successor.claim(B)
            taken.append(_retained_version(harness, store))
        write(lease, state)

    store._write_retained = takeover_then_write  # type: ignore[method-assign]
    with pytest.raises(IntentRefused):
        store.record_intent(A, "plan-x", "sha256:x")
    assert store.read_intent() == before
    assert _retained_version(harness, store) == taken[0]  # the delayed write never landed
    stored, _ = store.read_retained()
    assert stored.claim is not None and (stored.claim.holder, stored.claim.epoch) == (
        B.holder,
        B.epoch,
    )


def test_delayed_claim_is_refused_and_writes_nothing(harness: Harness) -> None:
    store = _store(harness)
    harness.set_leader(B.holder, B.epoch)
    store.claim(B)
    store.record_intent(B, "plan-b", "sha256:b")
    retained_rv = _retained_version(harness, store)
    leader_rv = harness.leases.read_namespaced_lease(harness.lease_name, NS).metadata
    with pytest.raises(IntentRefused):
        store.claim(A)  # the older term's claim arrives late
    assert _retained_version(harness, store) == retained_rv
    leader = harness.leases.read_namespaced_lease(harness.lease_name, NS).metadata
    assert leader.resource_version == leader_rv.resource_version
    intent = store.read_intent()
    assert intent is not None and intent.plan_id == "plan-b"


# -- the copy an earlier release left on the leader-election Lease ---------------------------


def _leave_legacy_copy(harness: Harness, raw: str) -> None:
    lease = harness.leases.read_namespaced_lease(harness.lease_name, NS)
    lease.metadata.annotations = {**(lease.metadata.annotations or {}), INTENT_ANNOTATION: raw}
    harness.leases.replace_namespaced_lease(harness.lease_name, NS, lease)


def _copy(plan: str, template_uid: str) -> str:
    return json.dumps(
        {
            "planID": plan,
            "checksum": f"sha256:{plan}",
            "holder": "replica-old",
            "epoch": 1,
            "templateUID": template_uid,
        }
    )


def test_claim_supersedes_the_retained_intent_with_a_newer_legacy_copy(harness: Harness) -> None:
    store = _store(harness)
    harness.set_leader(A.holder, A.epoch)
    store.claim(A)
    store.record_intent(A, "plan-retained", "sha256:plan-retained")
    # A 0.6 leader (ignoring the retained-state Lease) deployed after that and left its copy.
    harness.set_leader(B.holder, B.epoch)
    _leave_legacy_copy(harness, _copy("plan-legacy", harness.template.uid))
    result = store.claim(B)
    assert result.adopted_legacy_intent
    intent = store.read_intent()
    assert intent is not None and intent.plan_id == "plan-legacy"
    lease = harness.leases.read_namespaced_lease(harness.lease_name, NS)
    assert INTENT_ANNOTATION not in (lease.metadata.annotations or {})


@pytest.mark.parametrize(
    "raw",
    ["not json", '{"holder": "replica-old", "epoch": 1}', "other-template"],
    ids=["unreadable", "no-plan", "other-template"],
)
def test_claim_drops_a_legacy_copy_without_a_usable_plan(harness: Harness, raw: str) -> None:
    if raw == "other-template":
        raw = _copy("plan-foreign", "another-template-uid")
    store = _store(harness)
    harness.set_leader(A.holder, A.epoch)
    store.claim(A)
    kept = store.record_intent(A, "plan-retained", "sha256:plan-retained")
    harness.set_leader(B.holder, B.epoch)
    _leave_legacy_copy(harness, raw)
    result = store.claim(B)
    assert not result.adopted_legacy_intent
    assert store.read_intent() == kept
    lease = harness.leases.read_namespaced_lease(harness.lease_name, NS)
    assert INTENT_ANNOTATION not in (lease.metadata.annotations or {})


# -- acknowledgement reordering --------------------------------------------------------------


def _output(version: int) -> RenderOutput:
    config = (
        "global\n    default-path config\ndefaults\n    mode http\nbackend be_a\n"
        f"    server SRV_1 127.0.1.{version}:8080 weight 1\n"
    ).encode()
    files = (
        RenderedFile("haproxy.cfg", "config", config),
        RenderedFile("maps/hosts.map", "map", f"a.example be_{version}\n".encode()),
    )
    plan = build_plan(list(files))
    return RenderOutput(files, plan, plan_id(plan), checksum(files), plan["structure_digest"])


def _receipt(out: RenderOutput, pod: str) -> PodReceipt:
    return PodReceipt(
        pod, f"uid-{pod}", "rt", out.checksum, out.plan_id, out.plan_id, out.plan_id, "reload"
    )


def test_an_older_acknowledgement_published_last_is_not_selected(harness: Harness) -> None:
    store = _store(harness)
    harness.set_leader(A.holder, A.epoch)
    store.claim(A)
    older, newer = _output(1), _output(2)
    ordinary = OrdinaryPublisher(harness.objects, harness.template)
    checkpoints = CheckpointPublisher(harness.objects, harness.template, harness.name)
    store.record_intent(A, older.plan_id, older.checksum)
    store.record_intent(A, newer.plan_id, newer.checksum)
    ordinary.publish_output(newer)
    checkpoints.publish(newer.files, _receipt(newer, "haproxy-0"), "2026-12-01T10:00:02Z")
    # A slow pod acknowledges the older output after the newer one was checkpointed.
    checkpoints.publish(older.files, _receipt(older, "haproxy-1"), "2026-12-01T10:00:01Z")
    pointers = pointers_from_status(harness.published())
    assert [p.checksum for p in pointers] == [older.checksum, newer.checksum]  # reordered
    snapshots = {
        p.name: read_checkpoint(harness.objects, harness.template, p).snapshot for p in pointers
    }
    bootstrap = PodReport(pod_name="haproxy-9", pod_uid="uid-9", runtime_id="rt")
    verdict = evaluate_recovery(store.read_intent(), pointers, snapshots, [bootstrap])
    assert verdict.eligible, verdict.reason
    assert verdict.checkpoint is not None and verdict.checkpoint.checksum == newer.checksum


# -- against real agents: a newer apply without its checkpoint; fleet changes; the fence -----


def _deployed_and_checkpointed(harness: Harness, configured: list) -> RenderOutput:
    """Term A deploys host a to `configured` and publishes its checkpoint."""
    harness.pods = [harness.pod_for(a, i) for i, a in enumerate(configured)]
    harness.set_leader(A.holder, A.epoch)
    term = harness.pipeline(A.holder, A.epoch)
    harness.start_term(term)
    term.request_render()
    output = harness.wait_acknowledged(term, configured)
    term.publish()
    assert pointers_from_status(harness.published())[0].checksum == output.checksum
    return output


def test_newer_apply_without_a_saved_checkpoint_refuses_the_older_one_even_without_old_pods(
    harness: Harness,
) -> None:
    configured, spare = harness.add_agents(2, ["--min-reload-interval", "0"])
    harness.pods = [harness.pod_for(configured, 0)]
    first = _deployed_and_checkpointed(harness, [configured])
    term = harness.pipelines[-1]
    harness.hosts.append("b")
    term.request_render()
    wait_for(lambda: term.state.last_good != first, 30, what="the newer render")
    newer = harness.wait_acknowledged(term, [configured])
    term.stop(drain=False)  # a sudden stop: the newer receipt was never saved
    intent = term.store.read_intent()
    assert intent is not None and intent.names(newer.plan_id, newer.checksum)
    assert [p.checksum for p in pointers_from_status(harness.published())] == [first.checksum]

    # Every old pod is gone; only a bootstrap replacement remains.
    harness.set_leader(B.holder, B.epoch)
    harness.pods = [harness.pod_for(spare, 1)]
    result = evaluate(harness.pipeline(B.holder, B.epoch))
    assert not result.verdict.eligible
    assert "checkpoint-matches-intent" in result.verdict.reason
    assert result.output is None and result.verdict.targets == ()
    assert spare.client.state().bootstrap


def test_fleet_changes_before_dispatch_stop_recovery(harness: Harness) -> None:
    configured, spare = harness.add_agents(2)
    _deployed_and_checkpointed(harness, [configured])
    harness.pipelines[-1].stop(drain=False)
    harness.set_leader(B.holder, B.epoch)
    harness.pods = [harness.pod_for(configured, 0), harness.pod_for(spare, 1)]
    recovering = harness.pipeline(B.holder, B.epoch)
    recovering.store.claim(B)
    result = evaluate(recovering)
    assert result.verdict.eligible and result.verdict.targets == ("haproxy-1",)

    # Before dispatch, the target is configured with another plan (another writer).
    site = Site(8080, {"be_x": ("127.0.0.1", 1)}, {"x.example": "be_x"})
    spare.client.apply(manifest_for(site, "foreign-plan", epoch=1))
    foreign = spare.client.state()
    done = dispatch(recovering, result)
    assert done["haproxy-1"].startswith("stopped"), done
    after = spare.client.state()
    assert (after.applied_plan_id, after.apply_count) == ("foreign-plan", foreign.apply_count)


def _recovering_term(harness: Harness) -> tuple[LeaderPipeline, RecordingDeployer, list]:
    """Term A deploys and checkpoints to haproxy-0, then stops; term B sees haproxy-1 as a
    bootstrap pod and evaluates recovery of it (through the production deployer)."""
    configured, spare = harness.add_agents(2)
    _deployed_and_checkpointed(harness, [configured])
    harness.pipelines[-1].stop(drain=False)
    harness.set_leader(B.holder, B.epoch)
    harness.pods = [harness.pod_for(configured, 0), harness.pod_for(spare, 1)]
    deployer = RecordingDeployer(harness.pool())
    recovering = harness.pipeline(B.holder, B.epoch, deployer=deployer)
    recovering.store.claim(B)
    return recovering, deployer, [configured, spare]


def _after_the_last_check(pipeline: LeaderPipeline, action: Callable[[], object]) -> None:
    """Run `action` once, right after the next fleet read (dispatch's own re-evaluation):
    the window between the last check and the apply."""
    read = pipeline.deployer.read_states
    reads: list[int] = []

    def read_then_act(pods, verify):  # type: ignore[no-untyped-def]
        reports = read(pods, verify)
        reads.append(1)
        if len(reads) == 1:
            action()
        return reports

    pipeline.deployer.read_states = read_then_act  # type: ignore[method-assign]


def _applied(deployer: RecordingDeployer) -> list[tuple[str, str, str | None]]:
    return [(plan, o.action, o.reason) for plan, outs in deployer.calls for o in outs]


def test_a_pod_configured_after_the_last_check_refuses_the_recovery_apply(
    harness: Harness,
) -> None:
    """The residual race, through the real dispatch path: a pod read as bootstrap is
    configured by another writer after the last check. The recovery apply carries the
    bootstrap expectation itself, so the agent refuses it (409) and writes nothing; the
    re-check after the conflict then stops recovery."""
    recovering, deployer, (_, spare) = _recovering_term(harness)
    result = evaluate(recovering)
    assert result.verdict.eligible and result.verdict.targets == ("haproxy-1",)
    site = Site(8080, {"be_x": ("127.0.0.1", 1)}, {"x.example": "be_x"})
    _after_the_last_check(
        recovering, lambda: spare.client.apply(manifest_for(site, "foreign-plan", epoch=1))
    )
    done = dispatch(recovering, result)
    after = spare.client.state()
    assert (after.applied_plan_id, after.apply_count) == ("foreign-plan", 1)
    assert result.output is not None
    assert _applied(deployer) == [(result.output.plan_id, "refused", "not_bootstrap")]
    assert done["haproxy-1"].startswith("stopped"), done


def test_a_good_render_after_the_evaluation_stops_the_recovery_apply(harness: Harness) -> None:
    """A render that succeeds after recovery's last evaluation supersedes it: the recovered
    output is never applied; the normal path deploys the render instead."""
    recovering, deployer, agents = _recovering_term(harness)
    harness.start_term(recovering)
    result = evaluate(recovering)
    assert result.verdict.eligible and result.output is not None
    harness.hosts.append("b")  # the good render is another output

    def render() -> None:
        recovering.request_render()
        wait_for(lambda: recovering.state.last_good, 30, what="the good render")

    _after_the_last_check(recovering, render)
    done = dispatch(recovering, result)
    assert "haproxy-1" not in done or done["haproxy-1"].startswith("stopped"), done
    current = harness.wait_acknowledged(recovering, agents)
    assert current.plan_id != result.output.plan_id
    assert result.output.plan_id not in {plan for plan, _, _ in _applied(deployer)}


def test_recovery_never_records_its_intent_over_a_newer_one(harness: Harness) -> None:
    """An intent a concurrent good render recorded after recovery's evaluation stays: the
    recovery record is conditional on the intent still naming the recovered output."""
    recovering, deployer, (_, spare) = _recovering_term(harness)
    result = evaluate(recovering)
    assert result.verdict.eligible and result.output is not None
    newer = _output(7)
    _after_the_last_check(
        recovering, lambda: recovering.store.record_intent(B, newer.plan_id, newer.checksum)
    )
    done = dispatch(recovering, result)
    intent = recovering.store.read_intent()
    assert intent is not None and intent.names(newer.plan_id, newer.checksum)
    assert deployer.calls == [] and spare.client.state().bootstrap
    assert done["haproxy-1"].startswith("stopped"), done


def test_a_conditional_record_only_restamps_the_intent_it_names(harness: Harness) -> None:
    store = _store(harness)
    harness.set_leader(A.holder, A.epoch)
    store.claim(A)
    recovered, newer = _output(1), _output(2)
    store.record_intent(A, recovered.plan_id, recovered.checksum)
    harness.set_leader(B.holder, B.epoch)
    store.claim(B)
    kept = store.record_intent(B, recovered.plan_id, recovered.checksum, only_if_named=True)
    assert (kept.plan_id, kept.holder, kept.epoch) == (recovered.plan_id, B.holder, B.epoch)
    store.record_intent(B, newer.plan_id, newer.checksum)
    with pytest.raises(IntentRefused, match="names another output"):
        store.record_intent(B, recovered.plan_id, recovered.checksum, only_if_named=True)
    intent = store.read_intent()
    assert intent is not None and intent.names(newer.plan_id, newer.checksum)


def test_upgraded_leader_keeps_the_deployment_intent_of_an_earlier_release(
    harness: Harness,
) -> None:
    """Pipeline level: after a rollback, a 0.6 leader deployed an older output and left its
    intent on the leader-election Lease; the upgraded leader's claim adopts it, and with
    rendering broken it recovers a replacement from the checkpoint that intent names."""
    configured = harness.add_agents(3, ["--min-reload-interval", "0"])
    spare = configured.pop()
    plan1 = _deployed_and_checkpointed(harness, configured)
    term = harness.pipelines[-1]
    harness.hosts.append("b")
    term.request_render()
    wait_for(lambda: term.state.last_good != plan1, 30, what="the second render")
    plan2 = harness.wait_acknowledged(term, configured)
    term.publish()
    term.stop(drain=False)
    assert [p.checksum for p in pointers_from_status(harness.published())] == [
        plan2.checksum,
        plan1.checksum,
    ]
    # The 0.6 leader (epoch 2) ignores the retained-state Lease: it applies plan 1 again and
    # records that intent on the Lease it renews.
    harness.set_leader("replica-old", 2)
    old_pods = [HAProxyPod(p.name, p.uid, p.pod_ip) for p in harness.pods]
    outcomes = Deployer(harness.pool()).deploy(
        plan1, old_pods, "replica-old", 2, {plan2.plan_id: plan2.plan}
    )
    assert all(o.receipt(plan1) is not None for o in outcomes), outcomes
    _leave_legacy_copy(
        harness,
        json.dumps(
            {
                "planID": plan1.plan_id,
                "checksum": plan1.checksum,
                "holder": "replica-old",
                "epoch": 2,
                "templateUID": harness.template.uid,
            }
        ),
    )
    store = _store(harness)
    retained = store.read_intent()
    assert retained is not None and retained.plan_id == plan2.plan_id  # the stale intent

    # The upgraded leader takes over with rendering broken and a replacement pod waiting.
    harness.template_obj["spec"]["haproxyConfig"] = {"template": "{{ does not parse"}
    harness.set_leader("replica-new", 3)
    harness.pods.append(harness.pod_for(spare, len(harness.pods)))
    upgraded = harness.pipeline("replica-new", 3)
    harness.start_term(upgraded)
    upgraded.request_render()
    wait_for(lambda: spare.readiness().status_code == 200, 60, what="the replacement recovered")
    wait_for(lambda: harness.serves(spare, "a"), 20, what="the replacement serving a.example")
    assert spare.client.state().applied_checksum == plan1.checksum
    intent = store.read_intent()
    assert intent is not None and intent.names(plan1.plan_id, plan1.checksum)
    lease = harness.leases.read_namespaced_lease(harness.lease_name, NS)
    assert INTENT_ANNOTATION not in (lease.metadata.annotations or {})
    assert any(reason == "RetainedConfigActive" for _, reason, _ in harness.events)


# -- haptic_retained_config_active ------------------------------------------------------------


def _gauge() -> float | None:
    from prometheus_client import REGISTRY

    return REGISTRY.get_sample_value("haptic_retained_config_active")


def _recovered_term(harness: Harness) -> tuple[LeaderPipeline, list]:
    """Term A deploys and checkpoints to haproxy-0 and stops; term B starts with rendering
    broken and recovers the bootstrap pod haproxy-1 from the checkpoint."""
    configured, spare = harness.add_agents(2, ["--min-reload-interval", "0"])
    _deployed_and_checkpointed(harness, [configured])
    harness.pipelines[-1].stop(drain=False)
    assert _gauge() == 0
    harness.template_obj["spec"]["haproxyConfig"] = {"template": "{{ does not parse"}
    harness.set_leader(B.holder, B.epoch)
    harness.pods.append(harness.pod_for(spare, 1))
    term = harness.pipeline(B.holder, B.epoch)
    harness.start_term(term)
    term.request_render()
    wait_for(lambda: spare.readiness().status_code == 200, 60, what="the replacement recovered")
    return term, [configured, spare]


def test_the_retained_config_gauge_is_cleared_when_a_current_render_converges(
    harness: Harness,
) -> None:
    term, agents = _recovered_term(harness)
    assert _gauge() == 1
    del harness.template_obj["spec"]["haproxyConfig"]  # the template libraries render again
    harness.hosts.append("b")  # the current render is another output than the checkpoint's
    term.request_render()
    harness.wait_acknowledged(term, agents)
    wait_for(lambda: _gauge() == 0, 10, what="the gauge cleared after convergence")


def test_the_retained_config_gauge_is_cleared_on_leadership_loss(harness: Harness) -> None:
    term, _ = _recovered_term(harness)
    assert _gauge() == 1
    term.stop(drain=False)
    assert _gauge() == 0


def test_the_gauge_stays_clear_when_a_render_converges_during_the_recovery_evaluation(
    harness: Harness,
) -> None:
    """Recovery evaluates while rendering is broken; meanwhile the template is fixed and the
    current render converges on every pod. Recovery then schedules nothing, so the gauge,
    already cleared by that convergence, must not be set again."""
    configured, spare = harness.add_agents(2, ["--min-reload-interval", "0"])
    _deployed_and_checkpointed(harness, [configured])
    harness.pipelines[-1].stop(drain=False)
    harness.template_obj["spec"]["haproxyConfig"] = {"template": "{{ does not parse"}
    harness.set_leader(B.holder, B.epoch)
    harness.pods.append(harness.pod_for(spare, 1))
    term = harness.pipeline(B.holder, B.epoch)
    read = term.deployer.read_states
    fixed = threading.Event()

    def converge_first(pods, verify):  # type: ignore[no-untyped-def]
        reports = read(pods, verify)
        if threading.current_thread().name == "recovery" and not fixed.is_set():
            fixed.set()
            del harness.template_obj["spec"]["haproxyConfig"]
            harness.hosts.append("b")
            term.request_render()
            harness.wait_acknowledged(term, [configured, spare])
            wait_for(lambda: _gauge() == 0, 10, what="the convergence clearing the gauge")
        return reports

    term.deployer.read_states = converge_first  # type: ignore[method-assign]
    harness.start_term(term)
    term.request_render()
    wait_for(fixed.is_set, 60, what="recovery evaluating")
    wait_for(lambda: not term.coordinator.recovering, 60, what="the recovery attempt done")
    assert _gauge() == 0
    assert not any(reason == "RetainedConfigActive" for _, reason, _ in harness.events)

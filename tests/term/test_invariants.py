"""The term model's invariants (tests/term/invariants.py) on hand-made observations."""

from __future__ import annotations

from controller.retained.intent import DeploymentIntent
from tests.term import invariants as inv
from tests.term.fake_agents import AcceptedApply

INTENT = DeploymentIntent("plan-b", "sum-b", "replica-1", 1, "uid")


def accepted(plan: str, bootstrap: bool = False) -> AcceptedApply:
    checksum = plan.replace("plan", "sum")
    return AcceptedApply("haproxy-0", plan, checksum, "r", 1, bootstrap, "reload")


def test_an_apply_of_a_plan_the_intent_does_not_name_is_a_violation() -> None:
    assert inv.applies_not_named_by_intent([accepted("plan-b")], INTENT) == []
    assert len(inv.applies_not_named_by_intent([accepted("plan-a")], INTENT)) == 1
    assert len(inv.applies_not_named_by_intent([accepted("plan-b")], None)) == 1


def test_the_intent_must_name_the_last_dispatch() -> None:
    assert inv.intent_misses_dispatch(INTENT, "plan-b", "sum-b") == []
    assert inv.intent_misses_dispatch(INTENT, "plan-a", "sum-a") == [
        "deployed plan-a but the intent names plan-b"
    ]


def test_recovery_only_to_bootstrap_pods() -> None:
    assert inv.recovery_to_configured_pods([accepted("plan-b", bootstrap=True)]) == []
    assert len(inv.recovery_to_configured_pods([accepted("plan-b")])) == 1


def test_an_acknowledged_intent_needs_a_checkpoint() -> None:
    assert inv.intent_without_checkpoint(INTENT, {"haproxy-0": "sum-b"}, ["sum-b"]) == []
    assert inv.intent_without_checkpoint(INTENT, {"haproxy-0": "sum-a"}, []) == []
    assert len(inv.intent_without_checkpoint(INTENT, {"haproxy-0": "sum-b"}, ["sum-a"])) == 1


def test_a_publication_must_publish_what_the_intent_names() -> None:
    assert inv.publication_not_named_by_intent(INTENT, "sum-b") == []
    assert len(inv.publication_not_named_by_intent(INTENT, "sum-a")) == 1
    assert inv.publication_not_named_by_intent(None, "sum-a") == []


def test_writes_after_the_lease_is_gone() -> None:
    writes = [inv.Write(("r", 1), 3, "PUT", "a"), inv.Write(("r", 1), 5, "PUT", "b")]
    assert inv.writes_after_lease_gone(writes, {}) == []
    found = inv.writes_after_lease_gone(writes, {("r", 1): 4})
    assert found == ["term r@1 sent PUT b after its Lease was gone"]


def test_a_stale_refusal_of_the_current_term_is_a_violation() -> None:
    from controller.deploy.deployer import HAProxyPod, PodOutcome

    pod = HAProxyPod("haproxy-0", "uid", "10.0.0.1")
    refused = PodOutcome(pod, "refused", None, error="409", reason="stale_sequence")
    retried = PodOutcome(pod, "refused", None, error="409", reason="unexpected_previous_plan")
    assert inv.current_term_fenced_out([retried, PodOutcome(pod, "reload", None)]) == []
    assert inv.current_term_fenced_out([refused]) == [
        "haproxy-0 refused the current term's apply: stale_sequence"
    ]

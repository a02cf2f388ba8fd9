"""Receipts, checkpoint selection, fleet agreement and retention (pure ADR-0033 decisions)."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from controller.retained.fleet import FileDigest, PodReport
from controller.retained.intent import DeploymentIntent
from controller.retained.receipts import PodReceipt, acknowledgement
from controller.retained.retention import (
    CheckpointRecord,
    ChildRecord,
    checkpoint_deletions,
    promote_pointer,
    prune_pointers,
    retained_names,
    shared_child_deletions,
)
from controller.retained.selection import (
    CheckpointPointer,
    CheckpointSnapshot,
    evaluate_recovery,
    select_checkpoint,
)

FILES = {"haproxy.cfg": FileDigest("aa", 10), "maps/hosts.map": FileDigest("bb", 5)}
NEWER_FILES = {"haproxy.cfg": FileDigest("cc", 11), "maps/hosts.map": FileDigest("bb", 5)}


def receipt(plan: str, checksum: str, pod: str = "haproxy-0") -> PodReceipt:
    return PodReceipt(pod, f"uid-{pod}", "rt-1", checksum, plan, plan, plan, "reload")


def snapshot(plan: str, checksum: str, files=FILES, **kw) -> CheckpointSnapshot:
    return CheckpointSnapshot(
        name=f"cp-{checksum[-6:]}",
        uid=f"uid-{plan}",
        checksum=checksum,
        plan_id=plan,
        files=files,
        receipt=kw.pop("receipt", receipt(plan, checksum)),
        **kw,
    )


def pointer(s: CheckpointSnapshot) -> CheckpointPointer:
    return CheckpointPointer(s.name, s.uid, s.checksum)


def configured(name: str, plan: str, checksum: str, files=FILES, **kw) -> PodReport:
    base = dict(
        pod_name=name,
        pod_uid=f"uid-{name}",
        runtime_id="rt",
        applied_plan_id=plan,
        running_plan_id=plan,
        worker_operation_plan_id=plan,
        last_known_good_plan_id=plan,
        applied_checksum=checksum,
        applied_epoch=3,
        files=dict(files),
    )
    base.update(kw)
    return PodReport(**base)


def bootstrap(name: str) -> PodReport:
    return PodReport(pod_name=name, pod_uid=f"uid-{name}", runtime_id="rt")


OLD = snapshot("plan-1", "sha256:000001")
NEW = snapshot("plan-2", "sha256:000002", files=NEWER_FILES)
INTENT_NEW = DeploymentIntent("plan-2", "sha256:000002", "a", 3, "t")
INTENT_OLD = DeploymentIntent("plan-1", "sha256:000001", "a", 3, "t")
SNAPSHOTS = {OLD.name: OLD, NEW.name: NEW}


# -- receipts -------------------------------------------------------------------------


def test_reload_and_runtime_acknowledgements() -> None:
    report = configured("p", "plan-2", "sha256:2")
    ack = acknowledgement(report, "plan-2", "sha256:2")
    assert ack is not None and ack.mode == "reload"
    runtime = configured("p", "plan-2", "sha256:2", running_plan_id="plan-1")
    ack = acknowledgement(runtime, "plan-2", "sha256:2")
    assert ack is not None and ack.mode == "runtime" and ack.running_plan_id == "plan-1"
    assert ack.as_status()["workerOpsPlanID"] == "plan-2"
    assert PodReceipt.from_status(ack.as_status()) == ack


def test_a_file_only_apply_is_acknowledged_as_file_only() -> None:
    """The agent says how its worker came to match the worker-operation plan; the receipt
    keeps it, so a file-only deployment is never recorded as a runtime one."""
    state = {
        "applied_plan_id": "plan-2",
        "applied_checksum": "sha256:2",
        "running_plan_id": "plan-1",
        "worker_operation_plan_id": "plan-2",
        "worker_operation_mode": "file-only",
        "runtime_id": "rt",
        "applied_token": {"holder": "a", "epoch": 3, "sequence": 1},
    }
    report = PodReport.from_agent_state("p", "uid-p", state, True)
    ack = acknowledgement(report, "plan-2", "sha256:2")
    assert ack is not None and ack.mode == "file-only"
    assert PodReceipt.from_status(ack.as_status()) == ack
    runtime = PodReport.from_agent_state(
        "p", "uid-p", {**state, "worker_operation_mode": "runtime"}, True
    )
    assert acknowledgement(runtime, "plan-2", "sha256:2").mode == "runtime"
    # An agent that does not say (an older one) keeps the old reading: runtime.
    older = {k: v for k, v in state.items() if k != "worker_operation_mode"}
    old = PodReport.from_agent_state("p", "uid-p", older, True)
    assert acknowledgement(old, "plan-2", "sha256:2").mode == "runtime"
    # A worker started from the plan is a reload whatever the last operation was.
    reloaded = {**state, "running_plan_id": "plan-2"}
    report = PodReport.from_agent_state("p", "uid-p", reloaded, True)
    assert acknowledgement(report, "plan-2", "sha256:2").mode == "reload"


def test_a_receipt_names_the_term_whose_token_applied_the_plan() -> None:
    """The agent records the fencing token of the apply that put its plan in place; the
    receipt carries that term into status (and the history); an entry without one (written
    before receipts carried it) still parses, with no term."""
    state = {
        "runtime_id": "rt",
        "applied_plan_id": "plan-2",
        "applied_checksum": "sha256:2",
        "running_plan_id": "plan-2",
        "worker_operation_plan_id": "plan-2",
        "applied_token": {"holder": "controller-1", "epoch": 7, "sequence": 4},
    }
    ack = acknowledgement(
        PodReport.from_agent_state("p", "uid-p", state, True), "plan-2", "sha256:2"
    )
    assert ack is not None and (ack.holder, ack.epoch) == ("controller-1", 7)
    entry = ack.as_status()
    assert entry["term"] == {"holder": "controller-1", "epoch": 7}
    assert PodReceipt.from_status(entry) == ack
    older = {k: v for k, v in entry.items() if k != "term"}
    parsed = PodReceipt.from_status(older)
    assert parsed is not None and (parsed.holder, parsed.epoch) == ("", None)
    assert "term" not in parsed.as_status()
    for bad in ({"holder": "", "epoch": 1}, {"holder": "x", "epoch": "1"}, "x", {"epoch": 2}):
        assert PodReceipt.from_status({**older, "term": bad}).epoch is None  # type: ignore[union-attr]


def test_a_scheduled_reload_is_not_an_acknowledgement() -> None:
    pending = configured(
        "p",
        "plan-2",
        "sha256:2",
        running_plan_id="plan-1",
        worker_operation_plan_id="plan-1",
        pending_reload=True,
    )
    assert acknowledgement(pending, "plan-2", "sha256:2") is None
    # Even a pending reload on top of a matching worker is refused.
    assert acknowledgement(replace(pending, running_plan_id="plan-2"), "plan-2", "sha256:2") is None


def test_no_acknowledgement_without_worker_evidence_or_with_violations() -> None:
    unconfirmed = configured(
        "p", "plan-2", "sha256:2", running_plan_id="plan-1", worker_operation_plan_id="plan-1"
    )
    assert acknowledgement(unconfirmed, "plan-2", "sha256:2") is None
    assert acknowledgement(configured("p", "plan-2", "sha256:x"), "plan-2", "sha256:2") is None
    violated = configured("p", "plan-2", "sha256:2", invariant_violation="journal left behind")
    assert acknowledgement(violated, "plan-2", "sha256:2") is None
    assert acknowledgement(PodReport.unreachable("p", "u"), "plan-2", "sha256:2") is None
    assert (
        acknowledgement(
            configured("p", "plan-2", "sha256:2", runtime_id=None), "plan-2", "sha256:2"
        )
        is None
    )


def test_incomplete_status_entries_are_not_receipts() -> None:
    entry = receipt("plan-1", "sha256:1").as_status()
    for key in entry:
        assert PodReceipt.from_status({k: v for k, v in entry.items() if k != key}) is None
    assert PodReceipt.from_status({**entry, "mode": "scheduled"}) is None


# -- selection ----------------------------------------------------------------------------


def test_selects_only_the_checkpoint_the_intent_names_whatever_the_order() -> None:
    for pointers in ([pointer(OLD), pointer(NEW)], [pointer(NEW), pointer(OLD)]):
        assert select_checkpoint(INTENT_NEW, pointers, SNAPSHOTS) == NEW
        assert select_checkpoint(INTENT_OLD, pointers, SNAPSHOTS) == OLD


def test_a_newer_apply_without_a_saved_checkpoint_refuses_the_older_one() -> None:
    verdict = evaluate_recovery(INTENT_NEW, [pointer(OLD)], {OLD.name: OLD}, [bootstrap("b")])
    assert not verdict.eligible
    assert verdict.checkpoint is None and verdict.targets == ()
    assert "checkpoint-matches-intent" in verdict.reason


def test_no_intent_no_recovery() -> None:
    verdict = evaluate_recovery(None, [pointer(OLD)], SNAPSHOTS, [bootstrap("b")])
    assert not verdict.eligible


def test_all_bootstrap_fleet_recovers_with_the_worker_receipt() -> None:
    fleet = [bootstrap("b1"), bootstrap("b2")]
    verdict = evaluate_recovery(INTENT_NEW, [pointer(NEW), pointer(OLD)], SNAPSHOTS, fleet)
    assert verdict.eligible, verdict.reason
    assert verdict.checkpoint == NEW and verdict.targets == ("b1", "b2")
    no_receipt = replace(NEW, receipt=None)
    verdict = evaluate_recovery(INTENT_NEW, [pointer(NEW)], {NEW.name: no_receipt}, fleet)
    assert not verdict.eligible and "worker-receipt" in verdict.reason


def test_configured_pods_must_agree_and_only_bootstrap_pods_are_targets() -> None:
    fleet = [configured("c1", "plan-2", NEW.checksum, NEWER_FILES), bootstrap("b1")]
    verdict = evaluate_recovery(INTENT_NEW, [pointer(NEW)], SNAPSHOTS, fleet)
    assert verdict.eligible, verdict.reason
    assert verdict.targets == ("b1",)  # the configured pod gets nothing


def test_pod_disagreement_rejects_recovery() -> None:
    cases = {
        "mixed plans": configured("c1", "plan-1", OLD.checksum),
        "pending reload": configured(
            "c1", "plan-2", NEW.checksum, NEWER_FILES, pending_reload=True
        ),
        "file set": configured("c1", "plan-2", NEW.checksum, FILES),
        "unverifiable": replace(
            configured("c1", "plan-2", NEW.checksum, NEWER_FILES), verified=False
        ),
        "unreachable": PodReport.unreachable("c1", "uid-c1"),
        "violation": configured("c1", "plan-2", NEW.checksum, NEWER_FILES, invariant_violation="x"),
    }
    for case, pod in cases.items():
        verdict = evaluate_recovery(INTENT_NEW, [pointer(NEW)], SNAPSHOTS, [pod, bootstrap("b")])
        assert not verdict.eligible, case
        assert verdict.targets == (), case
        failed = [c for c in verdict.checks if not c.passed]
        assert failed and all(c.pod == "c1" for c in failed), case


def test_tampered_or_forged_checkpoint_is_refused() -> None:
    tampered = replace(NEW, integrity_error="content digest mismatch for haproxy.cfg")
    verdict = evaluate_recovery(INTENT_NEW, [pointer(NEW)], {NEW.name: tampered}, [bootstrap("b")])
    assert not verdict.eligible and "digest mismatch" in verdict.reason
    forged_uid = CheckpointPointer(NEW.name, "someone-else", NEW.checksum)
    verdict = evaluate_recovery(INTENT_NEW, [forged_uid], SNAPSHOTS, [bootstrap("b")])
    assert not verdict.eligible


def test_nothing_to_recover_without_bootstrap_pods() -> None:
    fleet = [configured("c1", "plan-2", NEW.checksum, NEWER_FILES)]
    verdict = evaluate_recovery(INTENT_NEW, [pointer(NEW)], SNAPSHOTS, fleet)
    assert not verdict.eligible and verdict.targets == ()


def test_fleet_changes_before_dispatch_are_seen_by_a_fresh_evaluation() -> None:
    fleet = [bootstrap("b1")]
    assert evaluate_recovery(INTENT_NEW, [pointer(NEW)], SNAPSHOTS, fleet).eligible
    # A pod configured by someone else appears before dispatch: recheck refuses.
    fleet.append(configured("c9", "plan-9", "sha256:9"))
    assert not evaluate_recovery(INTENT_NEW, [pointer(NEW)], SNAPSHOTS, fleet).eligible


pod_strategy = st.one_of(
    st.builds(bootstrap, st.sampled_from(["a", "b", "c", "d"])),
    st.builds(
        configured,
        st.sampled_from(["a", "b", "c", "d"]),
        st.sampled_from(["plan-1", "plan-2", "plan-3"]),
        st.sampled_from([OLD.checksum, NEW.checksum]),
        st.sampled_from([FILES, NEWER_FILES]),
        pending_reload=st.booleans(),
    ),
    st.builds(PodReport.unreachable, st.sampled_from(["a", "b", "c", "d"]), st.just("u")),
)


@given(
    st.lists(pod_strategy, max_size=5, unique_by=lambda p: p.pod_name),
    st.sampled_from([INTENT_NEW, INTENT_OLD, None]),
    st.permutations([pointer(OLD), pointer(NEW)]),
)
def test_recovery_properties(fleet, intent, pointers) -> None:
    verdict = evaluate_recovery(intent, pointers, SNAPSHOTS, fleet)
    if verdict.eligible:
        assert intent is not None and verdict.checkpoint is not None
        # Only the intended checkpoint is ever used.
        assert (verdict.checkpoint.plan_id, verdict.checkpoint.checksum) == (
            intent.plan_id,
            intent.checksum,
        )
        by_name = {p.pod_name: p for p in fleet}
        # Targets are exactly the bootstrap pods; configured pods are never targets.
        assert set(verdict.targets) == {n for n, p in by_name.items() if p.is_bootstrap}
        assert all(p.reachable for p in fleet)
        for p in fleet:
            if not p.is_bootstrap:
                assert p.applied_plan_id == intent.plan_id and not p.pending_reload
    else:
        assert verdict.targets == ()


# -- retention -------------------------------------------------------------------------


def test_promotion_puts_the_newest_first_and_reuses_an_address() -> None:
    p1, p2 = pointer(OLD), pointer(NEW)
    assert promote_pointer([p1], p2) == [p2, p1]
    assert promote_pointer([p2, p1], p2) == [p2, p1]


def test_retention_keeps_newest_predecessor_and_reported_checksums() -> None:
    pointers = [CheckpointPointer(f"cp{i}", f"u{i}", f"sha256:{i}") for i in range(5, 0, -1)]
    assert retained_names(pointers, []) == {"cp5", "cp4"}
    assert retained_names(pointers, ["sha256:1"]) == {"cp5", "cp4", "cp1"}
    assert [p.name for p in prune_pointers(pointers, ["sha256:2"])] == ["cp5", "cp4", "cp2"]


def test_gc_deletes_only_this_templates_unreferenced_checkpoints() -> None:
    records = [
        CheckpointRecord("cp1", "u1", "c1", "t"),
        CheckpointRecord("cp2", "u2", "c2", "t"),
        CheckpointRecord("cp3", "u3", "c3", "other-template"),
    ]
    deletions = checkpoint_deletions(records, keep={"cp2"}, template_uid="t")
    assert [r.name for r in deletions] == ["cp1"]


def test_shared_children_are_deleted_only_when_unreferenced_and_committed() -> None:
    children = [
        ChildRecord("HAProxyMapFile", "map-a", "ua", "10", "t"),
        ChildRecord("HAProxyMapFile", "map-b", "ub", "11", "t"),
        ChildRecord("HAProxyMapFile", "map-c", "uc", "12", "other"),
    ]
    remaining = [CheckpointRecord("cp2", "u2", "c2", "t", frozenset({"map-b"}))]
    assert [c.name for c in shared_child_deletions(children, remaining, "t")] == ["map-a"]
    uncommitted = [*remaining, CheckpointRecord("cp3", "u3", "c3", "t", committed=False)]
    assert shared_child_deletions(children, uncommitted, "t") == []


@given(
    st.lists(st.integers(min_value=1, max_value=30), min_size=1, max_size=12, unique=True),
    st.sets(st.integers(min_value=1, max_value=30), max_size=5),
)
def test_retention_properties(ids, reported) -> None:
    pointers = [CheckpointPointer(f"cp{i}", f"u{i}", f"sha256:{i}") for i in ids]
    keep = retained_names(pointers, [f"sha256:{i}" for i in reported])
    assert {p.name for p in pointers[:2]} <= keep
    for p in pointers:
        if int(p.name[2:]) in reported:
            assert p.name in keep
    assert keep <= {p.name for p in pointers}

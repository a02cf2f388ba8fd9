"""The soak's invariant checks (soak/invariants.py): pure functions over recorded samples."""

from __future__ import annotations

import json
from datetime import datetime

from soak import invariants as inv
from soak.invariants import PodObservation as Obs
from soak.invariants import RequestRecord, Sample, Window


def req(t: float, pod: str = "p1", ok: bool = False) -> RequestRecord:
    return RequestRecord(t, pod, "x.example", ok, None if not ok else 200, 1.0, "" if ok else "E")


def sample(t: float, intent: str | None, **pods: tuple[str | None, int]) -> Sample:
    return Sample(t, intent, "c0", 1, {n: Obs(c, n_) for n, (c, n_) in pods.items()})


# -- requests ---------------------------------------------------------------------------


def test_failures_in_steady_state_are_violations() -> None:
    result = inv.check_request_failures([req(1, ok=True), req(2)], [], grace=3)
    assert result.checked == 2 and len(result.violations) == 1
    assert "steady state" in result.violations[0]


def test_failures_are_allowed_only_for_the_faulted_pod_within_the_grace() -> None:
    window = Window("haproxy_pod_delete", 10, 20, frozenset({"p1"}))
    records = [req(15, "p1"), req(22.5, "p1"), req(15, "p2"), req(24, "p1")]
    result = inv.check_request_failures(records, [window], grace=3)
    assert len(result.violations) == 2  # p2 during the window, p1 after the grace
    assert "during haproxy_pod_delete" in result.violations[0]
    assert result.notes["allowed_by_fault"] == {"haproxy_pod_delete": 2}


def test_a_request_in_flight_when_the_fault_starts_belongs_to_it() -> None:
    window = Window("haproxy_worker_kill", 10, 20, frozenset({"p1"}))
    in_flight = RequestRecord(9.99, "p1", "x.example", False, None, 50.0, "RemoteProtocolError")
    assert inv.check_request_failures([in_flight], [window], grace=3).ok
    before = RequestRecord(9.5, "p1", "x.example", False, None, 50.0, "RemoteProtocolError")
    assert not inv.check_request_failures([before], [window], grace=3).ok


def test_a_window_that_allows_no_failures() -> None:
    window = Window("leader_sigkill", 10, 20, frozenset(), leader_change=True)
    assert not inv.check_request_failures([req(12, "p1")], [window], grace=3).ok
    anything = Window("broken", 10, 20, None)
    assert inv.check_request_failures([req(12, "p9")], [anything], grace=3).ok


# -- intent order ------------------------------------------------------------------------


def test_a_pod_following_the_intent_is_fine() -> None:
    samples = [
        sample(0, "A", p1=("A", 1), p2=("A", 1)),
        sample(1, "B", p1=("A", 1), p2=("A", 1)),
        sample(2, "B", p1=("B", 2), p2=("A", 1)),
        sample(3, "B", p1=("B", 2), p2=("B", 2)),
    ]
    result = inv.check_intent_order(samples)
    assert result.ok and result.checked == 2


def test_an_apply_seen_before_its_intent_counts_as_later() -> None:
    # The sampler read the intent (A), then the pod had already applied B; B shows next.
    samples = [
        sample(0, "A", p1=("A", 1)),
        sample(1, "A", p1=("B", 2)),
        sample(2, "B", p1=("B", 2)),
    ]
    assert inv.check_intent_order(samples).ok


def test_going_back_to_an_older_checkpoint_is_a_violation() -> None:
    samples = [
        sample(0, "A", p1=("A", 1)),
        sample(1, "B", p1=("B", 2)),
        sample(2, "B", p1=("A", 3)),  # reverted while the intent names B
    ]
    result = inv.check_intent_order(samples)
    assert len(result.violations) == 1 and "older than the intent" in result.violations[0]


def test_a_recovered_bootstrap_pod_must_get_the_current_intent() -> None:
    ok = [sample(0, "B", p1=("B", 1)), sample(1, "B", p1=("B", 1), p3=(None, 0))]
    ok.append(sample(2, "B", p1=("B", 1), p3=("B", 1)))
    assert inv.check_intent_order(ok).ok
    history = [sample(0, "A", p1=("A", 1)), sample(1, "B", p1=("B", 2), p3=(None, 0))]
    history.append(sample(2, "B", p1=("B", 2), p3=("A", 1)))
    assert not inv.check_intent_order(history).ok


def test_a_plan_no_intent_ever_named_is_reported() -> None:
    samples = [sample(0, "A", p1=("A", 1)), sample(1, "A", p1=("Z", 2))]
    result = inv.check_intent_order(samples)
    assert result.notes["unnamed"] == 1 and not result.ok


def test_an_unreadable_intent_keeps_the_last_known_one() -> None:
    samples = [
        sample(0, "A", p1=("A", 1)),
        sample(1, None, p1=("A", 1)),
        sample(2, "B", p1=("B", 2)),
    ]
    assert inv.check_intent_order(samples).ok


# -- recovery applies ------------------------------------------------------------------


def test_configured_pods_get_no_apply_while_rendering_is_broken() -> None:
    window = Window("template_broken", 10, 30, frozenset({"p2"}), rendering_broken=True)
    samples = [
        sample(13, "A", p1=("A", 5), p3=(None, 0)),
        sample(20, "A", p1=("A", 5), p3=("A", 1)),  # the bootstrap pod recovered: fine
        sample(25, "A", p1=("A", 5), p3=("A", 1)),
    ]
    assert inv.check_no_recovery_apply(samples, [window]).ok
    samples.append(sample(28, "A", p1=("A", 6), p3=("A", 1)))
    result = inv.check_no_recovery_apply(samples, [window])
    assert len(result.violations) == 1 and "p1" in result.violations[0]


def test_applies_before_the_settle_time_or_after_repair_are_not_counted() -> None:
    window = Window("template_broken", 10, 30, frozenset(), rendering_broken=True)
    samples = [
        sample(10.5, "A", p1=("A", 4)),
        sample(12.5, "A", p1=("A", 5)),  # an apply in flight when the template broke
        sample(20, "A", p1=("A", 5)),
        sample(31, "B", p1=("B", 6)),  # after the repair
    ]
    assert inv.check_no_recovery_apply(samples, [window], settle=2.0).ok


def test_an_agent_restart_resets_the_baseline() -> None:
    window = Window("template_broken", 0, 30, frozenset(), rendering_broken=True)
    samples = [
        Sample(5, "A", pods={"p1": Obs("A", 5, 1, "r1")}),
        Sample(6, "A", pods={"p1": Obs("A", 0, 2, "r2")}),
        Sample(7, "A", pods={"p1": Obs("A", 0, 2, "r2")}),
    ]
    assert inv.check_no_recovery_apply(samples, [window]).ok


# -- leadership ------------------------------------------------------------------------


def test_leader_changes_must_fall_in_leader_fault_windows() -> None:
    samples = [
        Sample(0, "A", "c0", 1),
        Sample(5, "A", "c1", 2),
        Sample(50, "A", "c0", 3),
        Sample(51, None, None, None),  # unreadable: skipped
    ]
    windows = [Window("leader_sigkill", 3, 4, frozenset(), leader_change=True)]
    result = inv.check_leader_changes(samples, windows, grace=2)
    assert result.notes == {"transitions": 2, "expected": 1}
    assert len(result.violations) == 1 and "c1@2 -> c0@3" in result.violations[0]


def test_lease_log_lines_are_parsed_and_judged() -> None:
    stamp = datetime(2026, 11, 30, 9, 0, 0)
    lines = [
        "[2026-11-30 09:00:00,250: INFO/MainProcess] c0: lost the race to write the lease: 409",
        "[2026-11-30 09:00:01,000: INFO/MainProcess] c0: became leader (epoch 3)",
        "[2026-11-30 09:00:02,000: WARNING/MainProcess] c0: leadership ended (epoch 3): lost",
        "no timestamp: cannot write lease",
    ]
    parsed = inv.parse_lease_log(lines)
    assert [k for _, k, _ in parsed] == ["lost_race", "term_ended"]
    assert abs(parsed[0][0] - (stamp.timestamp() + 0.25)) < 1e-6
    entries = [(t, "controller-0", k, line) for t, k, line in parsed]
    window = Window("api_blackhole", stamp.timestamp() + 1.5, stamp.timestamp() + 1.8)
    both = inv.check_lease_renewals(entries, [window], grace=1)
    assert len(both.violations) == 2  # the window does not allow leader changes
    leader_window = Window("x", window.start, window.end, leader_change=True)
    result = inv.check_lease_renewals(entries, [leader_window], grace=1)
    assert len(result.violations) == 1 and "lost the race" in result.violations[0]


# -- mirror ----------------------------------------------------------------------------


def test_everything_observed_must_be_mirrored() -> None:
    observed = {"checkpoints": {"u1", "u2"}, "events": {"e1"}}
    assert inv.check_mirror(observed, {"checkpoints": {"u1", "u2", "u3"}, "events": {"e1"}}).ok
    result = inv.check_mirror(observed, {"checkpoints": {"u1"}})
    assert len(result.violations) == 2
    assert result.notes["checkpoints"] == {"observed": 2, "mirrored": 1, "missing": 1}
    assert inv.Result("x", ran=False).as_dict()["status"] == "not run"


# -- at rest the intent names what every pod runs ---------------------------------------------


def test_a_pod_off_the_intent_at_rest_is_reported_once() -> None:
    samples = [
        sample(1, "A", p1=("A", 1), p2=("A", 1)),
        sample(2, "B", p1=("A", 1), p2=("B", 2)),  # hole 1: the intent names B, p1 runs A
        sample(3, "B", p1=("A", 1), p2=("B", 2)),
    ]
    result = inv.check_intent_at_rest(samples, [], grace=0)
    assert result.checked == 6
    assert len(result.violations) == 1 and "p1 runs A" in result.violations[0]


def test_pods_off_the_intent_inside_a_window_and_bootstrap_pods_are_not_judged() -> None:
    samples = [sample(5, "B", p1=("A", 1), p2=(None, 0)), sample(30, "B", p1=("B", 2))]
    result = inv.check_intent_at_rest(samples, [Window("ingress_change", 4, 6)], grace=3)
    assert result.checked == 1 and result.ok


def test_a_sample_whose_round_reaches_into_a_window_is_not_judged_at_rest() -> None:
    """The sampler reads the intent first and the agents after: a round that began just
    before a fault can read the old intent and then a pod the fault's deployment already
    reached (seed 3: 0.35 s before ingress_change). The round ends before the next begins."""
    samples = [
        sample(10.0, "A", p1=("A", 1)),
        sample(19.6, "A", p1=("B", 2)),  # round began before the window, read p1 inside it
        sample(20.5, "B", p1=("B", 2)),
        sample(40.0, "B", p1=("B", 2)),
    ]
    result = inv.check_intent_at_rest(samples, [Window("ingress_change", 20.0, 21.0)], grace=3)
    assert result.ok, result.violations
    assert result.checked == 2


def test_a_round_that_spans_a_new_intent_is_not_judged_against_the_old_one() -> None:
    """The intent is recorded before its apply, so a round that read intent A and then a
    pod already on B saw a deployment of B begin inside it, not a pod off the intent (seed
    12 at start-up: two renders 0.5 s apart). A pod still on the old output, or on an output
    the next round's intent does not name, is judged as before."""
    samples = [
        sample(1.0, "A", p1=("A", 1), p2=("B", 2)),  # intent read as A, then p2 took B
        sample(1.5, "B", p1=("B", 2), p2=("B", 2)),
        sample(2.0, "B", p1=("B", 2), p2=("D", 3)),  # D: named by no intent, before or after
        sample(2.5, "C", p1=("B", 2), p2=("C", 4)),  # p1 left behind on B
    ]
    result = inv.check_intent_at_rest(samples, [], grace=0)
    assert result.checked == 8
    assert [v.split(" at rest")[0] for v in result.violations] == [
        "t=2.000 p2 runs D",
        "t=2.500 p1 runs B",
    ], result.violations


# -- the retained-config gauge ------------------------------------------------------------------


def test_the_gauge_must_be_zero_after_convergence() -> None:
    result = inv.check_gauge_after_convergence([(1, "c0", 0.0), (2, "c1", 1.0), (3, "c0", None)])
    assert result.checked == 2 and result.notes == {"unread": 1}
    assert result.violations == ["t=2.000 c1: gauge 1 after convergence"]


def test_gauge_value_reads_the_unlabelled_sample() -> None:
    from soak.faults import gauge_value

    text = (
        "# HELP haptic_retained_config_active 1 while ...\n"
        "# TYPE haptic_retained_config_active gauge\n"
        "haptic_retained_config_active 1.0\n"
        "haptic_retained_config_active_other 5.0\n"
    )
    assert gauge_value(text, "haptic_retained_config_active") == 1.0
    assert gauge_value("", "haptic_retained_config_active") is None


def test_incremental_mismatches_are_violations() -> None:
    result = inv.check_incremental_agrees([(1, "c0", 0.0), (2, "c1", 2.0), (3, "c0", None)])
    assert result.checked == 2
    assert result.violations == ["t=2.000 c1: 2 mismatches"]
    assert result.notes == {"unread": 1}


LEASE = "/apis/coordination.k8s.io/v1/namespaces/haptic/leases/haptic-leader"
CFG = "/apis/haproxy-haptic.org/v1alpha1/namespaces/haptic/haproxycfgs/haptic"
MAP = "/apis/haproxy-haptic.org/v1alpha1/namespaces/haptic/haproxymapfiles/haptic-hosts"
TEMPLATE = "/apis/haproxy-haptic.org/v1alpha1/namespaces/haptic/haproxytemplateconfigs/haptic"


def lease_write(t: float, writer: str, holder: str, verb: str = "PUT") -> inv.ApiWrite:
    return inv.ApiWrite(t, verb, LEASE, writer, 200, holder, "haptic-leader")


def cfg_write(t: float, writer: str | None, path: str = CFG) -> inv.ApiWrite:
    return inv.ApiWrite(t, "PUT", path, writer, 200)


def test_a_write_after_the_writer_released_its_lease_is_flagged() -> None:
    history = [
        lease_write(1.0, "controller-0", "controller-0"),
        cfg_write(2.0, "controller-0"),
        lease_write(3.0, "controller-0", ""),  # graceful release
        cfg_write(3.5, "controller-0", MAP),  # the drain should have stopped this
        lease_write(4.0, "controller-1", "controller-1"),
        cfg_write(5.0, "controller-0"),  # and this: taken by now
        cfg_write(6.0, "controller-1"),
    ]
    result = inv.check_no_write_after_release(history, "haptic-leader")
    assert result.checked == 4
    assert len(result.violations) == 2, result.violations
    assert all("controller-0 sent" in v and "released" in v for v in result.violations)
    assert "t=3.500" in result.violations[0] and "t=5.000" in result.violations[1]
    taken = [lease_write(1.0, "controller-0", "controller-0"), *history[4:]]
    assert (
        "taken by controller-1"
        in inv.check_no_write_after_release(taken, "haptic-leader").violations[0]
    )


def test_writes_only_by_the_holder_pass_and_others_never_holding_are_flagged() -> None:
    history = [
        lease_write(1.0, "controller-0", "controller-0"),
        cfg_write(2.0, "controller-0"),
        inv.ApiWrite(2.5, "PATCH", TEMPLATE, "controller-1", 200),  # status: any replica
        lease_write(3.0, "controller-0", ""),
        lease_write(3.2, "controller-1", "controller-1"),
        cfg_write(3.4, "controller-1"),
        lease_write(9.0, "controller-0", "controller-0"),  # expiry take-over back
        cfg_write(9.5, "controller-0"),
    ]
    assert inv.check_no_write_after_release(history, "haptic-leader").ok
    strays = [cfg_write(10.0, "controller-2"), cfg_write(11.0, None)]
    flagged = inv.check_no_write_after_release(history + strays, "haptic-leader")
    assert len(flagged.violations) == 2
    assert "never held" in flagged.violations[0]
    assert "without a replica identity" in flagged.violations[1]


def test_a_write_after_the_lease_was_deleted_is_noted_until_another_holds_it() -> None:
    history = [
        lease_write(1.0, "controller-0", "controller-0"),
        lease_write(2.0, "soak", "", verb="DELETE"),
        cfg_write(2.01, "controller-0"),  # its term check came just before the deletion
        lease_write(3.0, "controller-1", "controller-1", verb="POST"),
        cfg_write(4.0, "controller-0"),
    ]
    result = inv.check_no_write_after_release(history, "haptic-leader")
    assert result.notes["after_lease_deleted"] == 1
    assert len(result.violations) == 1 and "taken by controller-1" in result.violations[0]


def test_the_audit_log_is_read_with_the_writers_identity() -> None:
    agent = "haptic-controller/c-1"
    lines = [
        json.dumps({"t": 2.0, "verb": "PUT", "path": CFG, "userAgent": agent, "code": 200}),
        json.dumps(
            {
                "t": 1.0,
                "verb": "PUT",
                "path": LEASE,
                "userAgent": agent,
                "code": 200,
                "lease": "haptic-leader",
                "holder": "c-1",
            }
        ),
        json.dumps({"t": 3.0, "verb": "POST", "path": "/api/v1/x", "userAgent": "kubectl/v1.3"}),
        "not json",
    ]
    writes = inv.parse_audit(lines)
    assert [w.t for w in writes] == [1.0, 2.0, 3.0]
    assert writes[0].holder == "c-1" and writes[0].lease == "haptic-leader"
    assert writes[1].writer == "c-1" and writes[1].lease is None and writes[2].writer is None


def promotion(**changes: object) -> inv.PromotionRound:
    fields: dict = {
        "t": 1.0,
        "intent": "sha256:p",
        "promoted": "ctl-b-0",
        "before": {"h-0": ("sha256:p", "ctl-a-0"), "h-1": ("sha256:p", "ctl-a-0")},
        "after": {"h-0": ("sha256:p", "ctl-a-0"), "h-1": ("sha256:p", "ctl-a-0")},
        "replacement": ("sha256:p", "ctl-b-0"),
    }
    return inv.PromotionRound(**(fields | changes))


def test_a_promoted_standby_round_that_recovers_the_intent_passes() -> None:
    recovered, untouched = inv.check_promoted_recovery([promotion()])
    assert recovered.ok and recovered.checked == 1
    assert untouched.ok and untouched.checked == 2


def test_a_promoted_standby_round_that_recovers_wrongly_is_flagged() -> None:
    rounds = [
        promotion(replacement=None),  # never Ready
        promotion(replacement=("sha256:older", "ctl-b-0")),  # an older checkpoint
        promotion(after={"h-0": ("sha256:p", "ctl-b-0"), "h-1": ("sha256:p", "ctl-a-0")}),
    ]
    recovered, untouched = inv.check_promoted_recovery(rounds)
    assert len(recovered.violations) == 2
    assert "never became Ready" in recovered.violations[0]
    assert "sha256:older" in recovered.violations[1]
    assert len(untouched.violations) == 1 and "h-0" in untouched.violations[0]


# -- the render gate's refusal after dispatch -------------------------------------------------


def test_a_refusal_never_reported_after_dispatch_is_a_violation() -> None:
    result = inv.check_gate_refusals([(10.0, 1.25), (50.0, None)])
    assert result.checked == 2
    assert result.violations == ["t=50.000 no /healthz reported a refusal after dispatch"]


# -- when the fleet is steady -----------------------------------------------------------------


def test_the_steady_stretch_starts_after_the_last_change_of_intent_or_pods() -> None:
    """Seed 3 at start-up: each sample looked healthy, yet the intent moved three times in
    1.5 s; judging from the first healthy sample reported the burst as at rest."""
    burst = [
        sample(0.0, "A", p1=("A", 1)),
        sample(0.5, "B", p1=("X", 2)),  # a plan no sampled intent names, mid-burst
        sample(1.0, "C", p1=("C", 3)),
        sample(1.5, "C", p1=("C", 3)),
    ]
    assert inv.steady_start(burst, 3.0) is None
    steady = [*burst, sample(3.0, "C", p1=("C", 3)), sample(4.5, "C", p1=("C", 3))]
    assert inv.steady_start(steady, 3.0) == 2
    assert inv.steady_start([], 3.0) is None

"""The kubelet's Ready rule, condition merging and phase, tested as pure functions."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from localcluster.node import podstatus as ps

GATE = "haproxy-haptic.org/load-balancer-ready"


def view(name: str, ready: bool, state: str = "running") -> ps.ContainerView:
    return ps.ContainerView(name=name, ready=ready, state=state)


def test_ready_needs_every_container_ready() -> None:
    cr = ps.containers_ready_condition([view("a", True), view("b", False)], "Running")
    assert (cr.status, cr.reason) == ("False", "ContainersNotReady")
    assert "[b]" in cr.message
    ready = ps.pod_ready_condition(cr, [], {})
    assert (ready.status, ready.reason) == ("False", "ContainersNotReady")


def test_missing_gate_condition_keeps_pod_not_ready() -> None:
    cr = ps.containers_ready_condition([view("a", True)], "Running")
    ready = ps.pod_ready_condition(cr, [GATE], {})
    assert (ready.status, ready.reason) == ("False", "ReadinessGatesNotReady")
    assert "does not exist" in ready.message


def test_false_gate_condition_keeps_pod_not_ready_and_true_makes_it_ready() -> None:
    cr = ps.containers_ready_condition([view("a", True)], "Running")
    assert ps.pod_ready_condition(cr, [GATE], {GATE: "False"}).status == "False"
    assert ps.pod_ready_condition(cr, [GATE], {GATE: "True"}).status == "True"


@settings(deadline=None)  # a loaded 2-core machine must not fail on speed
@given(
    containers=st.lists(st.booleans(), min_size=1, max_size=4),
    gates=st.dictionaries(
        st.sampled_from(["g1", "g2", "g3"]), st.sampled_from(["True", "False", "Unknown", None])
    ),
)
def test_ready_is_exactly_all_containers_and_all_gates(
    containers: list[bool], gates: dict[str, str | None]
) -> None:
    views = [view(f"c{i}", r) for i, r in enumerate(containers)]
    recorded = {k: v for k, v in gates.items() if v is not None}
    conds = ps.compute_conditions(
        views,
        "Running",
        ps.Condition("Initialized", "True"),
        list(gates),
        [{"type": k, "status": v} for k, v in recorded.items()],
    )
    expected = all(containers) and all(recorded.get(g) == "True" for g in gates)
    assert (conds.ready.status == "True") is expected
    assert (conds.containers_ready.status == "True") is all(containers)


def test_merge_keeps_foreign_conditions_and_transition_times() -> None:
    existing = [
        {"type": GATE, "status": "True", "lastTransitionTime": "2020-01-01T00:00:00Z"},
        {"type": "Ready", "status": "False", "lastTransitionTime": "2020-01-01T00:00:00Z"},
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2020-01-01T00:00:01Z"},
    ]
    mine = [ps.Condition("PodScheduled", "True"), ps.Condition("Ready", "True")]
    merged = ps.merge_conditions(existing, mine, "2030-01-01T00:00:00Z")
    by_type = {c["type"]: c for c in merged}
    assert by_type[GATE] == existing[0]
    assert by_type["PodScheduled"]["lastTransitionTime"] == "2020-01-01T00:00:01Z"
    assert by_type["Ready"]["status"] == "True"
    assert by_type["Ready"]["lastTransitionTime"] == "2030-01-01T00:00:00Z"


def test_phase() -> None:
    assert ps.pod_phase([view("a", False, "waiting")], "Always", True) == "Pending"
    assert ps.pod_phase([view("a", True)], "Always", True) == "Running"
    assert ps.pod_phase([view("a", True)], "Always", False) == "Pending"
    done = ps.ContainerView("a", False, "terminated", exit_code=0)
    failed = ps.ContainerView("b", False, "terminated", exit_code=2)
    assert ps.pod_phase([done], "Never", True) == "Succeeded"
    assert ps.pod_phase([done, failed], "Never", True) == "Failed"
    crashloop = ps.ContainerView("a", False, "waiting", will_restart=True)
    assert ps.pod_phase([crashloop], "Always", True) == "Running"
    assert ps.containers_ready_condition([done], "Succeeded").reason == "PodCompleted"


@settings(deadline=None)  # a loaded 2-core machine must not fail on speed
@given(
    st.lists(
        st.fixed_dictionaries(
            {
                "type": st.sampled_from(["Ready", "PodScheduled", "x/a", "x/b", GATE]),
                "status": st.sampled_from(["True", "False"]),
            }
        ),
        unique_by=lambda c: c["type"],
    ),
    st.sampled_from(["True", "False"]),
)
def test_merge_never_touches_foreign_conditions(existing: list[dict], ready: str) -> None:
    merged = ps.merge_conditions(existing, [ps.Condition("Ready", ready)], "t")
    foreign = [c for c in existing if c["type"] != "Ready"]
    assert [c for c in merged if c["type"] != "Ready"] == foreign
    assert [c["status"] for c in merged if c["type"] == "Ready"] == [ready]

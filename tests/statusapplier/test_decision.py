"""The status applier's pure decision: which backend pods get the gate condition."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from controller.statusapplier import (
    FIELD_MANAGER,
    GATE_CONDITION,
    PodView,
    apply_body,
    pods_to_write,
    view_of,
)


def pod(
    name: str,
    uid: str | None = None,
    gated: bool = True,
    gate: str | None = None,
    rv: str = "10",
    deleting: bool = False,
    other_gates: tuple[str, ...] = (),
) -> dict:
    conditions = [
        {"type": "PodScheduled", "status": "True"},
        {"type": "ContainersReady", "status": "True"},
        {"type": "Ready", "status": "False"},
    ]
    if gate is not None:
        conditions.append({"type": GATE_CONDITION, "status": gate})
    gates = [{"conditionType": g} for g in other_gates]
    if gated:
        gates.append({"conditionType": GATE_CONDITION})
    meta = {"namespace": "ns", "name": name, "uid": uid or f"uid-{name}", "resourceVersion": rv}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {
        "metadata": meta,
        "spec": {"readinessGates": gates},
        "status": {"conditions": conditions},
    }


def views(*pods: dict) -> dict[str, PodView | None]:
    return {f"ns/{p['metadata']['name']}": view_of(p) for p in pods}


def test_view_of_reads_gate_membership_condition_and_termination() -> None:
    v = view_of(pod("a", gate="False", rv="7", deleting=True, other_gates=("x/y",)))
    assert v == PodView("ns", "a", "uid-a", True, "False", True, "7")
    assert view_of(pod("b", gated=False, other_gates=("x/y",))).holds_gate is False
    assert view_of(pod("c")).gate_status is None
    assert view_of(None) is None
    assert (
        view_of({"metadata": {"name": "d"}, "spec": {"readinessGates": ["bad"]}}).holds_gate
        is False
    )


def test_writes_a_gated_pod_without_the_condition() -> None:
    assert [v.key for v in pods_to_write(["ns/a"], views(pod("a")), {})] == ["ns/a"]


def test_writes_a_pod_whose_condition_is_false() -> None:
    assert [v.key for v in pods_to_write(["ns/a"], views(pod("a", gate="False")), {})] == ["ns/a"]


def test_skips_a_pod_that_already_has_it_true() -> None:
    assert pods_to_write(["ns/a"], views(pod("a", gate="True")), {}) == []


def test_never_touches_a_pod_not_holding_the_gate() -> None:
    assert pods_to_write(["ns/a"], views(pod("a", gated=False, other_gates=("x/y",))), {}) == []


def test_skips_missing_and_terminating_pods() -> None:
    found = views(pod("b", deleting=True))
    found["ns/a"] = None
    assert pods_to_write(["ns/a", "ns/b", "ns/c"], found, {}) == []


def test_only_pods_the_render_listed() -> None:
    assert [v.key for v in pods_to_write(["ns/b"], views(pod("a"), pod("b")), {})] == ["ns/b"]


def test_a_write_this_term_is_not_repeated_while_the_cache_lags() -> None:
    # Our write returned rv 12; the cache still shows rv 10 without the condition.
    assert pods_to_write(["ns/a"], views(pod("a", rv="10")), {"uid-a": "12"}) == []
    # The cache at our own write's version (it would show True; even if not, no rewrite).
    assert pods_to_write(["ns/a"], views(pod("a", rv="12")), {"uid-a": "12"}) == []


def test_a_condition_reset_after_our_write_is_written_again() -> None:
    found = views(pod("a", gate="False", rv="15"))
    assert [v.key for v in pods_to_write(["ns/a"], found, {"uid-a": "12"})] == ["ns/a"]


def test_unordered_resource_versions_never_cause_a_rewrite() -> None:
    assert pods_to_write(["ns/a"], views(pod("a", rv="abc")), {"uid-a": "12"}) == []


def test_a_recreated_pod_with_the_same_name_is_a_new_pod() -> None:
    found = views(pod("a", uid="uid-new", rv="20"))
    assert [v.uid for v in pods_to_write(["ns/a"], found, {"uid-old": "30"})] == ["uid-new"]


def test_apply_body_owns_exactly_one_condition() -> None:
    body = apply_body("a", "uid-a", "2026-01-01T00:00:00Z", "m")
    assert body["metadata"] == {"name": "a", "uid": "uid-a"}  # the uid is a precondition
    assert [c["type"] for c in body["status"]["conditions"]] == [GATE_CONDITION]
    assert body["status"]["conditions"][0]["status"] == "True"
    assert set(body) == {"apiVersion", "kind", "metadata", "status"}
    assert FIELD_MANAGER == "haptic-deployed"


pod_state = st.tuples(
    st.booleans(),  # exists
    st.booleans(),  # holds the gate
    st.sampled_from([None, "True", "False", "Unknown"]),  # condition
    st.booleans(),  # terminating
    st.integers(1, 50),  # resourceVersion of the view
    st.one_of(st.none(), st.integers(1, 50)),  # our write's resourceVersion, this term
)


@given(st.dictionaries(st.sampled_from("abcdefgh"), pod_state, max_size=8), st.data())
def test_decision_properties(states: dict, data: st.DataObject) -> None:
    found: dict[str, PodView | None] = {}
    written: dict[str, str | None] = {}
    for name, (exists, gated, gate, deleting, rv, ours) in states.items():
        p = pod(name, gated=gated, gate=gate, rv=str(rv), deleting=deleting)
        found[f"ns/{name}"] = view_of(p) if exists else None
        if ours is not None:
            written[f"uid-{name}"] = str(ours)
    listed = data.draw(st.lists(st.sampled_from(sorted(found) or ["ns/z"]), max_size=10))
    chosen = pods_to_write(listed, found, written)
    keys = [v.key for v in chosen]
    assert len(keys) == len(set(keys))  # each pod at most once
    for v in chosen:
        exists, gated, gate, deleting, rv, ours = states[v.name]
        assert v.key in listed and exists and gated and not deleting and gate != "True"
        assert ours is None or rv > ours  # no rewrite unless the pod changed after our write
    # Every eligible pod is chosen (nothing that needs the condition is left out).
    for key in set(listed):
        name = key.split("/")[1]
        if name not in states:
            continue
        exists, gated, gate, deleting, rv, ours = states[name]
        eligible = exists and gated and not deleting and gate != "True"
        if eligible and (ours is None or rv > ours):
            assert key in keys

"""Deployment rollout arithmetic: rounding, fenceposts and a simulated rollout."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from localcluster.node import rollout as ro


@pytest.mark.parametrize(
    ("value", "total", "up", "expected"),
    [
        ("25%", 1, True, 1),
        ("25%", 1, False, 0),
        ("25%", 10, True, 3),
        ("25%", 10, False, 2),
        ("50%", 3, True, 2),
        ("50%", 3, False, 1),
        ("100%", 7, False, 7),
        ("0%", 5, True, 0),
        (2, 10, False, 2),
        ("3", 10, True, 3),
        (None, 10, True, 0),
    ],
)
def test_int_or_percent(value: int | str | None, total: int, up: bool, expected: int) -> None:
    assert ro.resolve_int_or_percent(value, total, round_up=up) == expected


def test_fenceposts_defaults_and_zero_rule() -> None:
    assert ro.resolve_fenceposts(None, None, 1) == (1, 0)
    assert ro.resolve_fenceposts(None, None, 4) == (1, 1)
    # Both round to zero: unavailable becomes 1 so the rollout can move.
    assert ro.resolve_fenceposts("0%", "10%", 3) == (0, 1)
    assert ro.resolve_fenceposts(0, 0, 3) == (0, 1)


def pod(name: str, h: str, ready: bool, terminating: bool = False) -> ro.PodSummary:
    return ro.PodSummary(name, h, ready, ready, terminating, created=name)


def test_one_replica_creates_new_first_then_deletes_old_only_when_new_is_ready() -> None:
    old = pod("a", "old", True)
    assert ro.rolling_update_step([old], 1, "new") == ro.Step(create=1)
    waiting = [old, pod("b", "new", False)]
    assert ro.rolling_update_step(waiting, 1, "new") == ro.Step()
    ready = [old, pod("b", "new", True)]
    assert ro.rolling_update_step(ready, 1, "new") == ro.Step(delete=("a",))
    # The terminating old pod no longer counts; nothing more to do.
    done = [pod("a", "old", True, terminating=True), pod("b", "new", True)]
    assert ro.rolling_update_step(done, 1, "new") == ro.Step()


def test_scaling_without_template_change() -> None:
    pods = [pod("a", "h", True)]
    assert ro.rolling_update_step(pods, 3, "h") == ro.Step(create=2)
    pods = [pod("a", "h", True), pod("b", "h", False), pod("c", "h", True)]
    # The not-ready pod goes first.
    assert ro.rolling_update_step(pods, 2, "h") == ro.Step(delete=("b",))


def test_recreate_deletes_all_then_waits_for_them_to_go() -> None:
    pods = [pod("a", "old", True), pod("b", "old", True)]
    assert set(ro.recreate_step(pods, 2, "new").delete) == {"a", "b"}
    terminating = [pod("a", "old", True, True)]
    assert ro.recreate_step(terminating, 2, "new") == ro.Step()
    assert ro.recreate_step([], 2, "new") == ro.Step(create=2)


def test_template_hash_changes_with_restarted_at_annotation() -> None:
    tpl = {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c"}]}}
    restarted = {
        **tpl,
        "metadata": {**tpl["metadata"], "annotations": {ro.RESTARTED_AT_ANNOTATION: "now"}},
    }
    assert ro.template_hash(tpl) == ro.template_hash(dict(tpl))
    assert ro.template_hash(tpl) != ro.template_hash(restarted)
    assert set(ro.template_hash(tpl)) <= set("bcdfghjklmnpqrstvwxz2456789")


@settings(max_examples=150, deadline=None)
@given(
    replicas=st.integers(min_value=1, max_value=8),
    surge=st.one_of(st.none(), st.integers(0, 3), st.sampled_from(["0%", "25%", "50%", "100%"])),
    unavailable=st.one_of(
        st.none(), st.integers(0, 3), st.sampled_from(["0%", "25%", "50%", "100%"])
    ),
    readiness=st.lists(st.booleans(), min_size=200, max_size=200),
)
def test_simulated_rollout_respects_bounds_and_converges(
    replicas: int,
    surge: int | str | None,
    unavailable: int | str | None,
    readiness: list[bool],
) -> None:
    """Drive the step function like the controller does, with new pods becoming ready at
    random moments; the surge and availability bounds must hold at every step."""
    max_surge, max_unavailable = ro.resolve_fenceposts(surge, unavailable, replicas)
    names = (f"p{i:04d}" for i in itertools.count())
    pods = {n: pod(n, "old", True) for n in itertools.islice(names, replicas)}
    coin = iter(readiness + [True] * 1000)
    for _ in range(300):
        step = ro.rolling_update_step(list(pods.values()), replicas, "new", surge, unavailable)
        for n in step.delete:
            del pods[n]  # deletion removes from the active set at once
        for _ in range(step.create):
            n = next(names)
            pods[n] = pod(n, "new", False)
        assert len(pods) <= replicas + max_surge
        assert sum(p.available for p in pods.values()) >= min(replicas - max_unavailable, replicas)
        for n, p in list(pods.items()):
            if not p.ready and next(coin):
                pods[n] = pod(n, p.template_hash, True)
        if len(pods) == replicas and all(
            p.template_hash == "new" and p.ready for p in pods.values()
        ):
            break
    else:
        pytest.fail(f"rollout did not converge: {pods}")


def test_status_counts_and_availability() -> None:
    pods = [
        pod("a", "new", True),
        pod("b", "new", False),
        pod("c", "old", True),
        pod("d", "old", True, terminating=True),
    ]
    counts = ro.count_pods(pods, "new")
    assert counts == ro.DeploymentCounts(replicas=3, updated=2, ready=2, available=2)
    status = ro.deployment_status(7, 2, counts, 0, rollout_complete=False)
    assert status["observedGeneration"] == 7
    assert status["unavailableReplicas"] == 0
    assert {c["type"]: c["status"] for c in status["conditions"]} == {
        "Available": "True",
        "Progressing": "True",
    }
    low = ro.deployment_status(1, 3, ro.DeploymentCounts(3, 3, 1, 1), 1, False)
    assert low["conditions"][0]["reason"] == "MinimumReplicasUnavailable"
    assert ro.is_available(100.0, 5, 104.0) is False
    assert ro.is_available(100.0, 5, 105.0) is True
    assert ro.is_available(None, 0, 1.0) is False

"""The summary /healthz adds (agents.api.health_summary): what the pod page shows live."""

from agents.api import health_summary


def applied_state() -> dict:
    return {
        "runtime_id": "rt-1",
        "pod_name": "haproxy-0",
        "bootstrap": False,
        "applied_plan_id": "plan-7",
        "applied_checksum": "sha256:abc",
        "applied_token": {"holder": "controller-0", "epoch": 4, "sequence": 9},
        "worker_operation_mode": "runtime",
        "invariant_violation": None,
        "files": {"haproxy.cfg": {"sha256": "x"}},
    }


def test_the_summary_names_plan_checksum_term_mode_and_no_sequence_or_files():
    summary = health_summary(applied_state())
    assert summary == {
        "pod_name": "haproxy-0",
        "applied_plan_id": "plan-7",
        "checksum": "sha256:abc",
        "term": {"holder": "controller-0", "epoch": 4},
        "worker_operation_mode": "runtime",
        "bootstrap": False,
        "invariant_violation": None,
    }


def test_a_bootstrap_pod_has_no_plan_and_no_term():
    state = dict(applied_state(), bootstrap=True, applied_plan_id=None, applied_checksum=None)
    state.update(applied_token=None, worker_operation_mode=None)
    summary = health_summary(state)
    assert summary["bootstrap"] is True
    assert summary["term"] is None and summary["applied_plan_id"] is None


def test_a_violation_is_reported():
    state = dict(applied_state(), invariant_violation="running plan unknown")
    assert health_summary(state)["invariant_violation"] == "running plan unknown"

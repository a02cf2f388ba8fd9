"""contract.pod_ready: one answer for a pod as the watch's JSON and as the client's model."""

from __future__ import annotations

import kubernetes
from hypothesis import given
from hypothesis import strategies as st

from contract import pod_ready

CONDITIONS = st.lists(
    st.fixed_dictionaries(
        {
            "type": st.sampled_from(["Ready", "ContainersReady", "PodScheduled", "x/gate"]),
            "status": st.sampled_from(["True", "False", "Unknown"]),
        }
    ),
    max_size=5,
)


def _model(conditions: list[dict]) -> kubernetes.client.V1Pod:
    return kubernetes.client.V1Pod(
        status=kubernetes.client.V1PodStatus(
            conditions=[kubernetes.client.V1PodCondition(**c) for c in conditions] or None
        )
    )


@given(CONDITIONS)
def test_the_first_ready_condition_decides_for_both_shapes(conditions: list[dict]) -> None:
    first = next((c for c in conditions if c["type"] == "Ready"), None)
    expected = first is not None and first["status"] == "True"
    assert pod_ready({"status": {"conditions": conditions}}) is expected
    assert pod_ready(_model(conditions)) is expected


def test_a_pod_without_status_is_not_ready() -> None:
    assert not pod_ready({})
    assert not pod_ready({"status": None})
    assert not pod_ready(kubernetes.client.V1Pod())

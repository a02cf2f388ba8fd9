"""status.activeController publication: pure rules, then passes against a real API server."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from controller.hub.config import PLACEHOLDER_ENDPOINT, HubConfig
from controller.hub.publisher import (
    PassOutcome,
    Publisher,
    choose_wait,
    desired_status,
    endpoint_refusal,
    is_converged,
)
from tests.hub.conftest import create_template, get_template

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_empty_and_placeholder_endpoints_are_refused() -> None:
    assert endpoint_refusal("") == "empty endpoint"
    assert endpoint_refusal("   ") == "empty endpoint"
    assert endpoint_refusal(PLACEHOLDER_ENDPOINT) == "placeholder endpoint"
    assert endpoint_refusal(PLACEHOLDER_ENDPOINT.rstrip("/")) == "placeholder endpoint"
    assert endpoint_refusal("https://hub-b.example.net:6443") is None


def test_placeholder_matches_the_shipped_default() -> None:
    # The refusal only protects anyone if it names the flag's actual default.
    assert endpoint_refusal(HubConfig().self_endpoint) == "placeholder endpoint"


@given(seconds=st.integers(min_value=0, max_value=10**6))
def test_convergence_ignores_last_updated(seconds: int) -> None:
    first = desired_status("https://a:6443", "Q0E=", "hub-a", T0)
    later = desired_status("https://a:6443", "Q0E=", "hub-a", T0 + timedelta(seconds=seconds))
    assert is_converged(first, later)
    assert not is_converged(first, desired_status("https://b:6443", "Q0E=", "hub-a", T0))
    assert not is_converged(first, desired_status("https://a:6443", "", "hub-a", T0))
    assert not is_converged(first, desired_status("https://a:6443", "Q0E=", "hub-b", T0))
    assert not is_converged(None, first)


def test_wait_chosen_from_what_the_pass_did() -> None:
    assert choose_wait(PassOutcome(held_leadership=False), 1, 30) == 1
    assert choose_wait(PassOutcome(held_leadership=True, wrote=True), 1, 30) == 30
    assert choose_wait(PassOutcome(held_leadership=True), 1, 30) == 30
    assert choose_wait(PassOutcome(held_leadership=True, error="boom"), 1, 30) == 1
    assert (
        choose_wait(PassOutcome(held_leadership=True, refused="placeholder endpoint"), 1, 30) == 30
    )


class Leadership:
    """Fake elector: the publisher is given a two-method view of leadership."""

    def __init__(self, leading: bool) -> None:
        self.leading = leading
        self.calls = 0

    def __call__(self) -> bool:
        self.calls += 1
        return self.leading


def _publisher(cluster, ns: str, leader: Leadership, endpoint: str, tmp_path) -> Publisher:
    ca = tmp_path / "ca.crt"
    ca.write_bytes(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    return Publisher(
        cluster.client,
        namespace=ns,
        template_name="haptic",
        identity="hub-a",
        endpoint=endpoint,
        ca_bundle_path=str(ca),
        is_leader=leader,
        request_timeout=5.0,
        fast_interval=0.05,
        slow_interval=0.5,
    )


def test_not_leader_pass_is_a_no_op(clusters, ns, tmp_path) -> None:
    a, _ = clusters
    before = create_template(a, ns)
    # The pass must not even read: a faulting API server proves nothing was sent.
    a.api.add_fault(path_regex=f"/namespaces/{ns}/", status=500)
    outcome = _publisher(a, ns, Leadership(False), a.url, tmp_path).publish_once()
    assert outcome == PassOutcome(held_leadership=False)
    a.api.clear_faults()
    after = get_template(a, ns)
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert "activeController" not in (after.get("status") or {})


def test_converged_pass_writes_nothing(clusters, ns, tmp_path) -> None:
    a, _ = clusters
    create_template(a, ns)
    publisher = _publisher(a, ns, Leadership(True), a.url, tmp_path)
    first = publisher.publish_once()
    assert first.wrote
    published = get_template(a, ns)
    status = published["status"]["activeController"]
    assert status["endpoint"] == a.url and status["activeIdentity"] == "hub-a"
    assert status["caBundle"] and status["lastUpdated"]
    # A later clock only changes lastUpdated: no write, resourceVersion unchanged.
    publisher.clock = lambda: datetime.now(UTC) + timedelta(hours=1)
    for _ in range(3):
        assert publisher.publish_once() == PassOutcome(held_leadership=True)
    again = get_template(a, ns)
    assert again["metadata"]["resourceVersion"] == published["metadata"]["resourceVersion"]
    # A changed endpoint converges with one write.
    publisher.endpoint = "https://hub-a.example.net:6443"
    assert publisher.publish_once().wrote
    assert get_template(a, ns)["status"]["activeController"]["endpoint"] == publisher.endpoint


def test_empty_or_placeholder_endpoint_refused_without_writing(clusters, ns, tmp_path) -> None:
    a, _ = clusters
    before = create_template(a, ns)
    for endpoint in ("", PLACEHOLDER_ENDPOINT):
        outcome = _publisher(a, ns, Leadership(True), endpoint, tmp_path).publish_once()
        assert outcome.held_leadership and outcome.refused and not outcome.wrote
    after = get_template(a, ns)
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


def test_loop_publishes_promptly_once_leadership_arrives(clusters, ns, tmp_path) -> None:
    # Seed 004's race: leadership arriving just after a not-leader pass must cost one fast
    # interval, not a slow one. Fast is 0.05 s and slow 0.5 s here; leadership is granted
    # after the loop has already seen "not leader" at least once.
    a, _ = clusters
    create_template(a, ns)
    leader = Leadership(False)
    publisher = _publisher(a, ns, leader, a.url, tmp_path)
    publisher.slow_interval = 60.0  # a slow wait would leave nothing published in this test
    publisher.start()
    try:
        _wait(lambda: leader.calls >= 2)
        leader.leading = True
        _wait(lambda: "activeController" in (get_template(a, ns).get("status") or {}))
    finally:
        publisher.stop()
    assert not publisher.running


def _wait(predicate, timeout: float = 20.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError("condition not reached")

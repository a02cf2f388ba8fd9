"""Guard outcomes (pure): self-health classification and the final dial's verdict."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st
from kubernetes.client.exceptions import ApiException

from controller.hub.bounded import StepTimeout
from controller.hub.guards import DialVerdict, final_dial_verdict, self_healthy
from controller.hub.leases import LeaseNotFound, LeaseView
from controller.hub.publisher import read_ca_bundle

NOW = datetime(2026, 1, 1, tzinfo=UTC)


@given(status=st.integers(min_value=100, max_value=599))
def test_self_health_by_status(status: int) -> None:
    # Any answer below 500 proves the server is up (NotFound above all); 5xx does not.
    assert self_healthy(ApiException(status=status)) == (status < 500)


class TestSelfHealthy_NotFoundCountsAsHealthy:
    """Seed 004: NotFound proves our API server answered (a first promotion finds no Lease);
    only transport errors, timeouts and 5xx count as unhealthy."""

    def test_not_found_is_an_answer(self) -> None:
        assert self_healthy(None)
        assert self_healthy(LeaseNotFound("haptic/haptic-hub"))
        assert self_healthy(ApiException(status=404))
        for transport in (StepTimeout("late"), TimeoutError(), ConnectionResetError(), OSError()):
            assert not self_healthy(transport)
        assert not self_healthy(ApiException(status=0, reason="connection refused"))


@given(age=st.floats(min_value=0, max_value=1000, allow_nan=False), failed=st.booleans())
def test_final_dial_verdict(age: float, failed: bool) -> None:
    view = LeaseView("active", NOW - timedelta(seconds=age), 30)
    result = final_dial_verdict(None if failed else view, TimeoutError() if failed else None,
                                NOW, 10)  # fmt: skip
    if failed:
        # Not evidence either way: the retained view stands and promotion proceeds.
        assert result.verdict is DialVerdict.UNREACHABLE and result.view is None
    elif age > 40:
        assert result.verdict is DialVerdict.STALE and result.view == view
    else:
        assert result.verdict is DialVerdict.LIVE and result.view == view


def test_unreadable_ca_bundle_is_left_out(tmp_path) -> None:
    assert read_ca_bundle(str(tmp_path / "missing.crt")) == ""
    (tmp_path / "ca.crt").write_bytes(b"CA")
    assert read_ca_bundle(str(tmp_path / "ca.crt")) == "Q0E="

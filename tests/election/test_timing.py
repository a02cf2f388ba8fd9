"""Election timings: defaults, CRD durations, validation."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.election.timing import (
    ElectionTiming,
    parse_duration,
    settings_from_spec,
)


def test_defaults_are_30_20_5() -> None:
    settings = settings_from_spec({})
    assert settings.enabled
    assert settings.lease_name == "haptic-leader"
    assert settings.timing == ElectionTiming(30.0, 20.0, 5.0)


def test_overrides_from_the_template_config_spec() -> None:
    spec = {
        "controller": {
            "leaderElection": {
                "leaseName": "other-lease",
                "leaseDuration": "2s",
                "renewDeadline": "1500ms",
                "retryPeriod": "0.3s",
            }
        }
    }
    settings = settings_from_spec(spec)
    assert settings.lease_name == "other-lease"
    assert settings.timing == ElectionTiming(2.0, 1.5, 0.3)
    assert settings.timing.lease_duration_seconds == 2


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30s", 30.0), ("1.5s", 1.5), ("250ms", 0.25), ("2m", 120.0), ("1h", 3600.0)],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "30", "s", "-1s", "1d", "1.s"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


@pytest.mark.parametrize("lease, renew, retry", [(20, 20, 5), (10, 20, 5), (30, 5, 5), (30, 20, 0)])
def test_inconsistent_timings_are_refused(lease: float, renew: float, retry: float) -> None:
    with pytest.raises(ValueError):
        ElectionTiming(lease, renew, retry)


@given(st.floats(0.001, 10_000))
def test_recorded_duration_never_shorter_than_configured(lease: float) -> None:
    timing = ElectionTiming(lease, lease * 0.6, lease * 0.1)
    assert timing.lease_duration_seconds >= lease
    assert timing.lease_duration_seconds >= 1


def test_identity_is_the_pod_name_else_hostname_pid() -> None:
    import os
    import socket

    from controller.election.identity import replica_identity

    assert replica_identity({"POD_NAME": "controller-7d9f-x2"}) == "controller-7d9f-x2"
    assert replica_identity({}) == f"{socket.gethostname()}_{os.getpid()}"
    assert replica_identity({"POD_NAME": "  "}) == f"{socket.gethostname()}_{os.getpid()}"

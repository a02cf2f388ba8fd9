"""One epoch parser, one rule for bad input: absent is 0, anything not decimal is refused.

Every reader of the annotation (the controller's elector, the hub's view of a Lease) must
agree, and none may turn garbage into a number: that number could let a stale writer through.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kubernetes import client

from controller.election.record import InvalidEpoch, format_epoch, parse_epoch
from controller.hub.leases import view_from_lease

EPOCH_ANNOTATION = "haproxy-haptic.org/epoch"


def _lease(annotation: str | None) -> client.V1Lease:
    annotations = {EPOCH_ANNOTATION: annotation} if annotation is not None else None
    return client.V1Lease(
        metadata=client.V1ObjectMeta(name="l", annotations=annotations),
        spec=client.V1LeaseSpec(holder_identity="a", lease_duration_seconds=5),
    )


@given(st.integers(min_value=0, max_value=2**63))
def test_round_trip(epoch: int) -> None:
    assert parse_epoch(format_epoch(epoch)) == epoch


@given(st.text())
def test_any_text_is_its_decimal_value_or_refused(text: str) -> None:
    """Never another exception, never a number that is not the text's own decimal value."""
    try:
        epoch = parse_epoch(text)
    except InvalidEpoch:
        assert text.strip() == "" or not (text.strip().isascii() and text.strip().isdecimal())
        return
    assert epoch >= 0
    assert epoch == (int(text.strip()) if text.strip() else 0)
    assert text.strip() == "" or text.strip().isascii()


@pytest.mark.parametrize("bad", ["x", "-1", "1.5", "²", "١٢", "0x10", "+3"])
def test_bad_text_is_refused(bad: str) -> None:
    with pytest.raises(InvalidEpoch):
        parse_epoch(bad)


@given(st.text().filter(lambda t: t.strip() != "" and not t.strip().isascii()))
def test_the_hub_refuses_what_the_elector_refuses(text: str) -> None:
    # The hub reads the Active's epoch to claim a floor above it: garbage read as 0 would
    # claim a floor below the Active's real epoch.
    with pytest.raises(InvalidEpoch):
        parse_epoch(text)
    with pytest.raises(InvalidEpoch):
        view_from_lease(_lease(text))


@pytest.mark.parametrize("bad", ["x", "-1", "²"])
def test_hub_view_refuses_bad_epoch(bad: str) -> None:
    with pytest.raises(InvalidEpoch):
        view_from_lease(_lease(bad))


def test_absent_epoch_is_zero_everywhere() -> None:
    assert parse_epoch(None) == 0 and parse_epoch("") == 0
    assert view_from_lease(_lease(None)).epoch == 0
    assert view_from_lease(_lease("7")).epoch == 7

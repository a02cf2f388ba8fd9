"""Pure election decisions: observation, expiry by our own clock, what each action writes."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.election import decisions
from controller.election.decisions import Action, Observation, decide, observe
from controller.election.record import InvalidEpoch, LeaseRecord, parse_epoch

WALL = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


def held(holder: str = "a", epoch: int = 3, duration: int = 30, renew_s: int = 0) -> LeaseRecord:
    return LeaseRecord(
        holder=holder,
        lease_duration_seconds=duration,
        acquire_time=WALL,
        renew_time=WALL + timedelta(seconds=renew_s),
        transitions=2,
        epoch=epoch,
        resource_version="10",
    )


def test_observation_time_restarts_only_when_the_record_changes() -> None:
    first = observe(None, held(), now=100.0)
    same_again = observe(first, replace(held(), resource_version="11"), now=150.0)
    assert same_again.observed_at == 100.0
    assert same_again.record is not None and same_again.record.resource_version == "11"
    renewed = observe(same_again, held(renew_s=5), now=160.0)
    assert renewed.observed_at == 160.0


def test_expiry_uses_the_holders_recorded_duration_not_ours() -> None:
    observation = Observation(held(duration=7), observed_at=100.0)
    assert not decisions.is_free(observation, 106.9)
    assert decisions.is_free(observation, 107.0)
    # Our own configured duration (30 s here) plays no part in judging their lease.
    decision = decide("b", None, observation, 107.0, WALL, lease_duration_seconds=30)
    assert decision.action is Action.ACQUIRE
    assert decision.record is not None and decision.record.lease_duration_seconds == 30


def test_holders_wall_clock_renew_time_is_never_compared_with_ours() -> None:
    # A renewTime years in the past (skewed holder clock) does not make the lease free.
    ancient = replace(held(), renew_time=WALL - timedelta(days=900))
    observation = observe(None, ancient, now=100.0)
    assert decide("b", None, observation, 101.0, WALL, 30).action is Action.WAIT


def test_wait_while_another_holds_an_unexpired_lease() -> None:
    decision = decide("b", None, Observation(held(), 100.0), 129.0, WALL, 30)
    assert decision == decisions.Decision(Action.WAIT, None, "held by a")


def test_create_when_no_lease_starts_at_epoch_one() -> None:
    decision = decide("a", None, Observation(None, 5.0), 5.0, WALL, 30)
    assert decision.action is Action.CREATE
    assert decision.record is not None
    assert (decision.record.holder, decision.record.epoch) == ("a", 1)


def test_acquire_over_expired_lease_bumps_epoch_and_transitions() -> None:
    decision = decide("b", None, Observation(held(), 100.0), 130.0, WALL, 30)
    assert decision.action is Action.ACQUIRE
    record = decision.record
    assert record is not None
    assert (record.holder, record.epoch, record.transitions) == ("b", 4, 3)
    assert record.resource_version == "10"  # compare-and-swap on what we observed


def test_acquire_over_released_lease_is_immediate() -> None:
    released = decisions.release_record(held(), WALL)
    decision = decide("b", None, Observation(released, 100.0), 100.0, WALL, 30)
    assert decision.action is Action.ACQUIRE
    assert decision.record is not None and decision.record.epoch == 4


def test_renew_keeps_the_epoch() -> None:
    decision = decide("a", 3, Observation(held(), 100.0), 110.0, WALL + timedelta(1), 30)
    assert decision.action is Action.RENEW
    assert decision.record is not None
    assert decision.record.epoch == 3
    assert decision.record.renew_time == WALL + timedelta(1)
    assert decision.record.acquire_time == WALL


def test_same_identity_without_the_term_starts_a_new_term() -> None:
    # The Lease names us, but not at the epoch of a term we hold (a restart, or a term we
    # gave up at the renew deadline): taking it back is a new term with a new epoch.
    for my_epoch in (None, 2):
        decision = decide("a", my_epoch, Observation(held(), 100.0), 100.0, WALL, 30)
        assert decision.action is Action.ACQUIRE
        assert decision.record is not None
        assert decision.record.epoch == 4
        assert decision.record.transitions == 2  # same holder: no transition


def test_release_clears_holder_keeps_epoch() -> None:
    released = decisions.release_record(held(), WALL)
    assert released.released
    assert released.epoch == 3
    assert released.lease_duration_seconds == 1


def test_term_validity_ends_before_any_follower_could_take_over() -> None:
    sent = 500.0
    valid_until = decisions.term_valid_until(sent, renew_deadline=20.0)
    # A follower observes the write no earlier than it was sent, then waits the duration.
    earliest_takeover = decisions.expires_at(Observation(held(duration=30), observed_at=sent))
    assert valid_until < earliest_takeover


def test_epoch_floor_survives_a_recreated_lease() -> None:
    # The Lease was deleted and recreated (its count restarts); we had seen epoch 41.
    created = decide("a", None, Observation(None, 0.0), 0.0, WALL, 30, epoch_floor=41)
    assert created.record is not None and created.record.epoch == 42
    low = replace(held(epoch=2), holder="")
    acquired = decide("a", None, Observation(low, 0.0), 0.0, WALL, 30, epoch_floor=41)
    assert acquired.record is not None and acquired.record.epoch == 42


def test_a_deleted_lease_is_not_free_before_its_last_holder_expires() -> None:
    seen = observe(None, held(duration=30), now=100.0)
    gone = observe(seen, None, now=110.0)
    assert decide("b", None, gone, 129.9, WALL, 30).action is Action.WAIT
    assert decide("b", None, gone, 130.0, WALL, 30).action is Action.CREATE
    # A Lease we never saw held (or saw released) can be created at once.
    assert decide("b", None, observe(None, None, 5.0), 5.0, WALL, 30).action is Action.CREATE
    released = observe(None, decisions.release_record(held(), WALL), 100.0)
    assert decide("b", None, observe(released, None, 101.0), 101.0, WALL, 30).action is (
        Action.CREATE
    )


def test_parse_epoch() -> None:
    assert parse_epoch(None) == 0
    assert parse_epoch("") == 0
    assert parse_epoch("17") == 17
    with pytest.raises(InvalidEpoch):
        parse_epoch("-1")
    with pytest.raises(InvalidEpoch):
        parse_epoch("x")


records = st.builds(
    LeaseRecord,
    holder=st.sampled_from(["", "a", "b", "c"]),
    lease_duration_seconds=st.integers(1, 60),
    acquire_time=st.just(WALL),
    renew_time=st.integers(0, 10_000).map(lambda s: WALL + timedelta(seconds=s)),
    transitions=st.integers(0, 100),
    epoch=st.integers(0, 10_000),
    resource_version=st.integers(1, 10**6).map(str),
)


@given(
    identity=st.sampled_from(["a", "b", "c"]),
    my_epoch=st.one_of(st.none(), st.integers(0, 10_000)),
    record=st.one_of(st.none(), records),
    observed_at=st.floats(0, 1e6),
    elapsed=st.floats(0, 200),
    duration=st.integers(1, 60),
    floor=st.integers(0, 20_000),
)
def test_decide_properties(
    identity: str,
    my_epoch: int | None,
    record: LeaseRecord | None,
    observed_at: float,
    elapsed: float,
    duration: int,
    floor: int,
) -> None:
    now = observed_at + elapsed
    observation = Observation(record, observed_at)
    decision = decide(identity, my_epoch, observation, now, WALL, duration, epoch_floor=floor)
    previous_epoch = record.epoch if record is not None else 0
    if decision.action is Action.WAIT:
        # Only ever wait for someone else's live lease.
        assert record is not None and record.holder not in ("", identity)
        assert elapsed < record.lease_duration_seconds
        assert decision.record is None
        return
    written = decision.record
    assert written is not None
    assert written.holder == identity
    if decision.action is Action.RENEW:
        assert record is not None and my_epoch == record.epoch == written.epoch
        # A renewal writes the duration of the timings in force (they follow the template).
        assert written.lease_duration_seconds == duration
        assert written.acquire_time == record.acquire_time
    else:
        # Every new term is fenced above every earlier one, and above all we have seen.
        assert written.epoch == max(previous_epoch, floor) + 1
        assert written.lease_duration_seconds == duration
        if record is not None and record.holder not in ("", identity):
            # Never take a live lease from someone else.
            assert elapsed >= record.lease_duration_seconds
    if record is not None:
        assert written.resource_version == record.resource_version


@given(record=records, first=st.floats(0, 1e6), later=st.floats(0, 1e6))
def test_observing_an_unchanged_record_never_moves_the_expiry_later(
    record: LeaseRecord, first: float, later: float
) -> None:
    a = observe(None, record, first)
    b = observe(a, replace(record, resource_version="other"), first + later)
    assert decisions.expires_at(b) == decisions.expires_at(a)


@given(
    holder=st.text(min_size=1, max_size=30),
    epoch=st.integers(1, 2**40),
    lease=st.from_regex(r"[a-z][a-z0-9-]{0,20}", fullmatch=True),
)
def test_token_round_trips_as_the_plain_dict_tasks_carry(
    holder: str, epoch: int, lease: str
) -> None:
    import json

    from controller.election.term import FencingToken

    token = FencingToken.of(holder, epoch, lease, "haptic")
    assert FencingToken.from_dict(json.loads(json.dumps(token.to_dict()))) == token


def test_a_watched_release_or_new_term_wakes_the_elector_and_a_renewal_does_not() -> None:
    seen = observe(None, held("a", epoch=3), now=100.0)
    wakes = decisions.wakes_elector
    # A follower ("b"): the holder renewing the same term is no news.
    assert not wakes("b", None, seen, held("a", epoch=3, renew_s=5))
    # Released, deleted, or another term on the Lease: read and act now.
    assert wakes("b", None, seen, decisions.release_record(held("a", epoch=3), WALL))
    assert wakes("b", None, seen, None)
    assert wakes("b", None, seen, held("c", epoch=4))
    assert wakes("b", None, None, held("a", epoch=3))  # never read yet
    # The leader ("a", epoch 3): its own renewals never wake it, even one seen by the watch
    # before the elector recorded its own write.
    mine = observe(None, held("a", epoch=3), now=100.0)
    assert not wakes("a", 3, mine, held("a", epoch=3, renew_s=5))
    assert not wakes("a", 3, observe(None, held("a", epoch=2), now=90.0), held("a", epoch=3))
    # ... but a raised epoch under our name, or another holder, ends its term at once.
    assert wakes("a", 3, mine, held("a", epoch=4))
    assert wakes("a", 3, mine, held("c", epoch=4))
    # Nothing on the Lease, nothing seen: no news.
    assert not wakes("b", None, observe(None, None, now=1.0), None)

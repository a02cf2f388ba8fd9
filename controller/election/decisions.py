"""Pure election decisions: observation, expiry, what to write, validity of a term.

Nothing here does I/O or reads a clock: callers pass `now` (time.monotonic() seconds) and
`wall` (a UTC datetime stamped into the record for humans; never compared across replicas).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from datetime import datetime

from controller.election.record import LeaseRecord


@dataclass(frozen=True)
class Observation:
    """A record and the monotonic time this replica first saw that exact record.

    `wait_until`: when a Lease we saw held disappears (deleted), its holder may still act
    until the lease we last saw would have expired; nobody creates a new one before that.
    """

    record: LeaseRecord | None
    observed_at: float
    wait_until: float = 0.0


def observe(previous: Observation | None, record: LeaseRecord | None, now: float) -> Observation:
    """Restart the expiry clock only when the record changed (client-go's observedTime).

    The holder's renewTime is another machine's wall clock: it is only used to notice that
    the record changed, never compared with ours.
    """
    if previous is not None and previous.record == record:
        # Same record, maybe a newer resourceVersion: keep when we first saw it.
        return replace(previous, record=record)
    wait_until = 0.0
    if record is None and previous is not None:
        wait_until = max(previous.wait_until, expires_at(previous))
    return Observation(record=record, observed_at=now, wait_until=wait_until)


def expires_at(observation: Observation) -> float:
    """When the observed lease expires by our clock, with the holder's own lease duration."""
    record = observation.record
    if record is None:
        return max(observation.observed_at, observation.wait_until)
    if record.released:
        return observation.observed_at
    return observation.observed_at + record.lease_duration_seconds


def is_free(observation: Observation, now: float) -> bool:
    """May anyone acquire? Yes if there is no lease, it was released, or it expired."""
    return now >= expires_at(observation)


def _term_on(record: LeaseRecord | None) -> tuple[str, int] | None:
    return None if record is None else (record.holder, record.epoch)


def wakes_elector(
    identity: str,
    my_epoch: int | None,
    observation: Observation | None,
    watched: LeaseRecord | None,
) -> bool:
    """Should a change of the Lease seen by its watch make the elector read and act now,
    instead of at its next retry?

    Yes when the term on the Lease is not the one we last observed: released (a follower
    takes it at once: a graceful hand-over costs a watch event, not a retry period),
    deleted, or another holder or epoch (a leader learns at once that its term is over).
    No for a renewal of the same term, and never for our own term's writes: the leader's
    renewals would otherwise wake it again after each one.
    """
    ours = watched is not None and (watched.holder, watched.epoch) == (identity, my_epoch)
    if ours:
        return False
    seen = observation.record if observation is not None else None
    return _term_on(watched) != _term_on(seen)


class Action(enum.Enum):
    CREATE = "create"  # no Lease yet: create it holding a first term
    ACQUIRE = "acquire"  # start a new term over a free lease (or our own stale one)
    RENEW = "renew"  # extend our current term
    WAIT = "wait"  # someone else holds an unexpired lease


@dataclass(frozen=True)
class Decision:
    action: Action
    record: LeaseRecord | None  # what to write (None for WAIT)
    reason: str


def next_epoch(record: LeaseRecord | None, floor: int = 0) -> int:
    """Every term gets a new epoch, strictly above every earlier one on this Lease and above
    `floor`, the highest epoch this replica has seen (a deleted and recreated Lease would
    otherwise restart the count below epochs that agents already hold)."""
    return max(record.epoch if record is not None else 0, floor) + 1


def decide(
    identity: str,
    my_epoch: int | None,
    observation: Observation,
    now: float,
    wall: datetime,
    lease_duration_seconds: int,
    epoch_floor: int = 0,
) -> Decision:
    """What this replica should write, given what it observed.

    `my_epoch` is the epoch of the term this replica currently holds (None if it holds none).
    A renewal needs both our identity and our epoch on the Lease: a Lease naming us with
    another epoch is a term we no longer hold (a restart, or a term we gave up after the
    renew deadline), so taking it back starts a new term with a bumped epoch.
    """
    record = observation.record
    if record is None and not is_free(observation, now):
        return Decision(Action.WAIT, None, "lease deleted: waiting out its last holder")
    if record is None:
        return Decision(
            Action.CREATE,
            LeaseRecord(
                holder=identity,
                lease_duration_seconds=lease_duration_seconds,
                acquire_time=wall,
                renew_time=wall,
                transitions=0,
                epoch=next_epoch(None, epoch_floor),
            ),
            "no lease yet",
        )
    if record.holder == identity and my_epoch is not None and record.epoch == my_epoch:
        renewed = renew_record(record, wall, lease_duration_seconds)
        return Decision(Action.RENEW, renewed, "renewing our term")
    if record.holder == identity:
        return Decision(
            Action.ACQUIRE,
            acquire_record(identity, record, wall, lease_duration_seconds, epoch_floor),
            "lease names us from an earlier term",
        )
    if is_free(observation, now):
        why = "lease released" if record.released else "lease expired"
        written = acquire_record(identity, record, wall, lease_duration_seconds, epoch_floor)
        return Decision(Action.ACQUIRE, written, why)
    return Decision(Action.WAIT, None, f"held by {record.holder}")


def acquire_record(
    identity: str,
    previous: LeaseRecord,
    wall: datetime,
    lease_duration_seconds: int,
    epoch_floor: int = 0,
) -> LeaseRecord:
    """Start a new term: bump the epoch; count a transition when the holder changes."""
    changed_hands = previous.holder != identity
    return LeaseRecord(
        holder=identity,
        lease_duration_seconds=lease_duration_seconds,
        acquire_time=wall,
        renew_time=wall,
        transitions=previous.transitions + (1 if changed_hands else 0),
        epoch=next_epoch(previous, epoch_floor),
        resource_version=previous.resource_version,
    )


def renew_record(current: LeaseRecord, wall: datetime, lease_duration_seconds: int) -> LeaseRecord:
    """Extend the term: renewTime, and the duration of the timings in force (they follow the
    template config); the epoch never changes within a term."""
    return replace(current, renew_time=wall, lease_duration_seconds=lease_duration_seconds)


def release_record(current: LeaseRecord, wall: datetime) -> LeaseRecord:
    """Give the lease up: no holder and a 1 s duration (the API's minimum), keeping the epoch
    so the next term's epoch is still higher than every earlier one."""
    return replace(current, holder="", lease_duration_seconds=1, renew_time=wall)


def term_valid_until(write_sent_at: float, renew_deadline: float) -> float:
    """Until when the leader may act on a term, by its own monotonic clock.

    `write_sent_at` is when the last successful acquire/renew request was sent, which is no
    later than any follower can have observed it; followers wait a full lease duration from
    their observation, and the renew deadline is shorter than the lease duration, so the
    leader stops acting before anyone else can take over.
    """
    return write_sent_at + renew_deadline

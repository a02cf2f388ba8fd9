"""The election record kept on the Lease, and the epoch annotation that fences its terms."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

EPOCH_ANNOTATION = "haproxy-haptic.org/epoch"


class InvalidEpoch(ValueError):
    """The epoch annotation is not a decimal integer; acquiring over it could regress it."""


@dataclass(frozen=True)
class LeaseRecord:
    """What the elector reads from and writes to the Lease.

    Equality ignores the resourceVersion: like client-go's observedRawRecord, only a change
    of the record itself (a renewal, a new holder) restarts a follower's expiry clock.
    """

    holder: str
    lease_duration_seconds: int
    acquire_time: datetime | None
    renew_time: datetime | None
    transitions: int
    epoch: int
    resource_version: str | None = field(default=None, compare=False)

    @property
    def released(self) -> bool:
        return not self.holder


def parse_epoch(value: str | None) -> int:
    """The epoch stored in the annotation; a Lease without one has seen no fenced term."""
    if value is None or value == "":
        return 0
    text = value.strip()
    if not text.isdigit():
        raise InvalidEpoch(f"annotation {EPOCH_ANNOTATION}={value!r} is not a decimal integer")
    return int(text)


def format_epoch(epoch: int) -> str:
    return str(epoch)

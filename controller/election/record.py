"""The election record kept on the Lease, and the epoch annotation that fences its terms."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from contract import EPOCH_ANNOTATION, InvalidEpoch, format_epoch, parse_epoch

__all__ = ["EPOCH_ANNOTATION", "InvalidEpoch", "LeaseRecord", "format_epoch", "parse_epoch"]


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

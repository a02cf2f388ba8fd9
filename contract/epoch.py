"""The fencing epoch as stored in the `haproxy-haptic.org/epoch` annotation.

One rule for bad input, chosen for fencing: an absent or empty annotation is epoch 0 (no
fenced term has been recorded), and anything else that is not a plain decimal number raises
`InvalidEpoch`. Reading garbage as 0 (or as any number) could let an elector start a term at
or below an epoch an agent already holds, or let a promoted side claim a floor below the
Active's, and so let a stale writer through; refusing makes the caller stop and retry.
"""

from __future__ import annotations

import re

from contract.names import EPOCH_ANNOTATION

# ASCII digits only: str.isdigit() also accepts '²' and other digits int() refuses or reads
# differently.
_DECIMAL = re.compile(r"[0-9]+")


class InvalidEpoch(ValueError):
    """The epoch annotation is not a decimal integer; acquiring over it could regress it."""


def parse_epoch(value: str | None) -> int:
    """The epoch stored in the annotation; a Lease without one has seen no fenced term."""
    if value is None or value == "":
        return 0
    text = value.strip()
    if not _DECIMAL.fullmatch(text):
        raise InvalidEpoch(f"annotation {EPOCH_ANNOTATION}={value!r} is not a decimal integer")
    return int(text)


def format_epoch(epoch: int) -> str:
    if epoch < 0:
        raise InvalidEpoch(f"epoch {epoch} is negative")
    return str(epoch)

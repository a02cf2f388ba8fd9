"""The clocks the elector reads: monotonic for every deadline, wall only to stamp records."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    def monotonic(self) -> float: ...

    def wall(self) -> datetime: ...

    def wait(self, event: threading.Event, timeout: float) -> bool:
        """Sleep up to `timeout` seconds or until `event` is set; True if it was set."""
        ...


class SystemClock:
    def monotonic(self) -> float:
        return time.monotonic()

    def wall(self) -> datetime:
        return datetime.now(UTC)

    def wait(self, event: threading.Event, timeout: float) -> bool:
        return event.wait(max(0.0, timeout))


SYSTEM_CLOCK = SystemClock()

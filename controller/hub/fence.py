"""The write fence: what the controller's reconcilers and deployers consult before writing.

Shut on a Standby from start-up until promotion completes; open in standalone and active.
"""

from __future__ import annotations

import threading


class WriteFence:
    def __init__(self, open_: bool) -> None:
        self._open = threading.Event()
        if open_:
            self._open.set()

    def is_open(self) -> bool:
        return self._open.is_set()

    def open(self) -> None:
        self._open.set()

    def wait_open(self, timeout: float | None = None) -> bool:
        return self._open.wait(timeout)

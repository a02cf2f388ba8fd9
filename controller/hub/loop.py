"""One background loop per hub part: the hub elector, the publisher and the Standby's poll
each run `body(stop)` on a daemon thread until stopped."""

from __future__ import annotations

import threading
from collections.abc import Callable


class LoopThread:
    """Runs `body(stop)` on a daemon thread. `start()` is idempotent and may follow a
    `stop()`; `stop()` waits for the body to return (bounded), so a part that says it stopped
    really does nothing more."""

    def __init__(self, name: str, body: Callable[[threading.Event], None]) -> None:
        self.name = name
        self.body = body
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop = threading.Event()  # a fresh one: a late old body must still see its stop
        self._thread = threading.Thread(
            target=self.body, args=(self._stop,), name=self.name, daemon=True
        )
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> bool:
        """Signal the body and wait up to `timeout`; True when it has returned."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is None:
            return True
        thread.join(timeout)
        return not thread.is_alive()

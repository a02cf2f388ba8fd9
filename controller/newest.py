"""Work that only its newest request needs, on a thread of its own (the Ingress status writer
and the consistency check: each must not hold up the thread that asks, and a request not
started yet is worth nothing once a newer one comes)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

log = logging.getLogger(__name__)

Job = TypeVar("Job")


class NewestOnly(Generic[Job]):
    """Runs `work(job)` for the newest job submitted, one at a time, on a daemon thread that
    starts with the first job and ends once `alive()` is false. An exception is logged, and
    the next job runs as usual."""

    def __init__(self, name: str, alive: Callable[[], bool], work: Callable[[Job], object]):
        self._name = name
        self._alive = alive
        self._work = work
        self._ready = threading.Condition()
        self._job: Job | None = None
        self._thread: threading.Thread | None = None

    def submit(self, job: Job) -> None:
        with self._ready:
            self._job = job
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            self._ready.notify()

    def join(self, timeout: float) -> bool:
        """Wait (at most `timeout`) for the thread to end, once `alive()` turned false; True
        when it has ended or never started."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
        return thread is None or not thread.is_alive()

    def _run(self) -> None:
        while self._alive():
            with self._ready:
                if self._job is None:
                    self._ready.wait(timeout=1.0)
                job, self._job = self._job, None
            if job is None:
                continue
            try:
                self._work(job)
            except Exception:
                log.exception("%s failed; the next request is handled as usual", self._name)

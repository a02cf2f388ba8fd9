"""A tiny keyed work loop: handlers mark keys dirty, one thread reconciles them (each key at
most once per round), with a periodic full resync."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)


class WorkLoop:
    def __init__(
        self,
        name: str,
        reconcile: Callable[[str], None],
        all_keys: Callable[[], set[str]],
        stop: threading.Event,
        resync: float = 2.0,
    ) -> None:
        self._reconcile = reconcile
        self._all_keys = all_keys
        self._stop = stop
        self._resync = resync
        self._dirty: set[str] = set()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout: float) -> None:
        self._wake.set()
        self._thread.join(timeout)

    def add(self, key: str) -> None:
        with self._lock:
            self._dirty.add(key)
        self._wake.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            woke = self._wake.wait(self._resync)
            self._wake.clear()
            if self._stop.is_set():
                return
            with self._lock:
                keys, self._dirty = self._dirty, set()
            if not woke:
                keys |= self._all_keys()
            for key in sorted(keys):
                if self._stop.is_set():
                    return
                try:
                    self._reconcile(key)
                except Exception as exc:
                    log.warning("%s: reconcile %s failed: %s", self._thread.name, key, exc)
                    self.add_later(key)

    def add_later(self, key: str, delay: float = 0.3) -> None:
        timer = threading.Timer(delay, self.add, args=(key,))
        timer.daemon = True
        timer.start()

"""Reconciler: turns cache changes into render triggers, debounced per kind (seed 003).

A burst of Ingress edits becomes one render; an EndpointSlice change (a backend pod came or
went) triggers at once, since that is what traffic waits on. `Debouncer` is the pure
decision core (time is passed in); `Reconciler` is a small thread that sleeps until the
core's deadline and calls the callback.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from prometheus_client import Counter

from controller.watch.caches import REPLAY, ChangeEvent

log = logging.getLogger(__name__)

TRIGGERS = Counter(
    "haptic_reconcile_triggers_total", "Render triggers fired by the reconciler.", ["reason"]
)
COALESCED = Counter(
    "haptic_reconcile_events_total", "Change notifications folded into render triggers."
)

DEFAULT_DELAYS: Mapping[str, float] = MappingProxyType({"endpointslices": 0.0, "pods": 0.0})


@dataclass(frozen=True)
class DebounceConfig:
    default_delay: float = 0.2  # quiet time required after the last change of a kind
    # Per-kind overrides (0 = no debounce).
    delays: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_DELAYS))
    # Upper bound on how long a kind may wait under continuous churn; never starve a render.
    max_wait: float = 1.0
    # Kinds that never trigger a render (HAProxy pods feed discovery, not the template).
    ignored: frozenset[str] = frozenset({"haproxy-pods"})

    def delay(self, kind: str) -> float:
        return self.delays.get(kind, self.default_delay)


@dataclass(frozen=True)
class Trigger:
    """One render request covering every change seen since the previous trigger."""

    kinds: frozenset[str]
    reason: str  # "debounced" | "immediate"
    events: int


@dataclass
class _Pending:
    first: float
    last: float
    count: int = 0


@dataclass
class Debouncer:
    """Pure debounce decisions. observe() records a change at time `now`; deadline() says when
    the next trigger is due; poll(now) returns that trigger once due (and forgets the
    pending changes: one render covers them all)."""

    config: DebounceConfig = field(default_factory=DebounceConfig)
    _pending: dict[str, _Pending] = field(default_factory=dict)
    _immediate_at: float | None = None

    def observe(self, kind: str, now: float, *, immediate: bool = False) -> bool:
        """Record a change; returns False if the kind is ignored."""
        if kind in self.config.ignored and not immediate:
            return False
        p = self._pending.get(kind)
        if p is None:
            p = self._pending[kind] = _Pending(now, now)
        p.last = max(p.last, now)
        p.count += 1
        if immediate and self._immediate_at is None:
            self._immediate_at = now
        return True

    def deadline(self) -> float | None:
        if not self._pending:
            return None
        due = [
            min(p.last + self.config.delay(k), p.first + self.config.max_wait)
            for k, p in self._pending.items()
        ]
        if self._immediate_at is not None:
            due.append(self._immediate_at)
        return min(due)

    def poll(self, now: float) -> Trigger | None:
        dl = self.deadline()
        if dl is None or now < dl:
            return None
        trig = Trigger(
            kinds=frozenset(self._pending),
            reason="immediate" if self._immediate_at is not None else "debounced",
            events=sum(p.count for p in self._pending.values()),
        )
        self._pending.clear()
        self._immediate_at = None
        return trig

    @property
    def pending(self) -> bool:
        return bool(self._pending)


class Reconciler:
    """Thread driver: `notify(kind)` from any thread; `callback(Trigger)` on its own thread.

    A callback that is still running when new changes arrive is not interrupted; the changes
    wait in the core and fire as the next trigger, so renders never overlap.
    """

    def __init__(
        self,
        callback: Callable[[Trigger], None],
        config: DebounceConfig | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._callback = callback
        self._core = Debouncer(config or DebounceConfig())
        self._clock = clock
        self._cond = threading.Condition()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self.fired = 0

    def notify(self, kind: str, *, immediate: bool = False) -> None:
        with self._cond:
            if self._core.observe(kind, self._clock(), immediate=immediate):
                COALESCED.inc()
                self._cond.notify()

    def trigger_now(self, reason: str = "leader") -> None:
        """An immediate trigger, e.g. on becoming leader (seed 003: BecameLeader triggers)."""
        self.notify(reason, immediate=True)

    def on_change(self, event: ChangeEvent) -> None:
        """Adapter for WatchCaches.subscribe: a REPLAY event triggers without debounce."""
        self.notify(event.kind, immediate=event.type == REPLAY)

    def start(self) -> Reconciler:
        if self._thread is not None:
            raise RuntimeError("reconciler already started")
        self._thread = threading.Thread(target=self._run, name="reconciler", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float | None = 5.0) -> bool:
        with self._cond:
            self._stopping = True
            self._cond.notify()
        if self._thread is None:
            return True
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _run(self) -> None:
        while True:
            with self._cond:
                trig = None
                while trig is None:
                    if self._stopping:
                        return
                    now = self._clock()
                    trig = self._core.poll(now)
                    if trig is None:
                        dl = self._core.deadline()
                        self._cond.wait(None if dl is None else max(0.0, dl - now))
            self.fired += 1
            TRIGGERS.labels(trig.reason).inc()
            try:
                self._callback(trig)
            except Exception:
                # A failing render must not kill the trigger loop; the next change retries.
                log.exception("reconcile callback failed for %s", trig)

"""The HTTP store: fetches `spec.httpResources` for the leader and offers the bodies to renders.

    store = HTTPStore(template_config, read_secret, health=health, record_event=events.record)
    store.begin_term(on_change=pipeline.request_render)   # fetches everything, then a thread
    RenderInput(**kwargs, http_resources=store.render_view())
    store.settle(output.http_digests, verdict.accepted)   # from the render gate's verdict
    store.end_term()

Only the leader fetches (begin_term/end_term bracket a leadership term), and a new leader
fetches every resource before it returns from begin_term, so its first render sees them.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import httpx
import urllib3.exceptions
from kubernetes.client.exceptions import ApiException
from prometheus_client import Counter, Gauge

from controller.health import ComponentHealth
from controller.httpstore import cache
from controller.httpstore.cache import ResourceSpec, ResourceState
from controller.httpstore.fetcher import fetch

log = logging.getLogger(__name__)

HTTP_STORE = "http-store"  # the /healthz component
FETCH_ERRORS = Counter(
    "haptic_http_resource_fetch_errors_total",
    "Failed fetches of a spec.httpResources entry.",
    ["resource"],
)
BODY_AGE = Gauge(
    "haptic_http_resource_age_seconds",
    "Seconds since the last successful fetch of a spec.httpResources entry.",
    ["resource"],
)
TICK = 5.0  # the longest the loop sleeps (metrics and removed resources stay current)


class HTTPStore:
    def __init__(
        self,
        template_config: Callable[[], Mapping[str, Any] | None],
        read_secret: Callable[[str], Mapping[str, str] | None],
        *,
        health: ComponentHealth | None = None,
        record_event: Callable[[str, str, str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        transport: httpx.BaseTransport | None = None,
        user_agent: str = "",
    ) -> None:
        self.template_config = template_config
        self.read_secret = read_secret
        self.health = health
        self.record_event = record_event
        self.clock = clock
        # The replica's User-Agent, as on its Kubernetes requests: a source's log says which
        # replica fetched (only the leader does).
        headers = {"User-Agent": user_agent} if user_agent else None
        self.http = httpx.Client(transport=transport, follow_redirects=True, headers=headers)
        self.states: dict[str, ResourceState] = {}
        self.specs: dict[str, ResourceSpec] = {}
        self.problems: list[str] = []
        self._lock = threading.Lock()
        self._on_change: Callable[[], None] | None = None
        self._stop = threading.Event()
        self._term_valid: Callable[[], bool] = lambda: True
        self._thread: threading.Thread | None = None

    # -- the render side -----------------------------------------------------------------

    def render_view(self) -> dict[str, str]:
        """{name: body} templates read as `http.<name>`: pending while it is checked, else
        accepted; a resource without any body is absent."""
        with self._lock:
            out = {}
            for name, state in self.states.items():
                version = cache.offered(state)
                if version is not None:
                    out[name] = version.body
            return out

    def settle(self, rendered: Mapping[str, str], accepted: bool) -> bool:
        """Take the render gate's verdict on a render that used the bodies of `rendered`
        ({name: digest}). Returns True when what templates see changed (a refused pending
        body: the caller renders again with the accepted one)."""
        changed = []
        with self._lock:
            for name, body_digest in rendered.items():
                state = self.states.get(name)
                if state is None:
                    continue
                after = cache.on_verdict(state, body_digest, accepted)
                if after != state:
                    self.states[name] = after
                    changed.append(name)
        if changed and not accepted:
            self._event(
                "Warning",
                "HTTPResourceRefused",
                f"render with new body of {', '.join(changed)} refused by the render gate; "
                "keeping the accepted body",
            )
        return bool(changed) and not accepted

    # -- the fetch side ------------------------------------------------------------------

    def refresh(self, force: bool = False) -> bool:
        """Fetch every resource that is due (all with `force`); returns True when what
        templates see changed."""
        specs, problems = cache.parse_resources(self.template_config())
        before = self.render_view()
        with self._lock:
            self.specs, self.problems = specs, problems
            for name in set(self.states) - set(specs):
                del self.states[name]
                with contextlib.suppress(KeyError):  # never fetched: no sample
                    BODY_AGE.remove(name)
            due = [
                s
                for s in specs.values()
                if force or cache.due(self.states.get(s.name, ResourceState()), self.clock())
            ]
        for spec in due:
            self._fetch_one(spec)
        self._report()
        return self.render_view() != before

    def _fetch_one(self, spec: ResourceSpec) -> None:
        with self._lock:
            state = self.states.get(spec.name, ResourceState())
        headers = cache.conditional_headers(state)
        try:
            if spec.auth_type:
                headers.update(
                    cache.auth_header(spec.auth_type, self.read_secret(spec.auth_secret) or {})
                )
        except KeyError as exc:
            result = cache.FetchResult(error=f"auth Secret {spec.auth_secret} lacks key {exc}")
        except (ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
            # A transient API error is a failed fetch (accepted body kept, reported), never
            # an exception out of begin_term, which the term's start calls unguarded.
            why = f"HTTP {exc.status}" if isinstance(exc, ApiException) else str(exc)
            result = cache.FetchResult(error=f"auth Secret {spec.auth_secret}: {why}")
        else:
            result = fetch(self.http, spec, headers)
        after = cache.on_fetch(state, result, self.clock(), spec)
        with self._lock:
            self.states[spec.name] = after
        if result.error is not None:
            FETCH_ERRORS.labels(spec.name).inc()
            log.warning("http resource %s: %s", spec.name, result.error)
            if state.failures == 0:  # an Event per failure streak, not per attempt
                self._event("Warning", "HTTPResourceFetchFailed", f"{spec.name}: {result.error}")

    def health_error(self) -> str | None:
        """One line for /healthz: invalid entries, failing fetches and expired bodies."""
        now = self.clock()
        with self._lock:
            faults = list(self.problems)
            for name, state in sorted(self.states.items()):
                spec = self.specs.get(name)
                if state.error:
                    faults.append(f"{name}: {state.error}")
                elif spec is not None and cache.expired(state, now, spec):
                    faults.append(
                        f"{name}: no successful fetch for {now - (state.last_success or now):.0f}s"
                    )
        return "; ".join(faults) or None

    def _report(self) -> None:
        now = self.clock()
        with self._lock:
            for name, state in self.states.items():
                if state.last_success is not None:
                    BODY_AGE.labels(name).set(now - state.last_success)
        if self.health is not None:
            self.health.set_error(HTTP_STORE, self.health_error())

    def _event(self, type_: str, reason: str, message: str) -> None:
        if self.record_event is None:
            return
        try:
            self.record_event(type_, reason, message)
        except Exception as exc:  # reporting must not stop fetching
            log.info("http store event not recorded: %s", exc)

    # -- the leadership term -------------------------------------------------------------

    def begin_term(
        self,
        on_change: Callable[[], None] | None = None,
        record_event: Callable[[str, str, str], None] | None = None,
        term_valid: Callable[[], bool] = lambda: True,
    ) -> None:
        """Fetch every resource now (the term's first render must see them), then keep
        fetching on a thread until end_term; `on_change` asks for a render, `record_event`
        (type, reason, message) reports on the template config. The thread also stops once
        `term_valid()` is False, so a term that ended without end_term fetches no more."""
        self.end_term()
        self._on_change = on_change
        if record_event is not None:
            self.record_event = record_event
        self._stop.clear()
        self._term_valid = term_valid
        self.refresh(force=True)
        self._thread = threading.Thread(target=self._loop, name="http-store", daemon=True)
        self._thread.start()

    def end_term(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None
        if self.health is not None:
            self.health.remove(HTTP_STORE)

    def _loop(self) -> None:
        while not self._stop.wait(self._sleep()) and self._term_valid():
            try:
                changed = self.refresh()
            except Exception:
                log.exception("http store refresh failed")
                continue
            if changed and self._on_change is not None:
                self._on_change()

    def _sleep(self) -> float:
        now = self.clock()
        with self._lock:
            soonest = min((s.next_fetch for s in self.states.values()), default=now + TICK)
        return max(0.05, min(TICK, soonest - now))

    def close(self) -> None:
        self.end_term()
        self.http.close()

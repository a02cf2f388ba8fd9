"""Publish status.activeController on this hub's HAProxyTemplateConfig while it leads.

A continuous loop, not a promotion step: a worker must be able to find the Active before
the first failover ever happens. Promotion calls `publish_now` for one synchronous pass so
failover latency does not ride on the loop's tick.
"""

from __future__ import annotations

import base64
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubernetes import client

from contract import GROUP, VERSION
from contract import TEMPLATE_PLURAL as PLURAL
from controller.hub.config import PLACEHOLDER_ENDPOINT
from controller.hub.loop import LoopThread

log = logging.getLogger(__name__)

CONVERGENCE_KEYS = ("endpoint", "caBundle", "activeIdentity")


def endpoint_refusal(endpoint: str) -> str | None:
    """Why this endpoint must not be advertised, or None. Advertising an unreachable address
    as the failover target is worse than advertising nothing."""
    text = (endpoint or "").strip()
    if not text:
        return "empty endpoint"
    if text.rstrip("/") == PLACEHOLDER_ENDPOINT.rstrip("/"):
        return "placeholder endpoint"
    return None


def desired_status(endpoint: str, ca_bundle: str, identity: str, now: datetime) -> dict[str, str]:
    status = {"endpoint": endpoint.strip(), "activeIdentity": identity}
    if ca_bundle:
        status["caBundle"] = ca_bundle
    status["lastUpdated"] = now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return status


def is_converged(current: Mapping[str, Any] | None, desired: Mapping[str, Any]) -> bool:
    """Equal apart from lastUpdated. Counting lastUpdated would make every pass differ from
    itself and turn the convergence check into a write on every tick."""
    current = current or {}
    return all(current.get(k) == desired.get(k) for k in CONVERGENCE_KEYS)


@dataclass(frozen=True)
class PassOutcome:
    held_leadership: bool
    wrote: bool = False
    refused: str | None = None
    error: str | None = None


def choose_wait(outcome: PassOutcome, fast: float, slow: float) -> float:
    """From what the pass did, never from a second leadership read: leadership arriving
    between the publish and a re-check would otherwise cost a whole slow interval."""
    if not outcome.held_leadership or outcome.error is not None:
        return fast
    return slow


def read_ca_bundle(path: str) -> str:
    """Base64 of the CA file; empty (and logged) when unreadable: endpoint and identity are
    what select a hub, and a worker that pins the CA does not need it republished."""
    if not path:
        return ""
    try:
        return base64.b64encode(Path(path).read_bytes()).decode()
    except OSError as exc:
        log.info("hub publisher: CA bundle %s unreadable (%s); publishing without it", path, exc)
        return ""


class Publisher:
    def __init__(
        self,
        api_client: client.ApiClient,
        *,
        namespace: str,
        template_name: str,
        identity: str,
        endpoint: str,
        ca_bundle_path: str,
        is_leader: Callable[[], bool],
        request_timeout: float,
        fast_interval: float,
        slow_interval: float,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.api = client.CustomObjectsApi(api_client)
        self.namespace = namespace
        self.template_name = template_name
        self.identity = identity
        self.endpoint = endpoint
        self.ca_bundle_path = ca_bundle_path
        self.is_leader = is_leader
        self.request_timeout = request_timeout
        self.fast_interval = fast_interval
        self.slow_interval = slow_interval
        self.clock = clock
        self._loop_thread = LoopThread("hub-publisher", self._loop)
        self._write_lock = threading.Lock()

    def publish_once(self) -> PassOutcome:
        """One pass: a no-op that touches nothing unless this hub leads."""
        if not self.is_leader():
            return PassOutcome(held_leadership=False)
        return self.publish_now()

    def publish_now(self) -> PassOutcome:
        """One pass regardless of the leadership flag (promotion's synchronous step)."""
        refusal = endpoint_refusal(self.endpoint)
        if refusal is not None:
            # Not an error: a hub that cannot describe itself keeps reconciling.
            log.warning("hub publisher: not advertising %r: %s", self.endpoint, refusal)
            return PassOutcome(held_leadership=True, refused=refusal)
        desired = desired_status(
            self.endpoint, read_ca_bundle(self.ca_bundle_path), self.identity, self.clock()
        )
        with self._write_lock:
            try:
                obj = self.api.get_namespaced_custom_object(
                    GROUP,
                    VERSION,
                    self.namespace,
                    PLURAL,
                    self.template_name,
                    _request_timeout=self.request_timeout,
                )
                current = (obj.get("status") or {}).get("activeController")
                if is_converged(current, desired):
                    return PassOutcome(held_leadership=True)
                self.api.patch_namespaced_custom_object_status(
                    GROUP,
                    VERSION,
                    self.namespace,
                    PLURAL,
                    self.template_name,
                    {"status": {"activeController": desired}},
                    _request_timeout=self.request_timeout,
                )
            except Exception as exc:
                log.warning("hub publisher: pass failed: %s", exc)
                return PassOutcome(held_leadership=True, error=str(exc))
        return PassOutcome(held_leadership=True, wrote=True)

    @property
    def running(self) -> bool:
        return self._loop_thread.running

    def start(self) -> None:
        self._loop_thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._loop_thread.stop(timeout)

    def _loop(self, stop: threading.Event) -> None:
        while not stop.is_set():
            outcome = self.publish_once()
            stop.wait(choose_wait(outcome, self.fast_interval, self.slow_interval))

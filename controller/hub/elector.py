"""The hub Lease: one per control plane, held by the hub that is Active.

An Active acquires and renews it every retry period; when it cannot renew for the renew
deadline it stops leading without exiting and keeps trying. A Standby never runs the loop
before promotion: promotion takes the Lease with `acquire_once` and then starts renewing.

Expiry is judged from the holder's renewTime plus its leaseDurationSeconds, the same anchor
seed 004 uses for detection across clusters.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from controller.hub.loop import LoopThread

log = logging.getLogger(__name__)


class LeaseHeld(Exception):
    """Another identity holds an unexpired hub Lease."""


def _micro(when: datetime) -> datetime:
    # MicroTime needs a fractional part; isoformat() drops a zero one.
    return when if when.microsecond else when.replace(microsecond=1)


def lease_expired(spec: client.V1LeaseSpec, now: datetime) -> bool:
    renew = spec.renew_time or spec.acquire_time
    if not spec.holder_identity or renew is None:
        return True
    if renew.tzinfo is None:
        renew = renew.replace(tzinfo=UTC)
    return now > renew + timedelta(seconds=spec.lease_duration_seconds or 0)


class HubElector:
    def __init__(
        self,
        api_client: client.ApiClient,
        *,
        namespace: str,
        name: str,
        identity: str,
        lease_duration: float,
        renew_deadline: float,
        retry_period: float,
        request_timeout: float,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.api = client.CoordinationV1Api(api_client)
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_duration_seconds = max(1, int(-(-lease_duration // 1)))
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.request_timeout = request_timeout
        self.clock = clock
        self.monotonic = monotonic
        self._leading = False
        self._last_renew: float | None = None
        self._loop_thread = LoopThread("hub-elector", self._loop)
        self._lock = threading.Lock()
        self.uid: str | None = None
        self.last_renew_wall: datetime | None = None

    def is_leader(self) -> bool:
        # Judged at call time so a renewal blocked on a dead API server cannot extend it.
        last = self._last_renew
        return self._leading and last is not None and self.monotonic() - last <= self.renew_deadline

    def try_acquire_or_renew(self) -> bool:
        """One attempt; True when this identity holds the Lease afterwards."""
        with self._lock:
            now = self.clock()
            try:
                lease = self.api.read_namespaced_lease(
                    self.name, self.namespace, _request_timeout=self.request_timeout
                )
            except ApiException as exc:
                if exc.status != 404:
                    raise
                body = client.V1Lease(
                    metadata=client.V1ObjectMeta(name=self.name, namespace=self.namespace),
                    spec=self._spec(now, now, 0),
                )
                created = self.api.create_namespaced_lease(
                    self.namespace, body, _request_timeout=self.request_timeout
                )
                self._renewed(created, now)
                return True
            spec = lease.spec or client.V1LeaseSpec()
            if spec.holder_identity == self.identity:
                acquired = spec.acquire_time or now
                new_spec = self._spec(acquired, now, spec.lease_transitions or 0)
            elif lease_expired(spec, now):
                new_spec = self._spec(now, now, (spec.lease_transitions or 0) + 1)
            else:
                return False
            lease.spec = new_spec
            updated = self.api.replace_namespaced_lease(
                self.name, self.namespace, lease, _request_timeout=self.request_timeout
            )
            self._renewed(updated, now)
            return True

    def _spec(self, acquired: datetime, now: datetime, transitions: int) -> client.V1LeaseSpec:
        return client.V1LeaseSpec(
            holder_identity=self.identity,
            lease_duration_seconds=self.lease_duration_seconds,
            acquire_time=_micro(acquired),
            renew_time=_micro(now),
            lease_transitions=transitions,
        )

    def _renewed(self, lease: client.V1Lease, now: datetime) -> None:
        self.uid = lease.metadata.uid if lease.metadata else None
        self._last_renew = self.monotonic()
        self.last_renew_wall = now
        self._leading = True

    def acquire_once(self) -> None:
        """Promotion's step: take the Lease now or raise."""
        if not self.try_acquire_or_renew():
            raise LeaseHeld(f"{self.namespace}/{self.name} is held by another hub")

    def tick(self) -> None:
        try:
            if self.try_acquire_or_renew():
                return
        except Exception as exc:
            log.info("hub elector: renewal failed: %s", exc)
        # Lose leadership after the renew deadline, never exit: the loop keeps trying.
        if self._leading and (
            self._last_renew is None or self.monotonic() - self._last_renew > self.renew_deadline
        ):
            self._leading = False
            log.warning("hub elector: lost the hub Lease (renew deadline passed)")

    @property
    def running(self) -> bool:
        return self._loop_thread.running

    def start(self) -> None:
        self._loop_thread.start()

    def _loop(self, stop: threading.Event) -> None:
        while not stop.is_set():
            self.tick()
            stop.wait(self.retry_period)

    def stop(self, release: bool = True, timeout: float = 10.0) -> None:
        """Stop renewing. `release=False` simulates a killed process (the Lease just ages)."""
        self._loop_thread.stop(timeout)
        was_leading, self._leading = self._leading, False
        if release and was_leading:
            try:
                lease = self.api.read_namespaced_lease(
                    self.name, self.namespace, _request_timeout=self.request_timeout
                )
                if lease.spec and lease.spec.holder_identity == self.identity:
                    lease.spec.holder_identity = None
                    self.api.replace_namespaced_lease(
                        self.name, self.namespace, lease, _request_timeout=self.request_timeout
                    )
            except Exception as exc:
                log.info("hub elector: release failed: %s", exc)

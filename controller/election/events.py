"""Kubernetes Events on the leader Lease (or another object), sent from a background thread.

The elector must never wait on an Event write: on a lost lease the API server may be the
thing that is down, and the leader work has to stop on time regardless.
"""

from __future__ import annotations

import logging
import queue
import threading
import uuid
from collections.abc import Callable
from datetime import UTC, datetime

from kubernetes import client

log = logging.getLogger(__name__)

LEADER_ELECTION_STARTED = "LeaderElectionStarted"
BECAME_LEADER = "BecameLeader"
LOST_LEADERSHIP = "LostLeadership"
NEW_LEADER_OBSERVED = "NewLeaderObserved"

COMPONENT = "haptic-controller"


class EventRecorder:
    def __init__(
        self,
        api_client: client.ApiClient,
        namespace: str,
        lease_name: str,
        identity: str,
        lease_uid: Callable[[], str | None] = lambda: None,
        timeout: float = 5.0,
        *,
        kind: str = "Lease",
        api_version: str = "coordination.k8s.io/v1",
    ):
        self.api = client.CoreV1Api(api_client)
        self.namespace = namespace
        self.lease_name = lease_name  # the involved object's name
        self.kind = kind
        self.api_version = api_version
        self.identity = identity
        self._lease_uid = lease_uid
        self._timeout = timeout
        self._queue: queue.Queue[tuple[str, str, str, datetime] | None] = queue.Queue(100)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def record(self, reason: str, message: str, type_: str = "Normal") -> None:
        """Queue an Event; dropped (and logged) when the queue is full."""
        self._ensure_thread()
        try:
            self._queue.put_nowait((reason, message, type_, datetime.now(UTC)))
        except queue.Full:
            log.warning("dropping event %s: %s (event queue full)", reason, message)

    def close(self, timeout: float = 2.0) -> None:
        """Send what is queued (bounded by `timeout`), then stop the sender thread."""
        with self._lock:
            thread = self._thread
        if thread is None:
            return
        try:
            self._queue.put(None, timeout=timeout)
        except queue.Full:
            return
        thread.join(timeout)

    def _ensure_thread(self) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name=f"lease-events-{self.identity}", daemon=True
                )
                self._thread.start()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            reason, message, type_, when = item
            try:
                self._send(reason, message, type_, when)
            except Exception as exc:
                log.warning("could not record event %s: %s", reason, exc)

    def _send(self, reason: str, message: str, type_: str, when: datetime) -> None:
        event = client.CoreV1Event(
            metadata=client.V1ObjectMeta(
                name=f"{self.lease_name}.{uuid.uuid4().hex[:16]}", namespace=self.namespace
            ),
            involved_object=client.V1ObjectReference(
                api_version=self.api_version,
                kind=self.kind,
                name=self.lease_name,
                namespace=self.namespace,
                uid=self._lease_uid(),
            ),
            reason=reason,
            message=message,
            type=type_,
            count=1,
            first_timestamp=when,
            last_timestamp=when,
            source=client.V1EventSource(component=COMPONENT),
            reporting_component=COMPONENT,
            reporting_instance=self.identity,
        )
        self.api.create_namespaced_event(self.namespace, event, _request_timeout=self._timeout)

"""A watch of the leader Lease that wakes the elector when the term on it changes.

Without it a follower notices a released Lease only at its next retry (up to a retry
period plus jitter, 5-6 s by default); with it a graceful hand-over takes one watch event
and one read. The watch only wakes the elector: what to write is still decided from the
elector's own read of the Lease (decisions.decide), so a late, lost or duplicated event
costs at most a retry period, never safety.
"""

from __future__ import annotations

import logging

from kubernetes import client

from controller.election.elector import LeaderElector
from controller.election.lease_store import record_from_object
from controller.election.record import InvalidEpoch
from controller.kubeclient import bounded_copy
from controller.watch.informer import Informer
from controller.watch.resources import ResourceRef
from controller.watch.store import DELETED
from kubewatch import ReflectorConfig

log = logging.getLogger(__name__)


def lease_ref(namespace: str, name: str) -> ResourceRef:
    """The one leader Lease, watched by name."""
    return ResourceRef(
        "leader-lease",
        "coordination.k8s.io/v1",
        "leases",
        namespace=namespace,
        field_selector=f"metadata.name={name}",
    )


class LeaseWatch:
    """Follows the elector's Lease and hands every change to `LeaderElector.notice_lease`."""

    def __init__(
        self,
        api_client: client.ApiClient,
        elector: LeaderElector,
        config: ReflectorConfig | None = None,
    ) -> None:
        self.elector = elector
        store = elector.store
        self.informer = Informer(
            bounded_copy(api_client),
            lease_ref(store.namespace, store.name),
            config=config,
            handlers=[self._on_event],
        )

    def start(self) -> LeaseWatch:
        self.informer.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self.informer.stop(timeout)

    def _on_event(self, _kind: str, etype: str, obj: dict | None) -> None:
        if not isinstance(obj, dict):
            return  # SYNCED: the changes of a relist come as their own events
        if etype == DELETED:
            self.elector.notice_lease(None)
            return
        try:
            record = record_from_object(obj)
        except InvalidEpoch as exc:
            log.warning("%s: unreadable lease in watch: %s", self.elector.identity, exc)
            return
        self.elector.notice_lease(record)

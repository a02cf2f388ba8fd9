"""The mirror: list + watch Kubernetes and write what it sees into PostgreSQL.

One thread per watched kind, each a kubewatch Reflector with a KindWatcher as its sink
(docs/watch.md). Each resumes its watch from the resourceVersion the last run stored, or
lists (recording every object and marking as collected what disappeared while the mirror
was away) when there is none or the API server answers 410 Gone, then watches, resuming
from the last resourceVersion it saw after a dropped connection. Position and lag are
stored in MirrorState. Not polling: between events it only waits.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from celery.signals import worker_shutting_down
from django.db import close_old_connections, connection
from django.utils import timezone
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from checkpoints import mapping, store
from checkpoints.models import MirrorState
from contract import API_VERSION, CONTROLLER_COMPONENT, MIRROR_USER_AGENT
from kubewatch import Gone, Reflector, ReflectorConfig

log = logging.getLogger(__name__)

CRD_BASE = f"/apis/{API_VERSION}/namespaces/{{ns}}/"


@dataclass(frozen=True)
class WatchedKind:
    key: str
    path: str
    apply: Callable[[dict[str, Any]], None]
    delete: Callable[[dict[str, Any]], None]
    relist: Callable[[str, list[dict[str, Any]]], int]
    kind: str = ""
    field_selector: str = ""  # sent with the list and the watch
    # The order a list is applied in (None: as listed). A watch needs none: the publisher
    # writes a checkpoint before the pointers that name it.
    list_order: Callable[[dict[str, Any]], Any] | None = None


def _uids(items: list[dict[str, Any]]) -> set[str]:
    return {(i.get("metadata") or {}).get("uid", "") for i in items}


def watched_kinds() -> list[WatchedKind]:
    def aux(kind: str, plural: str) -> WatchedKind:
        return WatchedKind(
            key=plural,
            path=CRD_BASE + plural,
            apply=store.apply_auxiliary,
            delete=store.delete_auxiliary,
            relist=lambda ns, items: store.relist_auxiliary(kind, ns, _uids(items)),
        )

    return [
        # Children first, so a checkpoint listed afterwards finds its auxiliary bytes.
        aux("map", "haproxymapfiles"),
        aux("general", "haproxygeneralfiles"),
        aux("crt-list", "haproxycrtlistfiles"),
        WatchedKind(
            key="haproxycfgs",
            path=CRD_BASE + "haproxycfgs",
            apply=store.apply_haproxycfg,
            delete=store.delete_haproxycfg,
            relist=lambda ns, items: store.relist_haproxycfgs(ns, _uids(items)),
            # Checkpoints before the published config, whose pointers promote them.
            list_order=lambda obj: mapping.haproxycfg_role(obj) == "published",
        ),
        WatchedKind(
            key="haproxytemplateconfigs",
            path=CRD_BASE + "haproxytemplateconfigs",
            apply=store.apply_template_config,
            delete=lambda obj: None,
            relist=lambda ns, items: 0,
        ),
        WatchedKind(
            key="leases",
            path="/apis/coordination.k8s.io/v1/namespaces/{ns}/leases",
            apply=store.apply_lease,
            delete=store.delete_lease,
            relist=lambda ns, items: store.relist_leases(
                ns, {(i.get("metadata") or {}).get("name", "") for i in items}
            ),
        ),
        WatchedKind(
            key="events",
            path="/api/v1/namespaces/{ns}/events",
            apply=store.apply_event,
            delete=store.delete_event,
            relist=lambda ns, items: store.relist_events(ns, _uids(items)),
        ),
        # Render warnings are Events in the namespace of the object they are about (an
        # Ingress anywhere): the controller's own Events in every namespace, by their
        # reportingComponent (a field selector the real kube-apiserver serves for Events).
        WatchedKind(
            key="render-warning-events",
            path="/api/v1/events",
            apply=store.apply_event,
            delete=store.delete_event,
            relist=lambda ns, items: store.relist_events_outside(ns, _uids(items)),
            field_selector=f"reportingComponent={CONTROLLER_COMPONENT}",
        ),
    ]


def load_api_client(kubeconfig: str | None = None) -> k8s.ApiClient:
    """An ApiClient from a kubeconfig path, else in-cluster configuration."""
    if kubeconfig:
        api = k8s_config.new_client_from_config(config_file=kubeconfig)
    else:
        k8s_config.load_incluster_config()
        api = k8s.ApiClient()
    api.user_agent = MIRROR_USER_AGENT
    return api


class KindWatcher:
    """The sink of one kind's Reflector in one namespace: writes through `store` and keeps
    position, lag and the last error in MirrorState (docs/watch.md)."""

    def __init__(
        self,
        api: k8s.ApiClient,
        kind: WatchedKind,
        namespace: str,
        stop: threading.Event,
        watch_timeout: int = 60,
    ) -> None:
        self.kind = kind
        self.namespace = namespace
        self.stop = stop
        self.state_key = f"{namespace}/{kind.key}"
        self.reflector = Reflector(
            api,
            kind.path.format(ns=namespace),
            self,
            query=[("fieldSelector", kind.field_selector)] if kind.field_selector else (),
            config=ReflectorConfig(watch_timeout_seconds=watch_timeout, backoff_max=10.0),
            name=f"mirror-{self.state_key}",
        )

    def interrupt(self) -> None:
        """Unblock a watch waiting for the next event (used on shutdown)."""
        self.reflector.signal_stop()

    # -- state -----------------------------------------------------------------------------

    def _state(self) -> MirrorState:
        state, _ = MirrorState.objects.get_or_create(kind=self.state_key)
        return state

    def on_connected(self) -> None:
        """The API server answers again: an error recorded before is no longer current."""
        MirrorState.objects.filter(kind=self.state_key).exclude(last_error="").update(
            last_error="", last_error_at=None
        )

    def on_error(self, exc: Exception) -> None:
        if isinstance(exc, Gone):
            return  # not a fault: the reflector relists
        # The database itself may be what is down: a broken connection is reopened on the
        # next try (and the reflector survives this raising).
        try:
            MirrorState.objects.filter(kind=self.state_key).update(
                last_error=str(exc)[:2000], last_error_at=timezone.now()
            )
        finally:
            with contextlib.suppress(Exception):
                connection.close()
            close_old_connections()

    def on_list(self, items: list[dict[str, Any]], resource_version: str) -> None:
        state = self._state()
        previous_sync = state.last_synced_at
        order = self.kind.list_order
        for item in sorted(items, key=order) if order else items:
            self.kind.apply(item)
        collected = self.kind.relist(self.namespace, items)
        store.fill_missing_contents()
        now = timezone.now()
        # After a gap, lag is how far behind the record was when we caught up.
        lag = (now - previous_sync).total_seconds() if previous_sync else 0.0
        MirrorState.objects.filter(pk=state.pk).update(
            resource_version=resource_version,
            last_synced_at=now,
            last_relist_at=now,
            lag_seconds=lag,
            relists_total=state.relists_total + 1,
            last_error="",
            last_error_at=None,
        )
        log.info(
            "mirror %s listed %d objects at rv %s (%d collected)",
            self.state_key,
            len(items),
            resource_version,
            collected,
        )

    def on_event(self, event_type: str, obj: dict[str, Any]) -> None:
        received = time.monotonic()
        if event_type == "DELETED":
            self.kind.delete(obj)
        else:
            self.kind.apply(obj)
        state = self._state()
        self._advance(
            str((obj.get("metadata") or {}).get("resourceVersion", "")),
            last_event_at=timezone.now(),
            lag_seconds=max(0.0, time.monotonic() - received),
            events_total=state.events_total + 1,
        )

    def on_bookmark(self, resource_version: str) -> None:
        self._advance(resource_version)

    def _advance(self, resource_version: str, **fields: Any) -> None:
        # A write that succeeds ends an error of the database itself (e.g. it was locked).
        MirrorState.objects.filter(kind=self.state_key).update(
            resource_version=resource_version,
            last_synced_at=timezone.now(),
            last_error="",
            last_error_at=None,
            **fields,
        )

    def resume_point(self) -> str:
        """The resourceVersion a previous run stopped at ("" when there is none).

        Resuming a watch from it delivers every change made while the mirror was down,
        deletions included; when the API server no longer has that history (410) we relist.
        """
        state = self._state()
        if not state.resource_version or state.last_relist_at is None:
            return ""
        if state.last_synced_at:
            lag = (timezone.now() - state.last_synced_at).total_seconds()
            MirrorState.objects.filter(pk=state.pk).update(lag_seconds=lag)
        return state.resource_version

    def run(self) -> None:
        """Run until `stop` is set: resume or list, then watch, relisting on 410."""
        try:
            if self.stop.is_set():
                return
            self.reflector.resume_at(self.resume_point())
            if not self.stop.is_set():  # stop() may have come while we read the state
                self.reflector.run()
        finally:
            connection.close()


class Mirror:
    """All watchers of one namespace, each in its own thread."""

    def __init__(
        self,
        api: k8s.ApiClient,
        namespace: str,
        kinds: list[WatchedKind] | None = None,
        watch_timeout: int = 60,
    ) -> None:
        self.stop_event = threading.Event()
        self.watchers = [
            KindWatcher(api, kind, namespace, self.stop_event, watch_timeout)
            for kind in (kinds or watched_kinds())
        ]
        self.threads: list[threading.Thread] = []

    def start(self) -> None:
        # Children before parents on the first pass (see watched_kinds), then all together.
        for watcher in self.watchers:
            thread = threading.Thread(
                target=watcher.run, name=f"mirror-{watcher.state_key}", daemon=True
            )
            thread.start()
            self.threads.append(thread)

    def stop(self, timeout: float = 10.0) -> None:
        self.stop_event.set()
        for watcher in self.watchers:
            watcher.interrupt()
        deadline = time.monotonic() + timeout
        for thread in self.threads:
            thread.join(max(0.1, deadline - time.monotonic()))

    def wait_synced(self, since: datetime | None = None, timeout: float = 30.0) -> bool:
        """Whether every watcher has listed (after `since`) within `timeout` seconds."""
        keys = [w.state_key for w in self.watchers]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            states = MirrorState.objects.filter(kind__in=keys, last_relist_at__isnull=False)
            if since is not None:
                states = states.filter(last_relist_at__gte=since)
            if states.count() == len(keys):
                return True
            time.sleep(0.1)
        return False


# Set when the Celery worker running the mirror task shuts down, so a warm shutdown does not
# wait forever for a task that never ends on its own.
shutdown = threading.Event()


@worker_shutting_down.connect
def _on_worker_shutdown(**_: Any) -> None:
    shutdown.set()


def run_forever(kubeconfig: str | None, namespace: str, duration: float | None = None) -> None:
    """Run the mirror until the worker shuts down (or for `duration` seconds when given)."""
    mirror = Mirror(load_api_client(kubeconfig), namespace)
    mirror.start()
    try:
        shutdown.wait(duration)
    finally:
        mirror.stop()

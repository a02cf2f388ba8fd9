"""The Standby's mirror of the Active's configuration and checkpoints (seed 004).

One kubewatch Reflector per kind keeps a cache of the Active's objects (its sink is
`_KindCache`, docs/watch.md); a sync thread copies what
`mirror_rules.wanted` selects into the Standby's cluster whenever a watch event arrives, and
prunes on a period once every cache has synced. `stop()` cancels and then waits for every
thread to finish: promotion opens the write fence only after that returns True.
"""

from __future__ import annotations

import copy
import logging
import threading
from collections.abc import Mapping
from typing import Any

from kubernetes.client.exceptions import ApiException

from contract import API_VERSION, INTENT_ANNOTATION, MIRRORED_INTENT_ANNOTATION
from controller.hub import mirror_rules as rules
from controller.hub.kube import (
    CFG,
    CRTLIST,
    GENERAL,
    LEASE,
    MAP,
    SECRET,
    TEMPLATE,
    Kind,
    Kube,
)
from controller.retained.intent import (
    parse_intent,
)
from controller.retained.store import retained_lease_name
from kubewatch import Reflector, ReflectorConfig

log = logging.getLogger(__name__)

KIND_API: dict[str, Kind] = {
    rules.TEMPLATE: TEMPLATE,
    rules.CFG: CFG,
    rules.MAP: MAP,
    rules.GENERAL: GENERAL,
    rules.CRTLIST: CRTLIST,
    rules.SECRET: SECRET,
}
# Among HAProxyCfgs only checkpoints and the ordinary one (for its pointers) are read.
REMOTE_SELECTORS = {
    rules.CFG: f"{rules.ROLE_LABEL} in ({rules.CHECKPOINT_ROLE},{rules.PUBLISHED_ROLE})"
}


class Mirror:
    def __init__(
        self,
        remote: Kube,
        local: Kube,
        *,
        remote_namespace: str,
        local_namespace: str,
        template_name: str,
        source: str,
        prune_interval: float,
        watch_read_timeout: float = 5.0,
        retry_delay: float = 0.5,
    ) -> None:
        self.remote = remote
        self.local = local
        self.remote_namespace = remote_namespace
        self.local_namespace = local_namespace
        self.template_name = template_name
        self.source = source
        self.prune_interval = prune_interval
        self.watch_read_timeout = watch_read_timeout
        self.retry_delay = retry_delay
        self._lock = threading.Lock()
        self._cache: dict[str, dict[str, dict[str, Any]]] = {k: {} for k in rules.KINDS}
        self._synced: set[str] = set()
        self._dirty = threading.Event()
        self._stop = threading.Event()
        self._threads: dict[str, threading.Thread] = {}
        self._reflectors: dict[str, Reflector] = {}
        self.passes = 0  # completed sync passes (observability and tests)
        self.last_error: str | None = None

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        """Start, or resume after a stop that promotion abandoned: a Standby that stays a
        Standby must keep mirroring. Threads still winding down simply carry on."""
        if self._stop.is_set():
            # A stop was requested: let its threads finish first (stop() closed their watch
            # streams, and every other read is bounded by the client's timeout).
            for t in list(self._threads.values()):
                t.join(2 * self.remote.timeout + self.retry_delay)
        self._stop.clear()
        alive = {name for name, t in self._threads.items() if t.is_alive()}
        if not alive:
            with self._lock:
                self._cache = {k: {} for k in rules.KINDS}
                self._synced = set()
        # A stopped reflector does not resume: a kind whose reflector was told to stop gets a
        # fresh one even while the old thread winds down (it delivers nothing more).
        targets = {
            f"mirror-{k}": self._reflector(k).run
            for k in rules.KINDS
            if f"mirror-{k}" not in alive or self._reflectors[k].stopping
        }
        if "mirror-sync" not in alive:
            targets["mirror-sync"] = self._sync_loop
        for name, target in targets.items():
            thread = threading.Thread(target=target, name=name, daemon=True)
            self._threads[name] = thread
            thread.start()
        self._dirty.set()

    @property
    def running(self) -> bool:
        return any(t.is_alive() for t in self._threads.values())

    def stop(self, timeout: float) -> bool:
        """Cancel, interrupt blocked watch reads, and wait. True only once really stopped."""
        self._stop.set()
        self._dirty.set()
        with self._lock:
            reflectors = list(self._reflectors.values())
        for reflector in reflectors:
            reflector.signal_stop()
        deadline = threading.Event()
        timer = threading.Timer(timeout, deadline.set)
        timer.start()
        try:
            for t in list(self._threads.values()):
                while t.is_alive() and not deadline.is_set():
                    t.join(0.05)
        finally:
            timer.cancel()
        return not self.running

    @property
    def synced(self) -> bool:
        with self._lock:
            return self._synced == set(rules.KINDS)

    # -- remote caches -------------------------------------------------------------------

    def _reflector(self, kind: str) -> Reflector:
        """A fresh reflector of one kind (a stopped one does not start again)."""
        selector = REMOTE_SELECTORS.get(kind)
        # The server ends an idle watch before our read timeout fires, so a quiet stream
        # resumes from its resourceVersion instead of relisting.
        config = ReflectorConfig(
            connect_timeout=self.remote.timeout,
            list_read_timeout=self.remote.timeout,
            watch_timeout_seconds=max(1, int(self.watch_read_timeout)),
            watch_read_grace=self.remote.timeout,
            backoff_initial=self.retry_delay,
            backoff_max=self.retry_delay,
        )
        reflector = Reflector(
            self.remote.api_client,
            KIND_API[kind].collection(self.remote_namespace),
            _KindCache(self, kind),
            query=[("labelSelector", selector)] if selector else (),
            config=config,
            name=f"mirror-{kind}",
        )
        with self._lock:
            self._reflectors[kind] = reflector
        return reflector

    # -- writes into the Standby's cluster -----------------------------------------------

    def _sync_loop(self) -> None:
        while not self._stop.is_set():
            self._dirty.wait(self.prune_interval)
            if self._stop.is_set():
                return
            self._dirty.clear()
            try:
                self.sync_once()
                self.last_error = None
            except Exception as exc:
                self.last_error = str(exc)
                log.warning("mirror: sync pass failed: %s", exc)
                self._stop.wait(self.retry_delay)
                self._dirty.set()

    def _snapshot(self) -> tuple[dict[str, dict[str, dict[str, Any]]], bool]:
        with self._lock:
            snap = {k: dict(v) for k, v in self._cache.items()}
            return snap, self._synced == set(rules.KINDS)

    def sync_once(self) -> None:
        snapshot, synced = self._snapshot()
        if not synced:
            # Until every kind is listed, secrets and children are not yet decidable.
            return
        wanted = rules.wanted(snapshot, self.template_name)
        # Every local copy's uid first: a copy is re-parented to copies of any kind.
        local_items = {
            kind: self.local.list(KIND_API[kind].collection(self.local_namespace)).get("items")
            or []
            for kind in rules.SYNC_ORDER
        }
        uid_map: dict[str, str] = {}
        for items in local_items.values():
            uid_map.update(rules.uid_map(items, self.source))
        current = {k: {rules.meta(o)["name"]: o for o in v} for k, v in local_items.items()}
        # A second look at the children: one owned by its checkpoint (published before
        # sharing) gets its owner reference once the checkpoint's copy exists.
        for kind in (*rules.SYNC_ORDER, *rules.CHILD_REFS):
            if self._stop.is_set():
                return
            self._apply_kind(kind, wanted[kind], current[kind], uid_map)
        for kind in rules.SYNC_ORDER:
            api = KIND_API[kind]
            for obj in rules.prune(local_items[kind], set(wanted[kind]), self.source, synced):
                if self._stop.is_set():
                    return
                m = rules.meta(obj)
                try:
                    self.local.delete(
                        api.item(self.local_namespace, m["name"]), m["uid"], m["resourceVersion"]
                    )
                except ApiException as exc:
                    if exc.status not in (404, 409):
                        raise
        if not self._stop.is_set():
            self._sync_intent(uid_map)
        self.passes += 1

    def _apply_kind(
        self,
        kind: str,
        wanted: Mapping[str, Mapping[str, Any]],
        current: dict[str, Any],
        uid_map: dict[str, str],
    ) -> None:
        api = KIND_API[kind]
        # Checkpoints before the ordinary HAProxyCfg whose pointers name their copies.
        for name, src in sorted(wanted.items(), key=lambda item: item[0] == self.template_name):
            if self._stop.is_set():
                return
            written = self._apply(api, current.get(name), src, uid_map)
            if written is not None:
                current[name] = written
                uid_map[rules.meta(src).get("uid", "")] = rules.meta(written).get("uid", "")

    def _sync_intent(self, uid_map: Mapping[str, str]) -> None:
        """Carry the Active's deployment intent to the local retained-state Lease as the
        mirrored-intent annotation: the floor the promoted side's first claim adopts. Only
        that annotation is written (compare-and-swap); the local claim and intent stay."""
        name = retained_lease_name(self.template_name)
        remote = self._get(self.remote, LEASE.item(self.remote_namespace, name))
        if remote is None:
            return
        text = rules.local_intent(rules.annotations(remote).get(INTENT_ANNOTATION), uid_map)
        if text is None:
            return
        floor = parse_intent(text)
        assert floor is not None
        local = self._get(self.local, LEASE.item(self.local_namespace, name))
        if local is None:
            owner = {
                "apiVersion": API_VERSION,
                "kind": rules.TEMPLATE,
                "name": self.template_name,
                "uid": floor.template_uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {
                    "name": name,
                    "namespace": self.local_namespace,
                    "ownerReferences": [owner],
                    "annotations": {MIRRORED_INTENT_ANNOTATION: text},
                },
                "spec": {},
            }
            self.local.create(LEASE.collection(self.local_namespace), body)
            return
        current = rules.annotations(local)
        adopted = parse_intent(current.get(INTENT_ANNOTATION))
        if current.get(MIRRORED_INTENT_ANNOTATION) == text or (
            adopted is not None and adopted.names(floor.plan_id, floor.checksum)
        ):
            return  # carried already, or already adopted by a claim
        body = copy.deepcopy(dict(local))
        body["metadata"]["annotations"] = {**current, MIRRORED_INTENT_ANNOTATION: text}
        try:
            self.local.replace(LEASE.item(self.local_namespace, name), body)
        except ApiException as exc:
            if exc.status != 409:  # a claim raced us: the next pass carries it
                raise

    @staticmethod
    def _get(kube: Kube, path: str) -> dict[str, Any] | None:
        try:
            return kube.get(path)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def _apply(
        self,
        api: Kind,
        local: Mapping[str, Any] | None,
        src: Mapping[str, Any],
        uid_map: Mapping[str, str],
    ) -> Mapping[str, Any] | None:
        """Create or update one copy; our copy as written, or None if foreign."""
        desired = rules.to_local(src, self.source, self.local_namespace, uid_map)
        status = (
            rules.local_status(api.name, src.get("status"), uid_map)
            if api.mirrored_status
            else None
        )
        action = rules.decide(local, desired, status, self.source, api.mirrored_status)
        name = desired["metadata"]["name"]
        if action is rules.Action.FOREIGN:
            log.info("mirror: %s %s exists unlabelled here; never overwritten", api.name, name)
            return None
        if action is rules.Action.UNCHANGED:
            return local
        if action is rules.Action.CREATE:
            written = self.local.create(api.collection(self.local_namespace), desired)
        elif action is rules.Action.UPDATE:
            desired["metadata"]["resourceVersion"] = rules.meta(local or {})["resourceVersion"]
            written = self.local.replace(api.item(self.local_namespace, name), desired)
        else:
            written = dict(local or {})
        if status and api.mirrored_status and written.get("status") != status:
            body = {**written, "status": status}
            written = self.local.replace(api.item(self.local_namespace, name) + "/status", body)
        return written


class _KindCache:
    """The sink of one kind's reflector: the Mirror's cache of that kind on the Active."""

    def __init__(self, mirror: Mirror, kind: str) -> None:
        self.mirror = mirror
        self.kind = kind

    def on_list(self, items: list[dict[str, Any]], resource_version: str) -> None:
        m = self.mirror
        with m._lock:
            m._cache[self.kind] = {rules.meta(o)["name"]: o for o in items}
            m._synced.add(self.kind)
        m._dirty.set()

    def on_event(self, event_type: str, obj: dict[str, Any]) -> None:
        m = self.mirror
        name = rules.meta(obj).get("name")
        with m._lock:
            if event_type == "DELETED":
                m._cache[self.kind].pop(name, None)
            else:
                m._cache[self.kind][name] = obj
        m._dirty.set()

    def on_bookmark(self, resource_version: str) -> None:
        """Nothing changed: the reflector keeps the position."""

    def on_connected(self) -> None:
        """The sync pass, not the watch, owns Mirror.last_error."""

    def on_error(self, exc: Exception) -> None:
        log.debug("mirror: watch of %s failed: %s", self.kind, exc)

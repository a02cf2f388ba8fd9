"""The all-replica watch side of one controller replica, wired together (seed 003).

Every replica runs the caches, the reconciler (debounce) and the health server; only the
leader acts on what they produce. `attach_leader()` connects the leader-only consumers (the
render coordinator's trigger callback and the deployment scheduler's pod-set callback) and
replays the current state to them; `detach_leader()` disconnects them at the end of a term.
Followers keep everything hot and simply drop triggers.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from kubernetes.client import ApiClient

from controller.health import RESOURCE_WATCHER, ComponentHealth, HealthServer
from controller.reconciler import DebounceConfig, Reconciler, Trigger
from controller.watch.caches import WatchCaches
from controller.watch.discovery import DiscoveredPod
from kubewatch import ReflectorConfig

log = logging.getLogger(__name__)

TriggerSink = Callable[[Trigger], None]
PodsSink = Callable[[tuple[DiscoveredPod, ...]], None]


class ReplicaWatch:
    """WatchCaches + Reconciler + ComponentHealth (+ HealthServer when a port is given)."""

    def __init__(
        self,
        api_client: ApiClient,
        namespace: str,
        template_name: str = "haptic",
        *,
        watch_namespace: str | None = None,
        informer_config: ReflectorConfig | None = None,
        debounce: DebounceConfig | None = None,
        health: ComponentHealth | None = None,
        health_address: tuple[str, int] | None = ("0.0.0.0", 8081),
        workload_client: ApiClient | None = None,
    ) -> None:
        self.caches = WatchCaches(
            api_client,
            namespace,
            template_name,
            watch_namespace=watch_namespace,
            config=informer_config,
            workload_client=workload_client,
        )
        self.reconciler = Reconciler(self._on_trigger, debounce)
        self.health = health or ComponentHealth()
        self.health.register_probe(RESOURCE_WATCHER, self.caches.health_error)
        self.health.add_readiness_check("caches-synced", lambda: self.caches.synced)
        self.server = HealthServer(self.health, *health_address) if health_address else None
        self._lock = threading.RLock()
        self._trigger_sink: TriggerSink | None = None
        self._pods_sink: PodsSink | None = None
        self.caches.subscribe(self.reconciler.on_change)
        self.caches.subscribe_discovery(self._on_pods)

    def start(self) -> ReplicaWatch:
        if self.server is not None:
            self.server.start()
        self.reconciler.start()
        self.caches.start()
        return self

    def stop(self, timeout: float = 15.0) -> bool:
        self.detach_leader()
        ok = self.caches.stop(timeout)
        ok = self.reconciler.stop(timeout) and ok
        if self.server is not None:
            self.server.stop()
        return ok

    def attach_leader(self, on_trigger: TriggerSink, on_pods: PodsSink | None = None) -> None:
        """Start delivering to the new leader's components, and replay: the current pod set
        at once, and an immediate render trigger (no waiting for the next change)."""
        with self._lock:
            self._trigger_sink = on_trigger
            self._pods_sink = on_pods
        self.caches.replay()

    def detach_leader(self) -> None:
        """Stop delivering; returns after any delivery in progress has finished."""
        with self._lock:
            self._trigger_sink = None
            self._pods_sink = None

    # Sinks are called under the lock so that once detach_leader() returns, nothing more is
    # delivered to the ended term (sinks must be quick: hand the work off, do not do it).
    def _on_trigger(self, trigger: Trigger) -> None:
        with self._lock:
            if self._trigger_sink is not None:  # a follower drops it; a leader gets replay()
                self._trigger_sink(trigger)

    def _on_pods(self, pods: tuple[DiscoveredPod, ...]) -> None:
        with self._lock:
            if self._pods_sink is not None:
                self._pods_sink(pods)

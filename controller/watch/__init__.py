"""Watch caches: list + watch informers, indexed stores, the controller's WatchCaches.

caches = WatchCaches(api_client, namespace="haptic", template_name="haptic").start()
caches.subscribe(lambda ev: reconciler.notify(ev.kind))   # ChangeEvent(kind, type, obj)
caches.subscribe_discovery(on_pods)                       # tuple[DiscoveredPod, ...]
caches.wait_synced(30)
RenderInput(**caches.snapshot().render_kwargs())
caches.replay()                                           # on becoming leader
caches.stop()
"""

from controller.watch.caches import (
    BACKEND_PODS,
    HAPROXY_PODS,
    REPLAY,
    TEMPLATE,
    ChangeEvent,
    Snapshot,
    WatchCaches,
    desired_resources,
)
from controller.watch.discovery import DiscoveredPod, discovered_set
from controller.watch.informer import SYNCED, Informer
from controller.watch.resources import ResourceRef
from controller.watch.store import ADDED, DELETED, MODIFIED, Change, Store
from kubewatch import ApiStatusError, ReflectorConfig

__all__ = [
    "ADDED",
    "BACKEND_PODS",
    "DELETED",
    "HAPROXY_PODS",
    "MODIFIED",
    "REPLAY",
    "SYNCED",
    "TEMPLATE",
    "ApiStatusError",
    "Change",
    "ChangeEvent",
    "DiscoveredPod",
    "Informer",
    "ReflectorConfig",
    "ResourceRef",
    "Snapshot",
    "Store",
    "WatchCaches",
    "desired_resources",
    "discovered_set",
]

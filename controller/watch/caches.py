"""The controller's all-replica watch caches (seed 003: ResourceWatcher + Discovery).

One informer per watched collection. Which collections are watched follows the
HAProxyTemplateConfig: the HAProxy pods by its `spec.podSelector`, backend pods only while
`spec.templateLibraries.kubernetesBackends.podReadinessGate.enabled`, and every entry of
`spec.watchedResources`. When the template changes, watches whose definition changed are
replaced and the others keep running (their caches stay hot).

Every replica keeps these caches; a new leader gets `replay()` so its first render and its
first deployment fan-out start at once instead of waiting for the next change.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from kubernetes.client import ApiClient

from controller.kubeclient import bounded_copy
from controller.watch.discovery import DiscoveredPod, discovered_set
from controller.watch.informer import SYNCED, Informer
from controller.watch.resources import (
    ENDPOINTSLICES,
    INGRESSCLASSES,
    INGRESSES,
    OPAQUE_SECRETS,
    SECRETS,
    SERVICES,
    ResourceRef,
    template_config_ref,
)
from controller.watch.store import (
    MODIFIED,
    SERVICE_NAME_LABEL,
    IndexFunc,
    index_by_label,
    index_by_namespace,
    index_by_readiness_gate,
)
from kubewatch import ReflectorConfig, selectors

log = logging.getLogger(__name__)

TEMPLATE = "templateconfig"
HAPROXY_PODS = "haproxy-pods"
BACKEND_PODS = "pods"
REPLAY = "REPLAY"  # pseudo event type published by replay()

# The kinds the renderer takes as named fields; anything else is an extra watched resource.
RENDER_KINDS = ("ingresses", "services", "endpointslices", "secrets", "pods", "ingressclasses")
OPAQUE = "opaque-secrets"  # rendered as part of `secrets`
RESERVED_KINDS = frozenset((*RENDER_KINDS, TEMPLATE, HAPROXY_PODS, OPAQUE))

INDEXERS: dict[str, dict[str, IndexFunc]] = {
    "endpointslices": {"service-name": index_by_label(SERVICE_NAME_LABEL)},
    BACKEND_PODS: {"readiness-gate": index_by_readiness_gate},
}


@dataclass(frozen=True)
class ChangeEvent:
    """A change in one cache: ADDED / MODIFIED / DELETED (obj is the object), SYNCED after a
    (re)list, REPLAY from replay() (obj None for both)."""

    kind: str
    type: str
    obj: dict | None = None


ChangeHandler = Callable[[ChangeEvent], None]
DiscoveryHandler = Callable[[tuple[DiscoveredPod, ...]], None]


@dataclass(frozen=True)
class Snapshot:
    """Immutable view of the caches at one moment: render input.

    `objects` maps kind -> tuple of objects sorted by (namespace, name). The dicts are the
    caches' own objects, which the caches never mutate (an update replaces the dict); readers
    must not mutate them either.
    """

    template_config: Mapping[str, Any] | None
    objects: Mapping[str, tuple[dict, ...]]
    resource_versions: Mapping[str, str | None] = field(default_factory=dict)

    def get(self, kind: str) -> tuple[dict, ...]:
        return self.objects.get(kind, ())

    @property
    def extra_resources(self) -> Mapping[str, tuple[dict, ...]]:
        return MappingProxyType({k: v for k, v in self.objects.items() if k not in RESERVED_KINDS})

    def render_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of controller.render.RenderInput."""
        kwargs = {kind: self.get(kind) for kind in RENDER_KINDS}
        kwargs["secrets"] = self.get("secrets") + self.get(OPAQUE)
        # Always a tuple, never None: the controller knows the class set, even when empty
        # (then no Ingress is ours).
        return {
            "template_config": self.template_config or {},
            **kwargs,
            "resources": dict(self.extra_resources),
        }


def desired_resources(
    template: Mapping | None, controller_namespace: str, watch_namespace: str | None
) -> tuple[dict[str, ResourceRef], list[str]]:
    """Which collections to watch for a template config (pure). Returns (kind -> ref, problems
    found in the template's watch settings)."""
    refs = {
        r.kind: ResourceRef(r.kind, r.api_version, r.plural, watch_namespace, "", r.field_selector)
        for r in (INGRESSES, SERVICES, ENDPOINTSLICES, SECRETS, OPAQUE_SECRETS)
    }
    # IngressClasses are cluster-scoped: never narrowed to the watch namespace.
    refs[INGRESSCLASSES.kind] = INGRESSCLASSES
    problems: list[str] = []
    spec = (template or {}).get("spec") or {}
    selector = spec.get("podSelector") or {}
    try:
        label_selector = selectors.to_string(selector)
    except (selectors.SelectorError, KeyError, AttributeError) as exc:
        problems.append(f"spec.podSelector: {exc}")
        label_selector = ""
    # An empty selector would mean "every pod in the namespace": never deploy to that.
    if label_selector:
        refs[HAPROXY_PODS] = ResourceRef(
            HAPROXY_PODS, "v1", "pods", controller_namespace, label_selector
        )
    libraries = spec.get("templateLibraries") or {}
    gate = ((libraries.get("kubernetesBackends") or {}).get("podReadinessGate")) or {}
    if gate.get("enabled") is True:
        refs[BACKEND_PODS] = ResourceRef(BACKEND_PODS, "v1", "pods", watch_namespace)
    for name, extra in sorted((spec.get("watchedResources") or {}).items()):
        if name in RESERVED_KINDS:
            problems.append(f"spec.watchedResources.{name}: name is reserved")
            continue
        if not isinstance(extra, Mapping) or not extra.get("apiVersion"):
            problems.append(f"spec.watchedResources.{name}: apiVersion and resources required")
            continue
        if not extra.get("resources"):
            problems.append(f"spec.watchedResources.{name}: apiVersion and resources required")
            continue
        refs[name] = ResourceRef(
            name,
            str(extra["apiVersion"]),
            str(extra["resources"]),
            extra.get("namespace") or watch_namespace,
            extra.get("labelSelector") or "",
            extra.get("fieldSelector") or "",
        )
    return refs, problems


def template_fingerprint(template: Mapping) -> tuple:
    """What of the template config matters to rendering: identity, spec, labels and
    annotations (not status, not resourceVersion)."""
    meta = template.get("metadata") or {}
    return (
        meta.get("uid"),
        json.dumps(template.get("spec"), sort_keys=True),
        json.dumps(meta.get("labels"), sort_keys=True),
        json.dumps(meta.get("annotations"), sort_keys=True),
    )


class WatchCaches:
    """All watch caches of one replica."""

    def __init__(
        self,
        api_client: ApiClient,
        namespace: str,
        template_name: str = "haptic",
        *,
        watch_namespace: str | None = None,
        config: ReflectorConfig | None = None,
        workload_client: ApiClient | None = None,
    ) -> None:
        self.namespace = namespace
        self.template_name = template_name
        self.watch_namespace = watch_namespace
        self.config = config or ReflectorConfig()
        # The template config is read from the control plane's cluster; everything it makes
        # us watch (Ingresses, Services, HAProxy pods...) from the workload cluster.
        self._client = bounded_copy(api_client)
        self._workload = bounded_copy(workload_client) if workload_client else self._client
        self._lock = threading.RLock()
        self._informers: dict[str, Informer] = {}
        self._retired: list[Informer] = []
        self._handlers: tuple[ChangeHandler, ...] = ()
        self._discovery_handlers: tuple[DiscoveryHandler, ...] = ()
        self._discovery_lock = threading.Lock()
        self._discovered: tuple[DiscoveredPod, ...] = ()
        self.problems: list[str] = []
        self._template_seen: tuple | None = None
        self._started = False
        self._template = Informer(
            self._client,
            template_config_ref(namespace, template_name),
            config=self.config,
            handlers=[self._on_template_event],
        )

    # -- subscription ---------------------------------------------------------------------

    def subscribe(self, handler: ChangeHandler) -> None:
        """Call `handler(ChangeEvent)` on every accepted change (on an informer thread)."""
        with self._lock:
            self._handlers = (*self._handlers, handler)

    def subscribe_discovery(self, handler: DiscoveryHandler) -> None:
        """Call `handler(pods)` whenever the discovered HAProxy pod set changes."""
        with self._lock:
            self._discovery_handlers = (*self._discovery_handlers, handler)

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> WatchCaches:
        with self._lock:
            if self._started:
                raise RuntimeError("caches already started")
            self._started = True
            self._reconfigure(None)
        self._template.start()
        return self

    def stop(self, timeout: float = 10.0) -> bool:
        """Stop every informer; True when all threads ended within `timeout` overall."""
        with self._lock:
            informers = [self._template, *self._informers.values(), *self._retired]
            self._started = False
        deadline = time.monotonic() + timeout
        for inf in informers:
            inf.signal_stop()
        ok = all(inf.stop(max(0.0, deadline - time.monotonic())) for inf in informers)
        if ok:
            self._client.close()
            if self._workload is not self._client:
                self._workload.close()
        return ok

    # -- state ----------------------------------------------------------------------------

    @property
    def synced(self) -> bool:
        """True when the template config and every current cache completed a list."""
        with self._lock:
            informers = [self._template, *self._informers.values()]
        return all(inf.synced for inf in informers)

    def wait_synced(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.synced:
                return True
            time.sleep(0.02)
        return self.synced

    @property
    def template_config(self) -> dict | None:
        return self._template.store.get(self.namespace, self.template_name)

    def kinds(self) -> list[str]:
        with self._lock:
            return sorted(self._informers)

    def informer(self, kind: str) -> Informer | None:
        if kind == TEMPLATE:
            return self._template
        with self._lock:
            return self._informers.get(kind)

    def errors(self) -> dict[str, str]:
        """Last error of every cache that is currently failing, plus template problems."""
        with self._lock:
            informers = [self._template, *self._informers.values()]
            problems = list(self.problems)
        out = {inf.kind: inf.last_error for inf in informers if inf.last_error}
        if problems:
            out["templateconfig.spec"] = "; ".join(problems)
        return out

    def health_error(self) -> str | None:
        """One line for /healthz (components.resource-watcher.error), None when healthy."""
        errs = self.errors()
        return "; ".join(f"{k}: {v}" for k, v in sorted(errs.items())) or None

    def snapshot(self) -> Snapshot:
        with self._lock:
            informers = dict(self._informers)
        objects = {kind: inf.store.objects() for kind, inf in sorted(informers.items())}
        versions = {kind: inf.store.resource_version for kind, inf in sorted(informers.items())}
        return Snapshot(
            template_config=self.template_config,
            objects=MappingProxyType(objects),
            resource_versions=MappingProxyType(versions),
        )

    def haproxy_pods(self) -> tuple[DiscoveredPod, ...]:
        with self._lock:
            inf = self._informers.get(HAPROXY_PODS)
        return discovered_set(inf.store.list()) if inf is not None else ()

    def replay(self) -> None:
        """Bootstrap replay for a new leader: publish the current discovered set to discovery
        subscribers (even if unchanged) and a REPLAY change event (an immediate render
        trigger for the reconciler)."""
        with self._discovery_lock:
            pods = self.haproxy_pods()
            self._discovered = pods
            self._publish_discovery(pods)
        self._publish(ChangeEvent(TEMPLATE, REPLAY, None))

    # -- internals ------------------------------------------------------------------------

    def _on_template_event(self, kind: str, etype: str, obj: dict | None) -> None:
        pods_changed = False
        with self._lock:
            if self._started:
                pods_changed = self._reconfigure(self.template_config)
        if pods_changed:
            self._update_discovery()
        if etype == MODIFIED and obj is not None:
            # Status writes (the leader records lastRenderedAt, conditions...) must not look
            # like a template change, or every render would trigger the next one.
            fingerprint = template_fingerprint(obj)
            with self._lock:
                unchanged, self._template_seen = self._template_seen == fingerprint, fingerprint
            if unchanged:
                return
        elif obj is not None:
            with self._lock:
                self._template_seen = template_fingerprint(obj)
        self._publish(ChangeEvent(kind, etype, obj))

    def _reconfigure(self, template: Mapping | None) -> bool:
        """Start/stop informers to match the template (called with self._lock held). Returns
        whether the HAProxy pod watch went away (the caller then republishes discovery outside
        the lock: discovery takes _discovery_lock before _lock)."""
        desired, problems = desired_resources(template, self.namespace, self.watch_namespace)
        if problems != self.problems:
            for problem in problems:
                log.error("template config: %s", problem)
        self.problems = problems
        changed_pods = False
        for kind, inf in list(self._informers.items()):
            if desired.get(kind) != inf.resource:
                log.info("stopping watch %s (%s)", kind, inf.resource)
                # Do not join here (we are on the template's informer thread): signal, and
                # join in stop(). Its late events are dropped by the identity check below.
                inf.signal_stop()
                self._retired.append(inf)
                del self._informers[kind]
                changed_pods |= kind == HAPROXY_PODS
        self._retired = [inf for inf in self._retired if inf.alive]
        for kind, ref in desired.items():
            if kind in self._informers:
                continue
            log.info("starting watch %s (%s)", kind, ref)
            inf = Informer(
                self._workload,
                ref,
                indexers={"namespace": index_by_namespace, **INDEXERS.get(kind, {})},
                config=self.config,
            )
            inf.add_handler(self._make_handler(inf))
            self._informers[kind] = inf
            inf.start()
        return changed_pods

    def _make_handler(self, inf: Informer) -> Callable[[str, str, dict | None], None]:
        def handle(kind: str, etype: str, obj: dict | None) -> None:
            with self._lock:
                if self._informers.get(kind) is not inf:
                    return  # a retired watch: its cache is no longer part of the view
            if kind == HAPROXY_PODS:
                self._update_discovery()
            self._publish(ChangeEvent(kind, etype, obj))

        return handle

    def _update_discovery(self) -> None:
        with self._discovery_lock:
            pods = self.haproxy_pods()
            if pods == self._discovered:
                return
            self._discovered = pods
            self._publish_discovery(pods)

    def _publish_discovery(self, pods: tuple[DiscoveredPod, ...]) -> None:
        for handler in self._discovery_handlers:
            try:
                handler(pods)
            except Exception:
                log.exception("discovery handler %r failed", handler)

    def _publish(self, event: ChangeEvent) -> None:
        for handler in self._handlers:
            try:
                handler(event)
            except Exception:
                log.exception("change handler %r failed", handler)


__all__ = [
    "BACKEND_PODS",
    "HAPROXY_PODS",
    "REPLAY",
    "SYNCED",
    "TEMPLATE",
    "ChangeEvent",
    "Snapshot",
    "WatchCaches",
    "desired_resources",
]

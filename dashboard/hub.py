"""Which hub is Active, for the Hub page: the resolver's reads, bounded and briefly cached.

The page asks every hub cluster in HAPTIC_HUB_KUBECONFIGS (controller.hub.resolver). Each
read is bounded by READ_TIMEOUT and all run in parallel, so a page costs at most about one
timeout; the answer is cached for CACHE_SECONDS so reloading the page does not multiply the
reads on the API servers. A kubeconfig that cannot be loaded becomes an error row, never an
exception: the other endpoints are still read and resolved.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.core.cache import cache

from controller.hub.resolver import EndpointObservation, Resolution, resolve_kubeconfigs

READ_TIMEOUT = 2.0  # seconds, per endpoint read; the reads run in parallel
CACHE_SECONDS = 5
CACHE_PREFIX = "dashboard:hub-resolution:"


@dataclass(frozen=True)
class EndpointRow:
    """One configured hub endpoint as the page shows it."""

    kubeconfig: str
    observation: EndpointObservation
    is_active: bool = False

    @property
    def declaration(self) -> dict[str, Any]:
        return dict(self.observation.declaration or {})


@dataclass(frozen=True)
class ActiveHub:
    """A resolution plus what the page needs around it (which kubeconfig, when read)."""

    resolution: Resolution
    rows: tuple[EndpointRow, ...] = ()
    checked_at: datetime = field(default_factory=lambda: datetime.now(UTC))


def resolve_hubs(
    kubeconfigs: Sequence[str],
    identities: Sequence[str] | None = None,
    *,
    namespace: str,
    template_name: str,
    timeout: float = READ_TIMEOUT,
) -> ActiveHub:
    """Read status.activeController from every kubeconfig's cluster and resolve the Active;
    one row per kubeconfig, in configuration order."""
    paths = list(kubeconfigs)
    # settings.HAPTIC_HUB_IDENTITIES is None unless it pairs with every kubeconfig.
    resolution = resolve_kubeconfigs(
        paths, identities, namespace=namespace, template_name=template_name, timeout=timeout
    )
    rows = tuple(
        EndpointRow(
            kubeconfig=path,
            observation=obs,
            is_active=bool(resolution.active_url) and obs.url == resolution.active_url,
        )
        for path, obs in zip(paths, resolution.observations, strict=True)
    )
    return ActiveHub(resolution=resolution, rows=rows)


def _cache_key(kubeconfigs: Sequence[str], identities: Sequence[str] | None, *rest: Any) -> str:
    # Keyed by the configuration, so a changed setting is never answered from the old one.
    raw = json.dumps([list(kubeconfigs), list(identities or []), *rest])
    return CACHE_PREFIX + hashlib.sha256(raw.encode()).hexdigest()[:32]


def active_hub() -> ActiveHub | None:
    """The cached resolution for the configured hubs; None when none are configured."""
    kubeconfigs = list(settings.HAPTIC_HUB_KUBECONFIGS or [])
    if not kubeconfigs:
        return None
    identities = settings.HAPTIC_HUB_IDENTITIES
    namespace, template_name = settings.HAPTIC_NAMESPACE, settings.HAPTIC_TEMPLATE_CONFIG
    key = _cache_key(kubeconfigs, identities, namespace, template_name)
    cached = cache.get(key)
    if isinstance(cached, ActiveHub):
        return cached
    # Errors are cached too: an unreachable server must not cost every reload a timeout.
    result = resolve_hubs(kubeconfigs, identities, namespace=namespace, template_name=template_name)
    cache.set(key, result, CACHE_SECONDS)
    return result

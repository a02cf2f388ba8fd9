"""Prometheus metrics of the watch caches (default registry, served on /metrics)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

WATCH_EVENTS = Counter(
    "haptic_watch_events_total", "Watch events accepted into a cache.", ["kind", "type"]
)
WATCH_LISTS = Counter("haptic_watch_lists_total", "Full lists (initial and relists).", ["kind"])
WATCH_GONE = Counter(
    "haptic_watch_gone_total", "Watches that ended with 410 Gone and forced a relist.", ["kind"]
)
WATCH_ERRORS = Counter(
    "haptic_watch_errors_total", "Failed list/watch requests (retried with backoff).", ["kind"]
)
CACHE_OBJECTS = Gauge("haptic_watch_cache_objects", "Objects held in a cache.", ["kind"])
CACHE_SYNCED = Gauge("haptic_watch_cache_synced", "1 once a cache completed its list.", ["kind"])

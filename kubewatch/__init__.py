"""List + watch of Kubernetes collections: one Reflector, its Sink interface, one backoff and
one NDJSON line reader, shared by the controller, the checkpoints mirror and localcluster's
node (which must stay importable without the controller). See docs/watch.md."""

from kubewatch.backoff import Backoff
from kubewatch.ndjson import lines
from kubewatch.reflector import (
    ApiStatusError,
    Gone,
    Reflector,
    ReflectorConfig,
    Sink,
    status_error,
)

__all__ = [
    "ApiStatusError",
    "Backoff",
    "Gone",
    "Reflector",
    "ReflectorConfig",
    "Sink",
    "lines",
    "status_error",
]

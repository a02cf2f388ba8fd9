"""What haptic reads of a Pod's status, in one place: whether it is Ready.

A pod comes either as the JSON the watch delivers (a dict) or as the kubernetes client's
model (`V1Pod`, attributes): the controller's discovery, the local node, `make run`, the
operator commands and the tests all ask the same question of one or the other.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _field(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)


def pod_ready(pod: Any) -> bool:
    """Its Ready condition is True (the first Ready condition counts, as the kubelet
    writes one)."""
    for condition in _field(_field(pod, "status") or {}, "conditions") or []:
        if _field(condition, "type") == "Ready":
            return _field(condition, "status") == "True"
    return False

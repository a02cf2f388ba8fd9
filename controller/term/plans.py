"""Outputs by plan ID (all replicas keep one; each term's components read it)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from controller.render import RenderOutput


class PlanMemory:
    """Outputs by plan id, newest last, bounded: how the deployer knows a pod's current plan
    and computes runtime operations instead of reloading."""

    def __init__(self, limit: int = 16) -> None:
        self._outputs: OrderedDict[str, RenderOutput] = OrderedDict()
        self._limit = limit
        self._lock = threading.Lock()

    def remember(self, output: RenderOutput) -> None:
        with self._lock:
            self._outputs[output.plan_id] = output
            self._outputs.move_to_end(output.plan_id)
            while len(self._outputs) > self._limit:
                self._outputs.popitem(last=False)

    def get(self, plan_id: str) -> RenderOutput | None:
        with self._lock:
            return self._outputs.get(plan_id)

    def plans(self) -> dict[str, Mapping[str, Any]]:
        with self._lock:
            return {pid: out.plan for pid, out in self._outputs.items()}

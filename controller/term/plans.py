"""Outputs by plan ID (all replicas keep one; each term's components read it)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from controller.render import RenderOutput


class PlanMemory:
    """Outputs by plan id, newest last, bounded: how the deployer knows a pod's current plan
    and computes runtime operations instead of reloading.

    Outputs the dispatcher sent to pods (`dispatched`) are the plans pods run; they are kept
    over outputs that were superseded before any dispatch. An EndpointSlice burst makes
    dozens of incremental outputs a second (docs/design/incremental.md): evicting in plain
    age order lost the plan pods ran, and each pod got a reload ("current plan unknown")."""

    def __init__(self, limit: int = 16, dispatched_limit: int = 8) -> None:
        self._outputs: OrderedDict[str, RenderOutput] = OrderedDict()
        self._dispatched: OrderedDict[str, None] = OrderedDict()
        self._limit = limit
        self._dispatched_limit = dispatched_limit
        self._lock = threading.Lock()

    def remember(self, output: RenderOutput) -> None:
        with self._lock:
            self._outputs[output.plan_id] = output
            self._outputs.move_to_end(output.plan_id)
            self._trim()

    def dispatched(self, plan_id: str) -> None:
        """`plan_id` goes to pods now: keep it (and the few dispatched before it)."""
        with self._lock:
            self._dispatched[plan_id] = None
            self._dispatched.move_to_end(plan_id)
            while len(self._dispatched) > self._dispatched_limit:
                self._dispatched.popitem(last=False)
            self._trim()

    def _trim(self) -> None:
        while len(self._outputs) > self._limit:
            victim = next((p for p in self._outputs if p not in self._dispatched), None)
            self._outputs.pop(victim if victim is not None else next(iter(self._outputs)))

    def get(self, plan_id: str) -> RenderOutput | None:
        with self._lock:
            return self._outputs.get(plan_id)

    def plans(self) -> dict[str, Mapping[str, Any]]:
        with self._lock:
            return {pid: out.plan for pid, out in self._outputs.items()}

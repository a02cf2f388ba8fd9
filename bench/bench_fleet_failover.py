"""Cross-cluster failover of whole control planes onto one shared fleet.

Each run starts the topology of tests/hub/planes.py (three local API servers, the Active's
and the Standby's controller as real Celery workers, two HAProxy pods in the workload
cluster), waits until the Active serves and the Standby leads its own cluster fenced, then
SIGKILLs the Active's controller and records, as seen from outside:
- death_to_promotion: SIGKILL until the Standby's hub holds its hub Lease;
- promotion_to_fleet_deploy: promotion until every HAProxy pod's agent last applied a plan
  from the promoted controller (its new term, above the old Active's epoch);
- promotion_to_change_served: an Ingress created at promotion until every HAProxy pod
  serves it (render, reload and the promoted side's first real change).
"""

from __future__ import annotations

import signal
import time
from typing import Any

from bench.harness import summarize
from devstack.stack import ingress, wait_for
from tests.hub.planes import ACTIVE, BUDGET, STANDBY, start_control_planes

RUNS = 3  # each run builds the whole topology (~15 s) so few runs; the medians are reported


def _one_run(index: int) -> dict[str, float]:
    planes = start_control_planes(f"bench-fleet-failover-{index}")
    fleet, b = planes.fleet, planes.b
    try:
        wait_for(lambda: fleet.serves("before.example", "echo-"), 90, what="Active serves")
        wait_for(lambda: planes.applied_holders() == {ACTIVE}, 30, what="Active deployed")
        wait_for(lambda: planes.holder(b, "haptic-leader") == STANDBY, 30, what="B leads")
        wait_for(lambda: planes.holder(planes.a, "haptic-hub") == ACTIVE, 10, what="A's hub")
        time.sleep(1.0)  # a few Standby polls: armed
        planes.active.signal(signal.SIGKILL)
        killed = time.monotonic()
        wait_for(lambda: planes.holder(b, "haptic-hub") == STANDBY, 30, 0.01, what="promotion")
        promoted = time.monotonic()
        fleet.apply([ingress("after", "after.example", "echo")])
        deployed = served = None
        deadline = promoted + 60
        while (deployed is None or served is None) and time.monotonic() < deadline:
            if deployed is None and planes.applied_holders() == {STANDBY}:
                deployed = time.monotonic()
            if served is None and fleet.serves("after.example", "echo-"):
                served = time.monotonic()
            time.sleep(0.01)
        if deployed is None or served is None:
            raise RuntimeError("the promoted controller did not reach the fleet in 60 s")
        return {
            "death": (promoted - killed) * 1000,
            "deploy": (deployed - promoted) * 1000,
            "served": (served - promoted) * 1000,
        }
    finally:
        planes.stop()


def run() -> list[dict[str, Any]]:
    samples = [_one_run(i) for i in range(RUNS)]
    death = summarize([s["death"] for s in samples])
    limit = BUDGET * 1000
    return [
        {
            "metric": "fleet_failover_death_to_promotion",
            **death,
            "target": f"max <= lease + padding + poll + 1 s = {limit:.0f} ms",
            "meets_target": death["max_ms"] <= limit,
        },
        {
            "metric": "fleet_failover_promotion_to_fleet_deploy",
            **summarize([s["deploy"] for s in samples]),
            "target": "recorded",
        },
        {
            "metric": "fleet_failover_promotion_to_change_served",
            **summarize([s["served"] for s in samples]),
            "target": "recorded",
        },
    ]

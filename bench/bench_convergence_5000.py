"""bench_convergence at 5,000 Ingresses (issue 19): the same stack and measures as
bench/bench_convergence.py with 5,000 Ingresses, Services and EndpointSlices, fewer samples
(setting the stack up takes most of the run), no burnt core, and the controller RSS target.

Targets: endpoint change median <= 60 ms, p95 <= 150 ms; leader CPU <= 15 ms per endpoint
change; new Ingress p95 <= 2 s; the leader's RSS <= 250 MiB.
"""

from __future__ import annotations

import os
from typing import Any

from bench.bench_convergence import Scenario, measure

SCENARIO = Scenario(
    ingresses=5000,
    endpoint_changes=int(os.environ.get("BENCH_CONVERGENCE_5000_CHANGES", "20")),
    burn_changes=0,
    new_ingresses=int(os.environ.get("BENCH_CONVERGENCE_5000_INGRESSES", "6")),
    endpoint_median_ms=60.0,
    endpoint_p95_ms=150.0,
    burn_median_ms=0.0,
    cpu_ms=15.0,
    ingress_p95_ms=2000.0,
    rss_mib=250.0,
)


def run() -> list[dict[str, Any]]:
    return measure(SCENARIO)

"""bench_convergence at 5,000 Ingresses (issue 19): the same stack and measures as
bench/bench_convergence.py with 5,000 Ingresses, Services and EndpointSlices, fewer samples
(setting the stack up takes most of the run), no burnt core, and the controller RSS target.

Targets: endpoint change median <= 60 ms, p95 <= 150 ms; leader CPU <= 15 ms per endpoint
change; new Ingress p95 <= 2 s; the leader's RSS <= 250 MiB.

serverSlots is 3 here, not the default 10: with 10, 5,000 backends are 50,000 server lines
and HAProxy asks for about 50,300 file descriptors at start ("Cannot raise FD limit to
50265, limit is 20000" from every pod of the local node; `haproxy -c` does not check it).
With 3 slots and 3 endpoints per Service, 15,000 servers fit the pods' limit.
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
    server_slots=3,
)


def run() -> list[dict[str, Any]]:
    return measure(SCENARIO)

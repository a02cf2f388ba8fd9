"""Cross-cluster failover timings on two local clusters with short timings.

Each run seeds the Active's cluster, starts an Active and a Standby hub, waits until the
Standby is armed and mirroring, then kills the Active (alternately: its controller stops
renewing, or its API server is black-holed) and records:
- death_to_promotion: the Active's death until the Standby's write fence opened;
- detection_to_promotion: the candidate tick until the fence opened (guards + sequence);
- promotion_to_published: the start of promotion until an outside reader of the Standby's
  cluster sees status.activeController naming the promoted hub.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubernetes import client

from bench.harness import summarize
from controller.hub.kube import TEMPLATE, Kube
from controller.kubeclient import bounded_copy
from devstack.stack import wait_for
from localcluster.testing import ApiServer, api_servers
from tests.hub.scenario import budget, seed_active_cluster, start_pair

RUNS = 8  # alternating: the Active's controller killed, its API server black-holed


def _one_run(a: ApiServer, b: ApiServer, blackhole: bool, tmp: Path) -> dict[str, float]:
    ns = f"bench-{uuid.uuid4().hex[:8]}"
    a_client, b_client = bounded_copy(a.api_client()), bounded_copy(b.api_client())
    reader = Kube(bounded_copy(b.api_client()), 2.0)
    for c in (a_client, b_client):
        client.CoreV1Api(c).create_namespace(
            client.V1Namespace(metadata=client.V1ObjectMeta(name=ns))
        )
    seed_active_cluster(Kube(a_client, 5.0), ns)
    pair = start_pair(a, b, a_client, b_client, ns, tmp)
    try:
        standby = pair.standby
        wait_for(lambda: standby.tracker.snapshot().retained is not None)
        wait_for(lambda: standby.mirror.synced and standby.mirror.passes > 0)
        wait_for(pair.active.elector.is_leader)
        died = datetime.now(UTC)
        if blackhole:
            a.add_fault(path_regex="", blackhole=True)
        else:
            pair.active.stop(release=False)

        def published() -> bool:
            status = reader.get(TEMPLATE.item(ns, "haptic")).get("status") or {}
            return (status.get("activeController") or {}).get("activeIdentity") == "hub-b"

        wait_for(lambda: standby.promoter.result is not None, timeout=60, interval=0.005)
        wait_for(published, timeout=30, interval=0.005)
        seen = datetime.now(UTC)
        result = standby.promoter.result
        return {
            "death": (result.promoted_at - died).total_seconds() * 1000,
            "detection": (result.promoted_at - result.started_at).total_seconds() * 1000,
            "published": (seen - result.started_at).total_seconds() * 1000,
            "blackhole": float(blackhole),
            "budget": budget(standby.config) * 1000,
            "grace": standby.config.promotion_grace_period * 1000,
        }
    finally:
        a.clear_faults()
        pair.stop()
        for c in (a_client, b_client, reader.api_client):
            c.close()


def run() -> list[dict[str, Any]]:
    # The hub logs every failed read of a dead Active; the table is what matters here.
    hub_log = logging.getLogger("controller.hub")
    level = hub_log.level
    hub_log.setLevel(logging.ERROR)
    try:
        return _run()
    finally:
        hub_log.setLevel(level)


def _run() -> list[dict[str, Any]]:
    tmp = Path(tempfile.mkdtemp(prefix="bench-hub-"))
    samples: list[dict[str, float]] = []
    try:
        with api_servers(2) as (a, b):
            for i in range(RUNS):
                samples.append(_one_run(a, b, blackhole=bool(i % 2), tmp=tmp))
                time.sleep(0.2)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    limit = samples[0]["budget"]
    grace = samples[0]["grace"]
    death = summarize([s["death"] for s in samples])
    by_mode = {
        mode: summarize([s["death"] for s in samples if s["blackhole"] == flag])
        for mode, flag in (("killed_controller", 0.0), ("blackholed_api_server", 1.0))
    }
    detection = summarize([s["detection"] for s in samples])
    published = summarize([s["published"] for s in samples])
    return [
        {
            "metric": "hub_death_to_promotion",
            **death,
            "target": f"max <= lease + padding + poll + 1 s = {limit:.0f} ms",
            "meets_target": death["max_ms"] <= limit,
        },
        *(
            {
                "metric": f"hub_death_to_promotion_{mode}",
                **stats,
                "target": f"max <= {limit:.0f} ms",
                "meets_target": stats["max_ms"] <= limit,
            }
            for mode, stats in by_mode.items()
        ),
        {
            "metric": "hub_detection_to_promotion",
            **detection,
            "target": f"p95 < grace period ({grace:.0f} ms)",
            "meets_target": detection["p95_ms"] < grace,
        },
        {
            "metric": "hub_promotion_to_published",
            **published,
            "target": f"p95 < grace period ({grace:.0f} ms)",
            "meets_target": published["p95_ms"] < grace,
        },
    ]

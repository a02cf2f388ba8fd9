"""End to end on two local clusters: the Active's (A) and the Standby's (B).

Real API servers over HTTP, real hub electors, publisher, mirror, guards and promotion.
Timings are short (lease 2 s, padding 0.5 s, poll 0.5 s, dial timeout 0.3 s).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import UTC, datetime

import pytest
from kubernetes import client

from controller.hub.kube import CFG, MAP, SECRET, TEMPLATE
from controller.hub.leases import read_lease
from controller.hub.mirror import Mirror
from controller.hub.mirror_rules import MIRROR_LABEL, SOURCE_RV_ANNOTATION
from controller.hub.promotion import EVENT_PROMOTED
from controller.hub.resolver import resolve
from devstack.stack import wait_for
from localcluster.testing import test_cluster_kind as cluster_kind  # not a test
from tests.hub.conftest import REPO_ROOT
from tests.hub.scenario import (
    ACTIVE_EPOCH,
    budget,
    map_file,
    secret,
    seed_active_cluster,
    start_pair,
)

pytestmark = pytest.mark.e2e


@pytest.fixture
def pair(clusters, ns, tmp_path):
    a, b = clusters
    seed_active_cluster(a.kube, ns)
    p = start_pair(a.api, b.api, a.client, b.client, ns, tmp_path)
    try:
        yield p
    finally:
        p.stop()


def names(kube, path: str) -> set[str]:
    return {o["metadata"]["name"] for o in kube.list(path).get("items") or []}


def test_baseline_mirror_sync(clusters, ns, tmp_path) -> None:
    a, b = clusters
    seed_active_cluster(a.kube, ns)
    # An unlabelled object that already lives in the Standby's cluster: never overwritten.
    local_tls = b.kube.create(SECRET.collection(ns), secret("tls-1", b"standby's own"))
    # A labelled leftover whose source is gone: pruned once the remote cache has synced.
    stale = {
        **secret("leftover"),
        "metadata": {"name": "leftover", "labels": {MIRROR_LABEL: "active"}},
    }
    b.kube.create(SECRET.collection(ns), stale)
    p = start_pair(a.api, b.api, a.client, b.client, ns, tmp_path)
    try:
        mirror = p.standby.mirror
        wait_for(lambda: "cp-1" in names(b.kube, CFG.collection(ns)) and
                 "map-1" in names(b.kube, MAP.collection(ns)) and
                 "leftover" not in names(b.kube, SECRET.collection(ns)))  # fmt: skip
        assert names(b.kube, CFG.collection(ns)) == {"cp-1"}  # not the ordinary publication
        assert names(b.kube, SECRET.collection(ns)) >= {"agent-token", "tls-1"}
        assert "unrelated" not in names(b.kube, SECRET.collection(ns))
        tls = b.kube.get(SECRET.item(ns, "tls-1"))
        assert tls["data"] == local_tls["data"]
        assert tls["metadata"]["resourceVersion"] == local_tls["metadata"]["resourceVersion"]
        # The copies are labelled, carry the source resourceVersion, and the child's owner
        # is re-pointed at the local checkpoint (so local GC keeps it).
        cp_a = a.kube.get(CFG.item(ns, "cp-1"))
        cp_b = b.kube.get(CFG.item(ns, "cp-1"))
        assert cp_b["metadata"]["labels"][MIRROR_LABEL] == "active"
        assert (
            cp_b["metadata"]["annotations"][SOURCE_RV_ANNOTATION]
            == cp_a["metadata"]["resourceVersion"]
        )
        map_b = b.kube.get(MAP.item(ns, "map-1"))
        assert map_b["metadata"]["ownerReferences"][0]["uid"] == cp_b["metadata"]["uid"]
        # The template's status is mirrored: the Standby's copy names the Active.
        wait_for(lambda: (b.kube.get(TEMPLATE.item(ns, "haptic")).get("status") or {})
                 .get("activeController", {}).get("activeIdentity") == "hub-a")  # fmt: skip

        # Before any failover the resolver already names the Active (the Standby's copy
        # names the Active, not itself).
        resolution = resolve([(a.client, None), (b.client, None)], namespace=ns,
                             template_name="haptic", timeout=2)  # fmt: skip
        assert (resolution.active_url, resolution.active_identity) == (a.url, "hub-a")

        # Update at the Active shows at the Standby.
        tpl = a.kube.get(TEMPLATE.item(ns, "haptic"))
        tpl["spec"]["podSelector"]["matchLabels"]["tier"] = "edge"
        updated = a.kube.replace(TEMPLATE.item(ns, "haptic"), tpl)
        wait_for(lambda: b.kube.get(TEMPLATE.item(ns, "haptic"))["metadata"]["annotations"]
                 .get(SOURCE_RV_ANNOTATION) == updated["metadata"]["resourceVersion"])  # fmt: skip
        assert b.kube.get(TEMPLATE.item(ns, "haptic"))["spec"]["podSelector"]["matchLabels"] == {
            "app": "haproxy", "tier": "edge",
        }  # fmt: skip
        # Create at the Active shows at the Standby.
        cp2 = a.kube.create(CFG.collection(ns), {
            **cp_a, "metadata": {"name": "cp-2", "labels": cp_a["metadata"]["labels"]},
        })  # fmt: skip
        a.kube.create(MAP.collection(ns), map_file("map-2", cp2))
        wait_for(lambda: "map-2" in names(b.kube, MAP.collection(ns)))
        # Delete at the Active: the copy and its child go.
        a.kube.delete(
            CFG.item(ns, "cp-1"), cp_a["metadata"]["uid"], cp_a["metadata"]["resourceVersion"]
        )
        wait_for(lambda: "cp-1" not in names(b.kube, CFG.collection(ns)) and
                 "map-1" not in names(b.kube, MAP.collection(ns)))  # fmt: skip
        assert "cp-2" in names(b.kube, CFG.collection(ns))
        # The unlabelled local Secret survived every pass, prune included.
        passes = mirror.passes
        wait_for(lambda: mirror.passes >= passes + 2)
        assert b.kube.get(SECRET.item(ns, "tls-1"))["data"] == local_tls["data"]
        assert not p.standby.fence.is_open()
        # stop() returns only once every mirror thread has ended.
        assert mirror.stop(5.0) and not mirror.running
        a.kube.create(MAP.collection(ns), map_file("map-3", cp2))
        time.sleep(0.5)
        assert "map-3" not in names(b.kube, MAP.collection(ns))  # really stopped
        # A resumed mirror (what an aborted promotion does) catches up.
        mirror.start()
        wait_for(lambda: "map-3" in names(b.kube, MAP.collection(ns)))
    finally:
        p.stop()


def test_the_mirror_carries_the_status_haptic_writes_and_not_a_childs(clusters, ns) -> None:
    """The template config's status travels; a child's (which nothing of haptic writes)
    does not, so deploy/rbac-standby.yaml needs no grant for it
    (tests/real/test_standby_mirror.py checks the grants on a real API server)."""
    a, b = clusters
    seed_active_cluster(a.kube, ns)
    child = a.kube.get(MAP.item(ns, "map-1"))
    a.kube.replace(
        MAP.item(ns, "map-1") + "/status", {**child, "status": {"observedGeneration": 1}}
    )
    template = a.kube.get(TEMPLATE.item(ns, "haptic"))
    body = {**template, "status": {"activeController": {"activeIdentity": "hub-a"}}}
    status = a.kube.replace(TEMPLATE.item(ns, "haptic") + "/status", body)["status"]
    mirror = Mirror(a.kube, b.kube, remote_namespace=ns, local_namespace=ns,
                    template_name="haptic", source="active", prune_interval=0.5,
                    watch_read_timeout=2.0)  # fmt: skip
    mirror.start()
    try:
        wait_for(lambda: "map-1" in names(b.kube, MAP.collection(ns)) and
                 b.kube.get(TEMPLATE.item(ns, "haptic")).get("status") == status)  # fmt: skip
        passes = mirror.passes
        wait_for(lambda: mirror.passes >= passes + 2)
        assert not b.kube.get(MAP.item(ns, "map-1")).get("status")
    finally:
        assert mirror.stop(5.0)


def test_never_armed_never_promotes(clusters, ns, tmp_path) -> None:
    a, b = clusters
    seed_active_cluster(a.kube, ns)
    # A mistyped namespace: every read of the Active's Lease is NotFound, so the Standby
    # never proves the Active readable and must never promote, however long it waits.
    p = start_pair(a.api, b.api, a.client, b.client, ns, tmp_path, remote_namespace="typo")
    try:
        p.active.stop(release=False)  # nothing renews anything anywhere
        polls = p.standby.watcher.polls
        wait_for(lambda: p.standby.watcher.polls >= polls + 8, timeout=30)
        time.sleep(budget(p.standby.config))
        assert p.standby.tracker.snapshot().retained is None
        assert not p.standby.promoted and not p.standby.fence.is_open()
        assert p.metrics.failovers() == 0
    finally:
        p.stop()


def _armed(pair) -> None:
    wait_for(lambda: pair.standby.tracker.snapshot().retained is not None)
    wait_for(lambda: pair.standby.tracker.snapshot().last_epoch == ACTIVE_EPOCH)
    wait_for(lambda: pair.standby.mirror.synced and pair.standby.mirror.passes > 0)


def test_transient_blip_shorter_than_budget_does_not_promote(clusters, pair) -> None:
    a, _ = clusters
    _armed(pair)
    wait_for(pair.active.elector.is_leader)
    config = pair.standby.config
    # A blip shorter than the Active's renew deadline: it keeps its lease and renews after.
    a.api.add_fault(path_regex="", blackhole=True)
    time.sleep(config.renew_deadline * 0.6)
    a.api.clear_faults()
    blip_end = time.monotonic()
    wait_for(lambda: time.monotonic() - blip_end > budget(config) + 1.0, timeout=30)
    assert pair.active.elector.is_leader()
    assert not pair.standby.promoted
    assert not pair.standby.fence.is_open()
    assert pair.metrics.failovers() == 0
    assert pair.kicks == []


def test_status_reports_a_fenced_armed_standby(pair) -> None:
    _armed(pair)
    status = pair.standby.status()
    assert (status.mode, status.identity) == ("standby", "hub-b")
    assert status.armed and not status.fence_open and not status.leading
    assert status.active_epoch_seen == ACTIVE_EPOCH
    assert status.mirror_running and status.mirror_synced and status.mirror_passes > 0
    assert not status.promoted and status.promoted_epoch is None
    active = pair.active.status()
    assert active.mode == "active" and active.fence_open and not active.armed
    wait_for(lambda: pair.active.status().leading)


def _assert_promoted_in_budget(pair, killed_at: datetime, last_renew: datetime) -> None:
    config = pair.standby.config
    wait_for(lambda: pair.standby.promoted, timeout=budget(config) + 15)
    result = pair.standby.promoter.result
    took = (result.promoted_at - killed_at).total_seconds()
    since_renew = (result.promoted_at - last_renew).total_seconds()
    print(f"promoted {took:.2f}s after the Active died (budget {budget(config):.2f}s)")
    assert took <= budget(config), f"promotion took {took:.2f}s"
    # Never early: the retained proof of life must really have aged out first.
    assert since_renew >= config.lease_duration + config.padding_seconds
    assert pair.standby.fence.is_open()
    assert pair.kicks == [True]  # kicked once, after the fence opened
    assert pair.metrics.failovers() == 1
    # The fencing epoch: above the Active's last, recorded where the elector reads it.
    assert result.epoch == ACTIVE_EPOCH + 1
    assert read_lease(pair.b_client, pair.ns, "haptic-leader", 2).epoch == ACTIVE_EPOCH + 1
    assert pair.standby.promoted_epoch > ACTIVE_EPOCH
    status = pair.standby.status()
    assert status.promoted and status.fence_open and not status.mirror_running
    assert status.promoted_epoch == ACTIVE_EPOCH + 1
    # The mirror really stopped, the hub Lease is ours and the event is beside it.
    assert not pair.standby.mirror.running
    assert read_lease(pair.b_client, pair.ns, "haptic-hub", 2).holder == "hub-b"
    events = client.CoreV1Api(pair.b_client).list_namespaced_event(pair.ns).items
    promoted = [e for e in events if e.reason == EVENT_PROMOTED]
    assert promoted and promoted[0].involved_object.kind == "Lease"
    assert promoted[0].involved_object.name == "haptic-hub"


def test_killed_active_controller_promotes_within_budget(clusters, pair) -> None:
    a, b = clusters
    _armed(pair)
    wait_for(lambda: (a.kube.get(TEMPLATE.item(pair.ns, "haptic")).get("status") or {})
             .get("activeController"))  # fmt: skip
    killed_at = datetime.now(UTC)
    pair.active.stop(release=False)  # the process dies: no release, the Lease just ages
    last_renew = pair.active.elector.last_renew_wall
    _assert_promoted_in_budget(pair, killed_at, last_renew)
    # The promoted side declares itself; the resolver names it.
    wait_for(lambda: (b.kube.get(TEMPLATE.item(pair.ns, "haptic")).get("status") or {})
             .get("activeController", {}).get("activeIdentity") == "hub-b")  # fmt: skip
    resolution = resolve([(a.client, None), (b.client, None)], namespace=pair.ns,
                         template_name="haptic", timeout=2)  # fmt: skip
    assert resolution.active_url == b.url and resolution.active_identity == "hub-b"


def test_blackholed_active_api_server_promotes_within_budget(clusters, pair) -> None:
    if cluster_kind() == "real":
        # A timed budget: through the real tier's fault proxy on the loaded 2-core CI machine
        # it measured 4.22 s against 4.0 s (2026-12-02). The budget is asserted on the local
        # tier and measured in bench_hub; the real tier runs the other fault tests.
        pytest.skip("the promotion-time budget is asserted on the local tier only")
    a, b = clusters
    _armed(pair)
    wait_for(pair.active.elector.is_leader)
    killed_at = datetime.now(UTC)
    a.api.add_fault(path_regex="", blackhole=True)
    last_renew = pair.active.elector.last_renew_wall
    _assert_promoted_in_budget(pair, killed_at, last_renew)
    # The Active lost its lease after the renew deadline but did not exit.
    wait_for(lambda: not pair.active.elector.is_leader())
    assert pair.active.elector.running
    # With A unreachable, the resolver trusts B, through the CLI as a worker would.
    out = subprocess.run(
        [sys.executable, "-m", "controller.hub", "resolve", "--kubeconfig", str(a.api.kubeconfig),
         "--kubeconfig", str(b.api.kubeconfig), "--namespace", pair.ns, "--timeout", "1"],
        capture_output=True, text=True, timeout=60, cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [b.url, "hub-b"]
    a.api.clear_faults()


class TestGuardsAbort_DoesNotDisarm:
    """Seed 004 through the API servers: self_unhealthy aborts keep the Standby armed."""

    def test_through_the_api(self, clusters, pair) -> None:
        _a, b = clusters
        _armed(pair)
        # The Standby's own API server fails its Lease reads (5xx) while the Active dies: each
        # candidate tick is refused as self_unhealthy, and nothing is disarmed.
        b.api.add_fault(path_regex="/leases/", status=503)
        pair.active.stop(release=False)
        wait_for(lambda: pair.metrics.aborts("self_unhealthy") >= 2, timeout=30)
        assert not pair.standby.promoted and not pair.standby.fence.is_open()
        assert pair.standby.mirror.running  # the guards run before the mirror is touched
        assert pair.standby.tracker.snapshot().retained is not None
        events = client.CoreV1Api(pair.b_client).list_namespaced_event(pair.ns).items
        assert any(e.reason == "PromotionAborted" and e.type == "Warning" and
                   "self_unhealthy" in e.message for e in events)  # fmt: skip
        # Our API server recovers: the still-armed Standby promotes on a following tick.
        b.api.clear_faults()
        wait_for(lambda: pair.standby.promoted, timeout=30)
        assert pair.standby.fence.is_open()
        assert pair.metrics.failovers() == 1


def test_promoted_controller_elector_starts_above_the_actives_epoch(clusters, pair) -> None:
    """The epoch hand-off through the controller's own elector on the Standby's cluster."""
    from controller.election import ElectionTiming, LeaderElector
    from controller.election.elector import Attempt
    from controller.election.lease_store import KubeLeaseStore

    _, b = clusters
    timing = ElectionTiming(lease_duration=3.0, renew_deadline=2.0, retry_period=0.5)

    def elector() -> LeaderElector:
        store = KubeLeaseStore(b.client, pair.ns, "haptic-leader")
        return LeaderElector(store, "controller-b-0", timing)

    # The Standby's controller replicas hold their own, much lower, epoch while fenced.
    fenced = elector()
    assert fenced.try_acquire_or_renew() is Attempt.ACQUIRED
    assert fenced.term.token.epoch < ACTIVE_EPOCH
    _armed(pair)
    pair.active.stop(release=False)
    wait_for(lambda: pair.standby.promoted, timeout=30)
    # The fenced term cannot be renewed past the claimed floor...
    for _ in range(3):
        assert fenced.try_acquire_or_renew() is not Attempt.RENEWED
    # ...and the next term starts above the Active's last epoch: the agents refuse the old
    # Active's tokens and accept ours.
    promoted = elector()
    assert wait_for(lambda: promoted.try_acquire_or_renew() is Attempt.ACQUIRED, 10)
    assert promoted.term.token.epoch > ACTIVE_EPOCH
    assert promoted.term.token.epoch >= pair.standby.promoted_epoch


def test_fresh_active_publishes_promptly(clusters, ns, tmp_path) -> None:
    """Seed 004's 31-second bug: the first publish pass runs before the hub Lease is held.
    With a one-minute publish interval, only a wait chosen from "this pass was not the
    leader" (one retry period) publishes within seconds."""
    from controller.hub.config import HaMode, HubConfig
    from controller.hub.hub import build_hub
    from tests.hub.scenario import FAST

    a, _ = clusters
    seed_active_cluster(a.kube, ns)
    config = HubConfig(mode=HaMode.ACTIVE, identity="hub-a", namespace=ns, self_endpoint=a.url,
                       self_ca_bundle_path="", **{**FAST, "publish_interval": 60.0})  # fmt: skip
    hub = build_hub(config, a.client)
    hub.start()
    try:
        # Well inside the 60 s interval a slow wait after the first pass would cost.
        wait_for(lambda: (a.kube.get(TEMPLATE.item(ns, "haptic")).get("status") or {})
                 .get("activeController"), timeout=30)  # fmt: skip
        published = a.kube.get(TEMPLATE.item(ns, "haptic"))
        assert published["status"]["activeController"]["activeIdentity"] == "hub-a"
        assert "caBundle" not in published["status"]["activeController"]
    finally:
        hub.stop()

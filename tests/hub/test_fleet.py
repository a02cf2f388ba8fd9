"""After promotion the promoted side deploys to the shared fleet, and the old Active's
epoch is refused by the agents (issue 10's acceptance, on real parts).

Three real processes besides the two local clusters: an agent with a real haproxy (the
shared fleet of one pod), the Active hub and the Standby hub. Applies are sent with the
agents' own client, carrying the fencing token of the controller's own elector term.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from agents.client import AgentClient, AgentConflict
from controller.election import ElectionTiming, LeaderElector
from controller.election.elector import Attempt
from controller.election.lease_store import KubeLeaseStore
from controller.hub.fence import WriteFence
from devstack.stack import wait_for
from tests.agents.helpers import AgentProcess
from tests.hub.scenario import ACTIVE_EPOCH, reload_manifest, seed_active_cluster, start_pair

pytestmark = pytest.mark.e2e


class FenceClosed(Exception):
    """The write fence is shut: a Standby's deployer sends nothing."""


def plan(agent: AgentProcess, text: str, token: dict[str, Any], previous: str | None) -> dict:
    cfg = (
        "global\n    default-path config\n"
        "defaults\n    mode http\n    timeout connect 2s\n    timeout client 10s\n"
        "    timeout server 10s\n"
        f'frontend http\n    bind "${{POD_IP}}:{agent.frontend_port}"\n'
        f"    http-request return status 200 content-type text/plain string {text}\n"
    ).encode()
    return reload_manifest(cfg, token, previous)


def deploy(fence: WriteFence, client: AgentClient, manifest: dict) -> str:
    """What a deployer does: consult the fence, then apply."""
    if not fence.is_open():
        raise FenceClosed
    return client.apply(manifest).plan_id


def served(agent: AgentProcess) -> str:
    return httpx.get(f"http://{agent.ip}:{agent.frontend_port}/", timeout=5).text


def test_promoted_side_deploys_and_agents_refuse_the_old_active(clusters, ns, tmp_path) -> None:
    a, b = clusters
    seed_active_cluster(a.kube, ns)
    agent = AgentProcess(tmp_path / "pod", extra_args=["--min-reload-interval", "0"]).start()
    pair = start_pair(a.api, b.api, a.client, b.client, ns, tmp_path)
    try:
        # The old Active deploys with its term's epoch.
        old_token = {"holder": "controller-a-0", "epoch": ACTIVE_EPOCH, "sequence": 1}
        p1 = plan(agent, "from-active", old_token, None)
        assert deploy(pair.active.fence, agent.client, p1) == p1["plan_id"]
        assert served(agent) == "from-active"

        # The Standby's controller replica leads its own cluster but is fenced: it sends nothing.
        store = KubeLeaseStore(b.client, ns, "haptic-leader")
        timing = ElectionTiming(lease_duration=3.0, renew_deadline=2.0, retry_period=0.5)
        fenced = LeaderElector(store, "controller-b-0", timing)
        assert fenced.try_acquire_or_renew() is Attempt.ACQUIRED
        low = {"holder": "controller-b-0", "epoch": fenced.term.token.epoch, "sequence": 1}
        with pytest.raises(FenceClosed):
            deploy(pair.standby.fence, agent.client, plan(agent, "too-early", low, p1["plan_id"]))

        # The Active dies; the Standby promotes and its controller starts a term above the
        # Active's last epoch.
        wait_for(lambda: pair.standby.tracker.snapshot().last_epoch == ACTIVE_EPOCH)
        pair.active.stop(release=False)
        wait_for(lambda: pair.standby.promoted, timeout=30)
        elector = LeaderElector(KubeLeaseStore(b.client, ns, "haptic-leader"), "controller-b-0",
                                timing)  # fmt: skip
        wait_for(lambda: elector.try_acquire_or_renew() is Attempt.ACQUIRED, timeout=10)
        new_token = {"holder": "controller-b-0", "epoch": elector.term.token.epoch, "sequence": 1}
        assert new_token["epoch"] > ACTIVE_EPOCH
        p2 = plan(agent, "from-promoted", new_token, p1["plan_id"])
        assert deploy(pair.standby.fence, agent.client, p2) == p2["plan_id"]
        assert served(agent) == "from-promoted"

        # The old Active comes back and pushes with its old epoch: refused, nothing written.
        stale = {"holder": "controller-a-0", "epoch": ACTIVE_EPOCH, "sequence": 2}
        with pytest.raises(AgentConflict) as refused:
            agent.client.apply(plan(agent, "split-brain", stale, p2["plan_id"]))
        assert refused.value.status == 409
        assert refused.value.body["reason"] == "stale_epoch"
        assert agent.client.state().applied_plan_id == p2["plan_id"]
        assert served(agent) == "from-promoted"
    finally:
        pair.stop()
        agent.stop()

"""Issue 19, kept agent connections across a term: the dispatcher keeps one connection per
agent and lets a pod's go when the pod leaves the fleet. Through the real parts: a
`LeaderPipeline` in this process, the local API server over HTTP, real agents running real
haproxy, each behind a counting relay (tests/agents/test_deployer_agents.py's `Tap`).
"""

from __future__ import annotations

from controller.deploy.deployer import AgentPool, Deployer
from controller.watch.discovery import DiscoveredPod
from devstack.stack import wait_for
from tests.agents.helpers import TOKEN, free_ip, port_free_on
from tests.agents.test_deployer_agents import Tap
from tests.retained.test_drain import NS, Harness


def test_a_pod_gone_from_the_fleet_takes_its_agent_connection_with_it(harness: Harness) -> None:
    agents = harness.add_agents(2, ["--min-reload-interval", "0"])
    ips = [free_ip() for _ in agents]
    port = port_free_on(ips)
    taps = [Tap(ip, port, (a.ip, a.port)) for ip, a in zip(ips, agents, strict=True)]
    harness.closers += [t.close for t in taps]
    harness.pods = [
        DiscoveredPod(NS, f"haproxy-{i}", f"uid-{i}-{harness.name}", t.ip, False, None)
        for i, t in enumerate(taps)
    ]
    pool = AgentPool(port=port, token=lambda: TOKEN)
    harness.set_leader("replica-a", 1)
    pipeline = harness.pipeline("replica-a", 1, deployer=Deployer(pool))
    harness.start_term(pipeline)
    pipeline.request_render()
    harness.wait_acknowledged(pipeline, agents)
    assert [t.accepted for t in taps] == [1, 1], "premise: one connection to each agent"

    harness.pods = harness.pods[:1]  # haproxy-1 is deleted
    pipeline.pods_changed()
    wait_for(lambda: taps[1].closed == 1, 10, what="the deleted pod's connection closed")
    pipeline.deploy(pipeline.state.last_good, verify=True)  # still its kept connection
    assert (taps[0].accepted, taps[0].closed) == (1, 0)

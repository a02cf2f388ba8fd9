"""A pod whose agent is not listening yet when the term deploys gets the output as soon as
its agent listens (issue 16, found on the real cluster: the HAProxy pods show IPs before
their agents listen). Through the real parts: a `LeaderPipeline` in this process, the local
API server over HTTP, real agents running real haproxy."""

from __future__ import annotations

from contract import PodAction
from devstack.stack import wait_for
from tests.agents.helpers import TOKEN
from tests.retained.test_drain import Harness, RecordingDeployer


def _pod_outcomes(deployer: RecordingDeployer, pod: str) -> list[tuple[int, PodAction, str]]:
    """(call index, action, error) of every deployment that reached for `pod`."""
    return [
        (i, o.action, o.error or "")
        for i, (_, outcomes) in enumerate(list(deployer.calls))
        for o in outcomes
        if o.pod.name == pod
    ]


def test_a_pod_whose_agent_refused_connections_is_deployed_once_it_listens(
    harness: Harness,
) -> None:
    """The term's first deployment finds one agent refusing connections; once it listens,
    the next retry deploys to it (drift prevention, 600 s here, is not what saves it).

    Bug (controller/term/dispatcher.py, Dispatcher.deploy): every deployment marked all
    targets known, failed or not, so the push to new pods never retried a pod whose agent
    refused the scheduler's dispatch, and nothing else did before drift prevention."""
    agents = harness.add_agents(2, ["--min-reload-interval", "0"])
    late = agents[1]
    late.stop()  # its pod is in the fleet, its agent refuses connections
    harness.pods = [harness.pod_for(a, i) for i, a in enumerate(agents)]
    harness.set_leader("replica-a", 1)
    deployer = RecordingDeployer(harness.pool())
    pipeline = harness.pipeline("replica-a", 1, deployer=deployer)
    harness.start_term(pipeline)
    pipeline.request_render()

    wait_for(
        lambda: any(a is PodAction.FAILED for _, a, _ in _pod_outcomes(deployer, "haproxy-1")),
        30,
        what="a deployment that found haproxy-1's agent refusing connections",
    )
    refused = [
        o for _, outcomes in list(deployer.calls) for o in outcomes if o.pod.name == "haproxy-1"
    ]
    assert refused[0].unreachable, refused[0]  # no agent answered: not an error it returned
    late.start()
    late.client = type(late.client)(late.url, TOKEN, timeout=20.0)
    listening_from = len(deployer.calls)

    output = harness.wait_acknowledged(pipeline, agents, timeout=30)
    reached = [
        (i, a) for i, a, _ in _pod_outcomes(deployer, "haproxy-1") if a is not PodAction.FAILED
    ]
    assert reached, "haproxy-1 was never deployed to"
    first_reached = reached[0][0]
    # At most one attempt may have been under way while the agent came up; the next reaches it.
    assert first_reached - listening_from <= 1, _pod_outcomes(deployer, "haproxy-1")
    assert late.client.state().applied_plan_id == output.plan_id

"""ADR-0034's rule through the leader pipeline, real agents and real haproxy: the status
applier (`on_converged`) runs only once every HAProxy pod runs the render. One pod that
does not run it (its agent is down) holds the gate closed for every backend pod."""

from __future__ import annotations

import threading
import time

from controller.render import RenderOutput
from devstack.stack import wait_for
from tests.agents.helpers import TOKEN, AgentProcess
from tests.retained.conftest import api, harness  # noqa: F401 (fixtures)
from tests.retained.test_drain import Harness


def test_the_gate_opens_only_once_every_haproxy_pod_runs_the_render(
    harness: Harness,  # noqa: F811
) -> None:
    agents = harness.add_agents(2)
    harness.pods += [harness.pod_for(a, i) for i, a in enumerate(agents)]
    down = agents[1]
    down.stop()  # its pod stays discovered: the fleet is not converged
    calls: list[tuple[str, list[str | None]]] = []
    lock = threading.Lock()

    def running(agent: AgentProcess) -> str | None:
        try:
            return agent.client.state().applied_plan_id
        except Exception:  # the agent that is down
            return None

    def on_converged(output: RenderOutput) -> None:
        plans = [running(a) for a in agents]
        with lock:
            calls.append((output.plan_id, plans))

    harness.set_leader("replica-a", 1)
    pipeline = harness.pipeline("replica-a", 1, on_converged=on_converged)
    harness.start_term(pipeline)
    pipeline.request_render()
    first = wait_for(lambda: pipeline.state.last_good, 60, what="a render")
    wait_for(
        lambda: agents[0].client.state().applied_plan_id == first.plan_id, 60, what="pod 0 runs it"
    )
    time.sleep(1.5)  # deploy, follow-ups and pushes had their chance
    assert calls == [], "the gate opened while one HAProxy pod does not run the render"

    down.client = type(down.client)(down.url, TOKEN, timeout=20.0)
    down.start()
    harness.hosts.append("b")  # a new render, deployed to both pods
    pipeline.request_render()
    wait_for(lambda: calls, 60, what="the gate opens once both pods run the render")
    with lock:
        for plan, running in calls:
            assert running == [plan, plan], (plan, running)

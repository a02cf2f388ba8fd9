"""The term's coordinator hands every successful render to the `report_warnings` hook
(controller/render/warnings.py: Events, gauge, template status), and a failed render to
none: the pipeline against the local API server, real agents and real haproxy."""

from __future__ import annotations

import threading
import time

from controller.render import RenderOutput
from devstack.stack import wait_for
from tests.retained.test_drain import Harness


def test_each_successful_render_is_reported_and_a_failed_one_is_not(harness: Harness) -> None:
    (agent,) = harness.add_agents(1)
    harness.pods.append(harness.pod_for(agent, 0))
    reported: list[RenderOutput] = []
    lock = threading.Lock()

    def report(output: RenderOutput) -> None:
        with lock:
            reported.append(output)

    harness.set_leader("replica-a", 1)
    term = harness.pipeline("replica-a", 1, report_warnings=report)
    harness.start_term(term)
    term.request_render()
    first = wait_for(lambda: term.state.last_good, 60, what="a render")
    wait_for(lambda: reported, 10, what="the render reported")
    with lock:
        assert [o.checksum for o in reported] == [first.checksum]

    harness.template_obj["spec"]["haproxyConfig"] = {"template": "{{ does not parse"}
    term.request_render()
    wait_for(
        lambda: any(reason == "RenderFailed" for _, reason, _ in harness.events),
        30,
        what="the failed render",
    )
    time.sleep(0.5)
    with lock:
        assert [o.checksum for o in reported] == [first.checksum]

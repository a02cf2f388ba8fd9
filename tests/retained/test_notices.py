"""Events are deduplicated within a term (seed 000, Observability: "Deduplicate unchanged
notices within a term"), and a new term reports again: the pipeline against the local API
server, real agents and real haproxy."""

from __future__ import annotations

import time
from collections import Counter

from devstack.stack import wait_for
from tests.retained.test_drain import Harness

WANTED = ("RenderFailed", "RetainedConfigUnavailable")


def _counts(harness: Harness) -> Counter[str]:
    return Counter(reason for _, reason, _ in harness.events if reason in WANTED)


def test_unchanged_notices_are_emitted_once_per_term(harness: Harness) -> None:
    (agent,) = harness.add_agents(1)
    harness.pods.append(harness.pod_for(agent, 0))  # a bootstrap pod, no checkpoint anywhere
    harness.template_obj["spec"]["haproxyConfig"] = {"template": "{{ does not parse"}
    harness.set_leader("replica-a", 1)
    first = harness.pipeline("replica-a", 1)
    harness.start_term(first)
    for _ in range(4):  # the same failure, rendered again and again
        first.request_render()
        time.sleep(0.5)
    wait_for(lambda: all(_counts(harness)[r] >= 1 for r in WANTED), 30, what="both notices")
    time.sleep(2.0)  # renders and recovery retries keep failing the same way
    assert _counts(harness) == Counter({r: 1 for r in WANTED})
    first.stop(drain=False)

    harness.set_leader("replica-b", 2)
    second = harness.pipeline("replica-b", 2)
    harness.start_term(second)
    second.request_render()
    wait_for(
        lambda: all(_counts(harness)[r] >= 2 for r in WANTED), 30, what="again in the new term"
    )
    second.request_render()
    time.sleep(2.0)
    assert _counts(harness) == Counter({r: 2 for r in WANTED})

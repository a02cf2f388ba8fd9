"""A promoted Standby recovers from the Active's checkpoints (issue 15, 2.10; seed 004 with
ADR-0033), on the topology of tests/hub/planes.py: three local API servers, both control
planes as real Celery workers, real agents and haproxy in the workload cluster.

The Active deploys P and is SIGKILLed. Rendering is broken on the Standby (its copy of the
template), so after promotion nothing can be rendered there: only the mirror can help. A
scaled-up HAProxy pod must become Ready serving P, recovered by the promoted side from the
Active's checkpoint (re-parented to the local template), its pointer and its intent (the
floor the promoted side's first claim adopted). The pods that already run P are untouched.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator

import kubernetes
import pytest

from controller.hub.mirror_rules import MIRROR_LABEL
from controller.retained.intent import INTENT_ANNOTATION, MIRRORED_INTENT_ANNOTATION
from devstack.stack import wait_for
from tests.hub.planes import (
    ACTIVE,
    NS,
    STANDBY,
    TEMPLATE,
    ControlPlanes,
    break_rendering,
    custom_object,
    intents,
    mirrored_for_recovery,
    start_control_planes,
)

# Three clusters to start first: on the real tier, under load, more than the suite's 300 s.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def planes() -> Iterator[ControlPlanes]:
    planes = start_control_planes("hub-recovery")
    try:
        yield planes
    finally:
        planes.stop()


def test_promoted_standby_recovers_a_replacement_pod_from_the_actives_checkpoint(
    planes: ControlPlanes,
) -> None:
    fleet, a, b = planes.fleet, planes.a, planes.b
    wait_for(lambda: len(fleet.haproxy_pods(ready_only=False)) == 2, 60, what="haproxy pods")
    wait_for(lambda: fleet.serves("before.example", "echo-"), 90, what="served by the Active")
    pods = fleet.haproxy_pods(ready_only=False)
    states = {p.metadata.name: fleet.agent_state(p) for p in pods}
    (plan,) = {s.applied_plan_id for s in states.values()}
    (checksum,) = {s.applied_checksum for s in states.values()}
    assert planes.applied_holders() == {ACTIVE}
    # The Active's intent names P and its checkpoint of P is published (and mirrored).
    wait_for(
        lambda: intents(a).get(INTENT_ANNOTATION, {}).get("checksum") == checksum,
        60,
        what="the Active's intent names P",
    )
    wait_for(lambda: mirrored_for_recovery(b, checksum), 90, what="P mirrored for recovery")

    # Rendering breaks on the Standby: its copy of the template no longer parses (the
    # mirror leaves a copy alone until the Active's template changes).
    break_rendering(b)
    copy_ = custom_object(b, "haproxytemplateconfigs", TEMPLATE)
    assert copy_ is not None and MIRROR_LABEL in copy_["metadata"]["labels"]

    planes.active.signal(signal.SIGKILL)
    wait_for(lambda: planes.holder(b, "haptic-hub") == STANDBY, 30, 0.05, what="promotion")
    # The promoted side's claim adopted the Active's intent as its floor.
    wait_for(
        lambda: (
            intents(b).get(INTENT_ANNOTATION, {}).get("checksum") == checksum
            and MIRRORED_INTENT_ANNOTATION not in intents(b)
        ),
        30,
        what="the floor adopted by the promoted side's claim",
    )

    # A replacement pod: bootstrap, nothing rendered can reach it; only recovery can.
    fleet.scale("haproxy", 3)
    wait_for(lambda: len(fleet.haproxy_pods(ready_only=False)) == 3, 60, what="a third pod")
    (new,) = [p for p in fleet.haproxy_pods(ready_only=False) if p.metadata.name not in states]
    started = time.monotonic()
    wait_for(
        lambda: new.metadata.name in {p.metadata.name for p in fleet.haproxy_pods()},
        120,
        what="the replacement pod Ready",
    )
    print(f"replacement Ready {time.monotonic() - started:.1f} s after it was scheduled")
    (ready,) = [p for p in fleet.haproxy_pods() if p.metadata.name == new.metadata.name]
    recovered = fleet.agent_state(ready)
    assert (recovered.applied_plan_id, recovered.applied_checksum) == (plan, checksum)
    assert (recovered.applied_token or {}).get("holder") == STANDBY
    assert fleet.serves("before.example", "echo-", pods=[ready])
    # The pods that ran P already were given nothing: same plan, same writer.
    for pod in pods:
        state = fleet.agent_state(pod)
        assert state.applied_plan_id == plan
        assert (state.applied_token or {}).get("holder") == ACTIVE
    events = kubernetes.client.CoreV1Api(b.api_client()).list_namespaced_event(NS).items
    assert any(e.reason == "RetainedConfigActive" for e in events)

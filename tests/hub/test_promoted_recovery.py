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

import json
import signal
import time
from collections.abc import Iterator

import kubernetes
import pytest

from controller.hub.mirror_rules import MIRROR_LABEL
from controller.retained.checkpoint import checkpoint_name
from controller.retained.intent import INTENT_ANNOTATION, MIRRORED_INTENT_ANNOTATION
from controller.retained.store import retained_lease_name
from devstack.stack import wait_for
from localcluster.testing import ApiServer
from tests.hub.planes import ACTIVE, NS, STANDBY, ControlPlanes, start_control_planes

# Three clusters to start first: on the real tier, under load, more than the suite's 300 s.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

GROUP, VERSION = "haproxy-haptic.org", "v1alpha1"
TEMPLATE = "haptic"
BROKEN = "{{ this template does not parse"


@pytest.fixture(scope="module")
def planes() -> Iterator[ControlPlanes]:
    planes = start_control_planes("hub-recovery")
    try:
        yield planes
    finally:
        planes.stop()


def _custom(api: ApiServer) -> kubernetes.client.CustomObjectsApi:
    return kubernetes.client.CustomObjectsApi(api.api_client())


def _get(api: ApiServer, plural: str, name: str) -> dict | None:
    try:
        return _custom(api).get_namespaced_custom_object(
            GROUP, VERSION, NS, plural, name, _request_timeout=5
        )
    except kubernetes.client.ApiException:
        return None


def _intent(api: ApiServer) -> dict:
    planes_lease = kubernetes.client.CoordinationV1Api(api.api_client())
    try:
        lease = planes_lease.read_namespaced_lease(retained_lease_name(TEMPLATE), NS)
    except kubernetes.client.ApiException:
        return {}
    annotations = lease.metadata.annotations or {}
    return {
        key: json.loads(annotations[key])
        for key in (INTENT_ANNOTATION, MIRRORED_INTENT_ANNOTATION)
        if key in annotations
    }


def _mirrored_for_recovery(b: ApiServer, checksum: str) -> bool:
    """B holds the re-parented checkpoint of `checksum`, the pointer to its copy, and P as
    the floor (still carried, or adopted already)."""
    template = _get(b, "haproxytemplateconfigs", TEMPLATE)
    copy_ = _get(b, "haproxycfgs", checkpoint_name(TEMPLATE, checksum))
    ordinary = _get(b, "haproxycfgs", TEMPLATE)
    if template is None or copy_ is None or ordinary is None:
        return False
    uid = template["metadata"]["uid"]
    pointers = (ordinary.get("status") or {}).get("retainedConfigs") or []
    floors = _intent(b)
    return (
        copy_["spec"]["templateUID"] == uid
        and copy_["metadata"]["ownerReferences"][0]["uid"] == uid
        and any(p["uid"] == copy_["metadata"]["uid"] for p in pointers)
        and any(f.get("checksum") == checksum for f in floors.values())
    )


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
        lambda: _intent(a).get(INTENT_ANNOTATION, {}).get("checksum") == checksum,
        60,
        what="the Active's intent names P",
    )
    wait_for(lambda: _mirrored_for_recovery(b, checksum), 90, what="P mirrored for recovery")

    # Rendering breaks on the Standby: its copy of the template no longer parses (the
    # mirror leaves a copy alone until the Active's template changes).
    _custom(b).patch_namespaced_custom_object(
        GROUP, VERSION, NS, "haproxytemplateconfigs", TEMPLATE,
        {"spec": {"haproxyConfig": {"template": BROKEN}}},
    )  # fmt: skip
    copy_ = _get(b, "haproxytemplateconfigs", TEMPLATE)
    assert copy_ is not None and MIRROR_LABEL in copy_["metadata"]["labels"]

    planes.active.signal(signal.SIGKILL)
    wait_for(lambda: planes.holder(b, "haptic-hub") == STANDBY, 30, 0.05, what="promotion")
    # The promoted side's claim adopted the Active's intent as its floor.
    wait_for(
        lambda: (
            _intent(b).get(INTENT_ANNOTATION, {}).get("checksum") == checksum
            and MIRRORED_INTENT_ANNOTATION not in _intent(b)
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

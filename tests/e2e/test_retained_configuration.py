"""ADR-0033 end to end: replacement pods recover from the retained checkpoint the intent
names, while rendering is broken, across leader loss and a full control-plane restart."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator

import pytest

from haptic_site import stack
from haptic_site.stack import wait_for
from tests.e2e.harness import System, start_system

pytestmark = pytest.mark.e2e
BROKEN = "{{ this template does not parse"


def retained_lease(system: System):
    from kubernetes.client import CoordinationV1Api

    return CoordinationV1Api(system.client).read_namespaced_lease(
        "haptic-retained-state", stack.NAMESPACE
    )


def intent(system: System) -> dict:
    raw = (retained_lease(system).metadata.annotations or {}).get(
        "haproxy-haptic.org/deployment-intent"
    )
    return json.loads(raw) if raw else {}


def pointers(system: System) -> list[dict]:
    return ((system.published() or {}).get("status") or {}).get("retainedConfigs") or []


def checkpoint_for_intent(system: System) -> dict | None:
    want = intent(system).get("checksum")
    for p in pointers(system):
        if p["checksum"] == want:
            return p
    return None


def break_rendering(system: System) -> None:
    system.custom().patch_namespaced_custom_object(
        "haproxy-haptic.org",
        "v1alpha1",
        stack.NAMESPACE,
        "haproxytemplateconfigs",
        "haptic",
        {"spec": {"haproxyConfig": {"template": BROKEN}}},
    )


def fleet_evidence(system: System) -> dict[str, tuple]:
    out = {}
    for pod in system.haproxy_pods(ready_only=False):
        state = system.agent_state(pod)
        out[pod.metadata.name] = (
            state.apply_count,
            (state.worker or {}).get("pid"),
            state.applied_plan_id,
        )
    return out


def template_events(system: System, reason: str) -> list:
    events = system.core().list_namespaced_event(stack.NAMESPACE).items
    return [
        e
        for e in events
        if e.reason == reason and e.involved_object.kind == "HAProxyTemplateConfig"
    ]


@pytest.fixture
def system(request: pytest.FixtureRequest) -> Iterator[System]:
    system = start_system(request.node.name, haproxy_replicas=2)
    try:
        system.apply(stack.backend("echo", replicas=1))
        system.apply([stack.ingress("echo", "x.example", "echo")])
        wait_for(lambda: system.serves("x.example", "echo-"), 120, what="x.example served")
        wait_for(lambda: checkpoint_for_intent(system), 60, what="checkpoint of the intent")
        yield system
    finally:
        system.stop()


def _leader_and_standby(system: System) -> tuple[str, str]:
    leader = wait_for(
        lambda: system.leader() in system.controllers and system.leader(), 30, what="a leader"
    )
    standby = next(n for n in system.controllers if n != leader)
    return leader, standby


def _recover_after_losing_the_leader(system: System, sig: int) -> None:
    before = fleet_evidence(system)
    break_rendering(system)
    leader, standby = _leader_and_standby(system)
    wait_for(
        lambda: (
            "does not parse" in json.dumps(system.health(leader).json())
            or "template"
            in (
                system.health(leader)
                .json()["components"]["reconciliation-coordinator"]
                .get("error")
                or ""
            )
        ),
        30,
        what="render error on /healthz",
    )
    # Restart the standby (it loses whatever it had in memory), then lose the leader.
    system.controllers[standby].stop(grace=30)
    system.start_controller(standby)
    system.controllers[leader].signal(sig)
    system.controllers[leader].stop(grace=30)
    wait_for(lambda: system.leader() == standby, 60, what="standby leads")
    system.scale("haproxy", 3)
    wait_for(lambda: len(system.haproxy_pods(ready_only=False)) == 3, 60, what="third pod")
    wait_for(
        lambda: len(system.haproxy_pods(ready_only=True)) == 3,
        120,
        what="replacement Ready from the checkpoint",
    )
    assert system.serves("x.example", "echo-")
    # Old pods got no apply, no reload and no plan change.
    after = fleet_evidence(system)
    for name, evidence in before.items():
        assert after[name] == evidence, name
    assert template_events(system, "RetainedConfigActive")
    # The render error stays on /healthz; recovery does not clear it.
    health = system.health(standby).json()
    assert health["components"]["reconciliation-coordinator"].get("error")
    metrics = system.health(standby, "/metrics").text
    assert "haptic_retained_config_active 1.0" in metrics


def test_retained_configuration_recovery(system: System) -> None:
    _recover_after_losing_the_leader(system, signal.SIGTERM)
    # Then the whole control plane goes: two fresh controllers, and the proxy named in the
    # checkpoint's historical receipt is replaced.
    receipt_pod = None
    pointer = checkpoint_for_intent(system)
    assert pointer is not None
    checkpoint = system.custom().get_namespaced_custom_object(
        "haproxy-haptic.org", "v1alpha1", stack.NAMESPACE, "haproxycfgs", pointer["name"]
    )
    receipt_pod = checkpoint["spec"]["retainedPlan"]["workerReceipt"]["podName"]
    for name in list(system.controllers):
        system.controllers.pop(name).stop(grace=30)
    system.start_controller("controller-7")
    system.start_controller("controller-8")
    system.core().delete_namespaced_pod(receipt_pod, stack.NAMESPACE)
    wait_for(
        lambda: receipt_pod not in {p.metadata.name for p in system.haproxy_pods(ready_only=False)},
        60,
        what="receipt pod gone",
    )
    wait_for(lambda: len(system.haproxy_pods(ready_only=True)) == 3, 120, what="repaired")
    assert system.serves("x.example", "echo-")
    # The receipt survived its pod's removal.
    checkpoint = system.custom().get_namespaced_custom_object(
        "haproxy-haptic.org", "v1alpha1", stack.NAMESPACE, "haproxycfgs", pointer["name"]
    )
    assert checkpoint["spec"]["retainedPlan"]["workerReceipt"]["podName"] == receipt_pod


def test_retained_configuration_sudden_failover(system: System) -> None:
    _recover_after_losing_the_leader(system, signal.SIGKILL)

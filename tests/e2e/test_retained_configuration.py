"""ADR-0033 end to end: replacement pods recover from the retained checkpoint the intent
names, while rendering is broken, across leader loss and a full control-plane restart."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator

import pytest

from devstack import stack
from devstack.stack import wait_for
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


def fix_rendering(system: System) -> None:
    """Back to the template libraries (a merge patch with null removes the broken template)."""
    system.custom().patch_namespaced_custom_object(
        "haproxy-haptic.org",
        "v1alpha1",
        stack.NAMESPACE,
        "haproxytemplateconfigs",
        "haptic",
        {"spec": {"haproxyConfig": None}},
    )


def render_error(system: System, controller: str) -> str:
    components = system.health(controller).json()["components"]
    return components["reconciliation-coordinator"].get("error") or ""


def retained_gauge(system: System, controller: str) -> float:
    for line in system.health(controller, "/metrics").text.splitlines():
        if line.startswith("haptic_retained_config_active "):
            return float(line.split()[1])
    raise AssertionError(f"{controller} exports no haptic_retained_config_active")


def publication(system: System) -> dict:
    """What publication wrote: the ordinary HAProxyCfg (any write changes its
    resourceVersion), its pointers, and every checkpoint HAProxyCfg."""
    cfgs = system.custom().list_namespaced_custom_object(
        "haproxy-haptic.org", "v1alpha1", stack.NAMESPACE, "haproxycfgs"
    )["items"]
    ordinary = system.published() or {}
    return {
        "ordinary": ordinary.get("metadata", {}).get("resourceVersion"),
        "pointers": [(p["name"], p["checksum"]) for p in pointers(system)],
        "checkpoints": {
            c["metadata"]["name"]: c["metadata"]["resourceVersion"]
            for c in cfgs
            if c["metadata"]["name"] != "haptic"
        },
    }


def per_pod(system: System) -> dict[str, tuple]:
    """Each pod's applied checksum, running plan, pending reload and verified evidence."""
    out = {}
    for pod in system.haproxy_pods(ready_only=False):
        state = system.agent_state(pod, verify=True)
        check = state.verification or {}
        out[pod.metadata.name] = (
            state.applied_checksum,
            state.running_plan_id,
            state.pending_reload,
            bool(check.get("files_ok")) and bool(check.get("worker_ok")),
        )
    return out


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


def template_events(system: System, reason: str, by: set[str] | None = None) -> list:
    """Events with `reason` on the HAProxyTemplateConfig (reported by `by` only), oldest
    first."""
    events = system.core().list_namespaced_event(stack.NAMESPACE).items
    found = [
        e
        for e in events
        if e.reason == reason
        and e.involved_object.kind == "HAProxyTemplateConfig"
        and (by is None or e.reporting_instance in by)
    ]
    return sorted(found, key=lambda e: e.first_timestamp)


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
    leader, standby = _leader_and_standby(system)
    assert retained_gauge(system, leader) == 0
    break_rendering(system)
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
    assert retained_gauge(system, standby) == 1


def test_retained_configuration_recovery(system: System) -> None:
    _recover_after_losing_the_leader(system, signal.SIGTERM)
    # Then the whole control plane goes: two fresh controllers, and the proxy named in the
    # checkpoint's historical receipt is replaced.
    pointer = checkpoint_for_intent(system)
    assert pointer is not None
    promised = intent(system)
    checkpoint = system.custom().get_namespaced_custom_object(
        "haproxy-haptic.org", "v1alpha1", stack.NAMESPACE, "haproxycfgs", pointer["name"]
    )
    receipt_pod = checkpoint["spec"]["retainedPlan"]["workerReceipt"]["podName"]
    stop_controllers(system)
    published = publication(system)
    fresh = {"controller-7", "controller-8"}
    for name in sorted(fresh):
        system.start_controller(name)
    leader = wait_for(lambda: system.leader() in fresh and system.leader(), 60, what="a leader")
    wait_for(lambda: render_error(system, leader), 60, what="the new leader's render error")
    # Every pod is configured and agrees: nothing to recover, the gauge stays 0.
    assert all(retained_gauge(system, name) == 0 for name in fresh)
    kept = {n: e for n, e in fleet_evidence(system).items() if n != receipt_pod}
    system.core().delete_namespaced_pod(receipt_pod, stack.NAMESPACE)
    wait_for(
        lambda: receipt_pod not in {p.metadata.name for p in system.haproxy_pods(ready_only=False)},
        60,
        what="receipt pod gone",
    )
    wait_for(lambda: len(system.haproxy_pods(ready_only=True)) == 3, 120, what="repaired")
    assert system.serves("x.example", "echo-")
    _check_the_repair(system, leader, fresh, promised, kept, published)
    # The receipt survived its pod's removal.
    checkpoint = system.custom().get_namespaced_custom_object(
        "haproxy-haptic.org", "v1alpha1", stack.NAMESPACE, "haproxycfgs", pointer["name"]
    )
    assert checkpoint["spec"]["retainedPlan"]["workerReceipt"]["podName"] == receipt_pod
    _check_the_render_converges(system, leader, fresh, promised)


def _check_the_repair(
    system: System, leader: str, fresh: set[str], promised: dict, kept: dict, published: dict
) -> None:
    """After the full restart: every pod (the replacement included) runs the promised output
    with verified worker evidence; the pods that were there got nothing; one deduplicated
    RetainedConfigActive names the checksum and the render error; the gauge is 1 on the
    leader only; and nothing was published while rendering is blocked."""
    pods = per_pod(system)
    assert len(pods) == 3 and set(kept) < set(pods)
    assert all(
        evidence == (promised["checksum"], promised["planID"], None, True)
        for evidence in pods.values()
    ), pods
    after = fleet_evidence(system)
    assert {n: after[n] for n in kept} == kept
    active = template_events(system, "RetainedConfigActive", by=fresh)
    assert len(active) == 1, [e.message for e in active]
    assert active[0].reporting_instance == leader
    assert promised["checksum"] in active[0].message
    assert render_error(system, leader)[:40] in active[0].message
    # Nothing contradicts a scheduled recovery once it is active (a pod whose agent did not
    # answer yet may have made an earlier attempt unavailable).
    unavailable = template_events(system, "RetainedConfigUnavailable", by=fresh)
    assert all(e.first_timestamp <= active[0].first_timestamp for e in unavailable), [
        e.message for e in unavailable
    ]
    assert len({e.message for e in unavailable}) == len(unavailable)  # deduplicated
    assert {name: retained_gauge(system, name) for name in fresh} == {
        name: (1.0 if name == leader else 0.0) for name in fresh
    }
    assert render_error(system, leader)  # recovery never clears the render error
    assert published["ordinary"] and published["checkpoints"] and published["pointers"]
    assert publication(system) == published


def _check_the_render_converges(
    system: System, leader: str, fresh: set[str], promised: dict
) -> None:
    """Rendering recovers: the current render converges on every pod, the gauge drops to 0,
    the intent and the newest pointer name that render, and the promised checkpoint stays."""
    fix_rendering(system)
    wait_for(lambda: not render_error(system, leader), 60, what="the render error cleared")
    wait_for(lambda: retained_gauge(system, leader) == 0, 60, what="the gauge back to 0")
    current = intent(system)
    assert current["epoch"] >= promised["epoch"]
    pods = per_pod(system)
    assert all(
        evidence == (current["checksum"], current["planID"], None, True)
        for evidence in pods.values()
    ), pods
    head = wait_for(
        lambda: pointers(system) and pointers(system)[0]["checksum"] == current["checksum"],
        60,
        what="the newest pointer names the current render",
    )
    assert head
    assert promised["checksum"] in {p["checksum"] for p in pointers(system)}
    assert all(retained_gauge(system, name) == 0 for name in fresh)


def test_retained_configuration_sudden_failover(system: System) -> None:
    _recover_after_losing_the_leader(system, signal.SIGKILL)


# -- freshness, tampering, the current binary ------------------------------------------------


def stop_controllers(system: System) -> None:
    for name in list(system.controllers):
        system.controllers.pop(name).stop(grace=30)


def set_pointers(system: System, entries: list[dict]) -> None:
    for _ in range(5):
        cfg = system.published()
        cfg["status"]["retainedConfigs"] = entries
        try:
            system.custom().replace_namespaced_custom_object_status(
                "haproxy-haptic.org", "v1alpha1", stack.NAMESPACE, "haproxycfgs", "haptic", cfg
            )
            return
        except Exception:  # a concurrent status write: read again
            continue
    raise AssertionError("could not rewrite the pointers")


def new_pod_stays_bootstrap(system: System, seconds: float = 8.0) -> str:
    """Scale to one more pod; it must stay without a plan and not Ready."""
    # The pods before scaling: read after it, a fast new pod was counted as old (seen once).
    old = {p.metadata.name for p in system.haproxy_pods(ready_only=False)}
    system.scale("haproxy", len(old) + 1)
    pod = wait_for(
        lambda: next(
            (
                p
                for p in system.haproxy_pods(ready_only=False)
                if p.metadata.name not in old and system.agent_state(p)
            ),
            None,
        ),
        60,
        what="the new pod's agent",
    )
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        state = system.agent_state(pod)
        assert state.bootstrap and state.applied_plan_id is None
        assert pod.metadata.name not in {p.metadata.name for p in system.haproxy_pods()}
        time.sleep(0.5)
    return pod.metadata.name


def test_retained_configuration_freshness(system: System) -> None:
    older = checkpoint_for_intent(system)
    # A newer fleet deployment, acknowledged and checkpointed.
    system.apply([stack.ingress("echo-y", "y.example", "echo")])
    wait_for(lambda: system.serves("y.example", "echo-"), 60, what="y.example served")
    newer = wait_for(
        lambda: (c := checkpoint_for_intent(system)) and c["name"] != older["name"] and c,
        60,
        what="newer checkpoint",
    )
    break_rendering(system)
    stop_controllers(system)
    set_pointers(system, [older])  # the newer pointer is gone
    system.start_controller("controller-5")
    system.start_controller("controller-6")
    stuck = new_pod_stays_bootstrap(system)
    wait_for(
        lambda: template_events(system, "RetainedConfigUnavailable"),
        30,
        what="RetainedConfigUnavailable",
    )
    # Restoring the newer pointer allows recovery even when the older one comes first.
    set_pointers(system, [older, newer])
    system.core().delete_namespaced_pod(stuck, stack.NAMESPACE)  # a fresh pod: a new attempt
    wait_for(lambda: len(system.haproxy_pods(ready_only=True)) == 3, 120, what="recovered")
    assert system.serves("y.example", "echo-")
    plans = {system.agent_state(p).applied_checksum for p in system.haproxy_pods()}
    assert plans == {newer["checksum"]}


def test_retained_configuration_tampering(system: System) -> None:
    import base64
    import gzip

    pointer = checkpoint_for_intent(system)
    break_rendering(system)
    stop_controllers(system)
    cfg = system.custom().get_namespaced_custom_object(
        "haproxy-haptic.org", "v1alpha1", stack.NAMESPACE, "haproxycfgs", pointer["name"]
    )
    content = gzip.decompress(base64.b64decode(cfg["spec"]["content"]))
    cfg["spec"]["content"] = base64.b64encode(
        gzip.compress(content.replace(b"timeout", b"timeout ", 1))
    ).decode()  # same checksum field, other bytes
    system.custom().replace_namespaced_custom_object(
        "haproxy-haptic.org", "v1alpha1", stack.NAMESPACE, "haproxycfgs", pointer["name"], cfg
    )
    system.start_controller("controller-5")
    new_pod_stays_bootstrap(system)
    events = wait_for(
        lambda: template_events(system, "RetainedConfigUnavailable"), 30, what="corruption reported"
    )
    assert any("digest mismatch" in e.message for e in events), [e.message for e in events]


def test_retained_configuration_checks_current_haproxy(system: System) -> None:
    """A checkpoint whose declarations the current binary refuses (the removed nbproc) is
    never dispatched, however consistent it is."""
    from controller.render import RenderedFile, build_plan, checksum, plan_id
    from controller.retained.checkpoint import TemplateRef, encode_checkpoint, with_child_uids
    from controller.retained.intent import INTENT_ANNOTATION, DeploymentIntent, intent_annotation
    from controller.retained.receipts import PodReceipt

    pointer = checkpoint_for_intent(system)
    break_rendering(system)
    stop_controllers(system)
    template = system.custom().get_namespaced_custom_object(
        "haproxy-haptic.org", "v1alpha1", stack.NAMESPACE, "haproxytemplateconfigs", "haptic"
    )
    ref = TemplateRef("haptic", stack.NAMESPACE, template["metadata"]["uid"])
    # Rebuild the acknowledged output with nbproc added, consistently addressed.
    from controller.publish.kube import Objects
    from controller.publish.ordinary import OrdinaryPublisher

    current = OrdinaryPublisher(Objects(system.client, stack.NAMESPACE), ref).read_output()
    assert current is not None and current.checksum == pointer["checksum"]
    files = [
        RenderedFile(f.path, f.kind, f.content.replace(b"global\n", b"global\n    nbproc 2\n", 1))
        if f.path == "haproxy.cfg"
        else f
        for f in current.files
    ]
    plan = build_plan(files)
    pid, sums = plan_id(plan), checksum(files)
    receipt = PodReceipt("haproxy-old", "uid-old", "rt-old", sums, pid, pid, pid, "reload")
    objs = encode_checkpoint(ref, files, receipt, "2026-11-30T00:00:00Z")
    objects = Objects(system.client, stack.NAMESPACE)
    uids = {}
    for child in objs.children:
        existing = objects.get("haproxymapfiles", child["metadata"]["name"]) or objects.create(
            "haproxymapfiles", child
        )
        uids[child["metadata"]["name"]] = existing["metadata"]["uid"]
    for secret in objs.secrets:
        existing = objects.get_secret(secret["metadata"]["name"]) or objects.create_secret(secret)
        uids[secret["metadata"]["name"]] = existing["metadata"]["uid"]
    created = objects.create("haproxycfgs", with_child_uids(objs.config, uids))
    set_pointers(
        system, [{"name": objs.name, "uid": created["metadata"]["uid"], "checksum": sums}, pointer]
    )
    lease = retained_lease(system)
    lease.metadata.annotations[INTENT_ANNOTATION] = intent_annotation(
        DeploymentIntent(pid, sums, "controller-0", 99, ref.uid), "2026-11-30T00:00:00Z"
    )
    from kubernetes.client import CoordinationV1Api

    CoordinationV1Api(system.client).replace_namespaced_lease(
        "haptic-retained-state", stack.NAMESPACE, lease
    )
    # Only bootstrap pods: the forged receipt is all the evidence, so validation decides.
    system.scale("haproxy", 0)
    wait_for(lambda: not system.haproxy_pods(ready_only=False), 60, what="no haproxy pods")
    system.start_controller("controller-5")
    new_pod_stays_bootstrap(system)
    events = wait_for(
        lambda: [
            e for e in template_events(system, "RetainedConfigUnavailable") if "nbproc" in e.message
        ],
        30,
        what="nbproc refusal",
    )
    assert "current HAProxy refuses" in events[0].message


# -- a deployment inside the publish throttle; an intent left by an earlier release ----------


def test_retained_configuration_after_recent_deployment(request: pytest.FixtureRequest) -> None:
    """The leader stops right after a deployment whose receipt the publish throttle still
    holds: the graceful drain publishes it, and replacements start from that checkpoint."""
    timings = stack.Timings("4s", "3s", "500ms", "60s", "30s", "50ms")
    system = start_system(request.node.name, haproxy_replicas=2, timings=timings)
    try:
        system.apply(stack.backend("echo", replicas=1))
        system.apply([stack.ingress("echo", "x.example", "echo")])
        wait_for(lambda: system.serves("x.example", "echo-"), 120, what="x.example served")
        first = wait_for(lambda: checkpoint_for_intent(system), 60, what="first checkpoint")
        system.apply([stack.ingress("echo-y", "y.example", "echo")])
        wait_for(lambda: system.serves("y.example", "echo-"), 60, what="y.example served")
        wait_for(
            lambda: intent(system).get("checksum") != first["checksum"],
            30,
            what="intent names the new deployment",
        )
        assert checkpoint_for_intent(system) is None  # still held by the throttle
        leader, _standby = _leader_and_standby(system)
        system.controllers.pop(leader).stop(grace=30)  # graceful: the term drains
        recent = wait_for(lambda: checkpoint_for_intent(system), 10, what="the drained checkpoint")
        break_rendering(system)
        system.scale("haproxy", 3)
        wait_for(
            lambda: len(system.haproxy_pods(ready_only=True)) == 3, 120, what="replacement Ready"
        )
        assert system.serves("y.example", "echo-")
        checksums = {system.agent_state(p).applied_checksum for p in system.haproxy_pods()}
        assert checksums == {recent["checksum"]}
    finally:
        system.stop()


def test_upgraded_leader_keeps_the_deployment_intent_of_an_earlier_release(
    system: System,
) -> None:
    from kubernetes.client import CoordinationV1Api

    from controller.retained.intent import INTENT_ANNOTATION

    pointer = checkpoint_for_intent(system)
    stop_controllers(system)
    leases = CoordinationV1Api(system.client)
    # An earlier release kept the intent on the leader-election Lease, written after the
    # last claim; the retained-state Lease still names something older.
    retained = retained_lease(system)
    copy = retained.metadata.annotations[INTENT_ANNOTATION]
    older = json.loads(copy)
    older.update(planID="0" * 64, checksum="sha256:" + "0" * 64)
    retained.metadata.annotations[INTENT_ANNOTATION] = json.dumps(older)
    leases.replace_namespaced_lease("haptic-retained-state", stack.NAMESPACE, retained)
    leader = system.leader_lease()
    leader.metadata.annotations[INTENT_ANNOTATION] = copy
    leases.replace_namespaced_lease("haptic-leader", stack.NAMESPACE, leader)
    break_rendering(system)
    system.start_controller("controller-5")
    system.scale("haproxy", 3)
    wait_for(lambda: len(system.haproxy_pods(ready_only=True)) == 3, 120, what="recovered")
    assert system.serves("x.example", "echo-")
    # The copy moved to the retained-state Lease and left the leader-election Lease.
    assert intent(system)["checksum"] == pointer["checksum"]
    assert INTENT_ANNOTATION not in (system.leader_lease().metadata.annotations or {})

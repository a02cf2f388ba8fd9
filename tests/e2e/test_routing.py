"""From render to traffic: an Ingress routes HTTP through every HAProxy pod (issue 7)."""

from __future__ import annotations

import base64
import hashlib
import time
import uuid
from collections.abc import Iterator

import kubernetes
import pytest

from devstack import stack
from devstack.stack import wait_for
from tests.e2e.harness import System, start_system

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def system() -> Iterator[System]:
    system = start_system("routing", haproxy_replicas=2)
    try:
        system.apply(stack.backend("echo", replicas=1))
        system.apply([stack.ingress("echo", "x.example", "echo")])
        yield system
    finally:
        system.stop()


def test_an_ingress_routes_http_through_every_haproxy_pod(system: System) -> None:
    wait_for(lambda: len(system.haproxy_pods(ready_only=False)) == 2, 60, what="haproxy pods")
    wait_for(lambda: system.serves("x.example", "echo-"), 90, what="x.example served")
    for pod in system.haproxy_pods(ready_only=False):
        assert system.get(pod, "x.example").status_code == 200
        assert system.get(pod, "unknown.example").status_code == 404
    # Configured pods turn Ready (their readiness endpoint stops answering 503).
    wait_for(lambda: len(system.haproxy_pods(ready_only=True)) == 2, 30, what="pods Ready")
    # Every agent reports the same plan; receipts are published.
    plans = {system.agent_state(p).applied_plan_id for p in system.haproxy_pods()}
    assert len(plans) == 1 and None not in plans
    published = wait_for(
        lambda: (system.published() or {}).get("status", {}).get("deployedToPods"),
        30,
        what="receipts",
    )
    assert {e["podName"] for e in published} == {
        p.metadata.name for p in system.haproxy_pods(ready_only=False)
    }


def test_a_served_ingress_shows_the_haproxy_pod_addresses_in_its_status(system: System) -> None:
    # Issue 18: once the fleet serves it, status.loadBalancer.ingress lists the pod IPs.
    wait_for(lambda: system.serves("x.example", "echo-"), 90, what="x.example served")
    networking = kubernetes.client.NetworkingV1Api(system.client)

    def addresses() -> set[str]:
        ing = networking.read_namespaced_ingress_status("echo", stack.NAMESPACE)
        lb = ing.status.load_balancer if ing.status else None
        return {e.ip for e in (lb.ingress or [])} if lb else set()

    pod_ips = {p.status.pod_ip for p in system.haproxy_pods(ready_only=False)}
    wait_for(lambda: addresses() == pod_ips, 60, what="ingress status addresses")


def test_an_http_request_through_a_haproxy_pod_appears_in_the_pod_log(system: System) -> None:
    # Issue 18: HAProxy's access log (httplog) is the pod's log, read through the API as
    # `kubectl logs <pod> -c haproxy` reads it, not a file inside the pod.
    # On the real tier kube-apiserver fetches it from the node's kubelet endpoint
    # (localcluster/node/kubeletapi.py); on the local one the API server reads the file.
    wait_for(lambda: system.serves("x.example", "echo-"), 90, what="x.example served")
    pod = system.haproxy_pods(ready_only=False)[0]
    probe = f"/access-log-probe-{uuid.uuid4().hex}"
    assert system.get(pod, "x.example", probe).status_code == 200

    def logged() -> list[str]:
        text = system.core().read_namespaced_pod_log(
            pod.metadata.name, stack.NAMESPACE, container="haproxy"
        )
        return [line for line in text.splitlines() if probe in line]

    lines = wait_for(logged, 15, what="the request's access log line in the pod log")
    assert len(lines) == 1
    # httplog: frontend, backend/server, status and the request line.
    assert f'"GET {probe} HTTP/1.1"' in lines[0]
    assert " http " in f" {lines[0]} " and " 200 " in lines[0]


def _workers(system: System) -> dict[str, tuple]:
    """Worker pid and start time per HAProxy pod, from the agents."""
    out = {}
    for pod in system.haproxy_pods(ready_only=False):
        worker = system.agent_state(pod).worker or {}
        out[pod.metadata.name] = (worker.get("pid"), worker.get("start_time"))
    return out


def _backend_names(system: System, host: str, tries: int = 30) -> set[str]:
    """Which backend pods answer through the HAProxy pods (round robin)."""
    seen = set()
    for pod in system.haproxy_pods(ready_only=False):
        for _ in range(tries):
            response = system.get(pod, host)
            if response.status_code == 200:
                seen.add(response.headers.get("X-Pod-Name", ""))
    return seen


def test_scaling_the_backend_changes_servers_without_a_reload(system: System) -> None:
    wait_for(lambda: system.serves("x.example", "echo-"), 90, what="x.example served")
    before = _workers(system)
    reloads = {
        p.metadata.name: system.agent_state(p).reload_count
        for p in system.haproxy_pods(ready_only=False)
    }
    system.scale("echo", 3)
    wait_for(
        lambda: len(_backend_names(system, "x.example", 10)) == 3, 90, what="three backends serving"
    )
    assert _workers(system) == before  # no worker replaced anywhere
    assert {
        p.metadata.name: system.agent_state(p).reload_count
        for p in system.haproxy_pods(ready_only=False)
    } == reloads


def _renders(system: System, leader: str) -> dict[str, float]:
    """The leader's haptic_renders_total by path and its incremental mismatch count."""
    out = {"full": 0.0, "incremental": 0.0, "mismatch": 0.0}
    for line in system.health(leader, "/metrics").text.splitlines():
        for path in ("full", "incremental"):
            if line.startswith(f'haptic_renders_total{{path="{path}"}} '):
                out[path] = float(line.split()[1])
        if line.startswith("haptic_incremental_mismatch_total "):
            out["mismatch"] = float(line.split()[1])
    return out


def test_an_endpoint_change_is_served_without_a_full_render_or_a_reload(system: System) -> None:
    # docs/design/incremental.md: the EndpointSlice change is patched into the last output
    # and reaches the real HAProxy runtime API through the agents.
    wait_for(lambda: system.serves("x.example", "echo-"), 90, what="x.example served")
    system.scale("echo", 2)
    wait_for(lambda: len(_backend_names(system, "x.example", 10)) == 2, 90, what="two backends")
    leader = wait_for(lambda: system.leader() in system.controllers and system.leader(), 30)

    # Quiet first: whatever the last changes started (status writes...) has settled.
    def settled() -> dict[str, float] | None:
        first = _renders(system, leader)
        time.sleep(1.0)
        return first if _renders(system, leader) == first else None

    before = wait_for(settled, 30, what="renders settled")
    workers = _workers(system)
    reloads = {
        p.metadata.name: system.agent_state(p).reload_count
        for p in system.haproxy_pods(ready_only=False)
    }
    system.scale("echo", 3)
    wait_for(
        lambda: len(_backend_names(system, "x.example", 10)) == 3, 90, what="three backends serving"
    )
    after = _renders(system, leader)
    assert system.leader() == leader
    assert after["full"] == before["full"]  # no full render, no `haproxy -c`
    assert after["incremental"] > before["incremental"]
    assert after["mismatch"] == 0
    assert _workers(system) == workers
    assert {
        p.metadata.name: system.agent_state(p).reload_count
        for p in system.haproxy_pods(ready_only=False)
    } == reloads


def test_a_new_haproxy_pod_gets_the_config_without_any_other_change(system: System) -> None:
    wait_for(lambda: system.serves("x.example", "echo-"), 90, what="x.example served")
    system.scale("haproxy", 3)
    wait_for(lambda: len(system.haproxy_pods(ready_only=False)) == 3, 60, what="third pod")
    wait_for(lambda: system.serves("x.example", "echo-"), 60, what="third pod serving")
    wait_for(lambda: len(system.haproxy_pods(ready_only=True)) == 3, 30, what="all Ready")


def test_leader_change_reloads_nothing(system: System) -> None:
    wait_for(lambda: system.serves("x.example", "echo-"), 90, what="x.example served")
    wait_for(lambda: system.leader() in system.controllers, 30, what="a leader")
    before = _workers(system)
    old_leader = system.leader()
    old_epoch = int(system.leader_lease().metadata.annotations["haproxy-haptic.org/epoch"])
    # Hand the Lease over: a graceful stop releases it, the other replica takes it.
    system.controllers[old_leader].stop(grace=30)
    wait_for(lambda: system.leader() not in (None, old_leader), 30, what="new leader")
    new_epoch = int(system.leader_lease().metadata.annotations["haproxy-haptic.org/epoch"])
    assert new_epoch > old_epoch
    # The new leader renders, diffs against what agents report and deploys nothing new.
    wait_for(lambda: system.serves("x.example", "echo-"), 30, what="still served")
    assert _workers(system) == before
    system.start_controller(old_leader)  # back to two replicas for the next tests


def test_an_apply_from_an_old_term_is_refused_and_changes_nothing(system: System) -> None:
    from agents.client import AgentConflict

    wait_for(lambda: system.serves("x.example", "echo-"), 90, what="x.example served")
    pod = system.haproxy_pods(ready_only=False)[0]
    state = system.agent_state(pod)
    epoch = state.applied_token["epoch"]
    config = b"global\n    default-path config\n"
    stale = {
        "plan_id": "f" * 64,
        "checksum": "sha256:" + hashlib.sha256(b"haproxy.cfg\0" + config + b"\0").hexdigest(),
        "structure_digest": "0" * 64,
        "token": {"holder": "controller-old", "epoch": epoch - 1, "sequence": 10**6},
        "expected_previous_plan_id": state.applied_plan_id,
        "mode": "reload",
        "files": [
            {
                "path": "haproxy.cfg",
                "kind": "config",
                "sha256": hashlib.sha256(config).hexdigest(),
                "size": len(config),
                "content_b64": base64.b64encode(config).decode(),
            }
        ],
        "runtime_operations": [],
    }
    with system.agent(pod) as client, pytest.raises(AgentConflict) as refused:
        client.apply(stale)
    assert refused.value.reason == "stale_epoch"
    after = system.agent_state(pod)
    assert after.applied_plan_id == state.applied_plan_id
    assert after.worker == state.worker


def _patch_template(system: System, spec: dict) -> None:
    system.custom().patch_namespaced_custom_object(
        "haproxy-haptic.org",
        "v1alpha1",
        stack.NAMESPACE,
        "haproxytemplateconfigs",
        "haptic",
        {"spec": spec},
    )


def _template_condition(system: System) -> dict:
    obj = system.custom().get_namespaced_custom_object(
        "haproxy-haptic.org", "v1alpha1", stack.NAMESPACE, "haproxytemplateconfigs", "haptic"
    )
    conditions = (obj.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "TemplateValidated"), {})


def _debug_header(system: System) -> set:
    return {
        system.get(p, "x.example").headers.get("X-Haptic-Backend")
        for p in system.haproxy_pods(ready_only=False)
    }


def _fleet_plan(system: System) -> set[str] | None:
    """{the plan ID} once every HAProxy pod is Ready and runs the same plan, else None. A pod
    serves before its readiness probe passes: a test that starts right after the system (run
    alone) would otherwise compare against the plans of the pods Ready so far, maybe none."""
    pods = system.haproxy_pods(ready_only=False)
    if not pods or len(system.haproxy_pods(ready_only=True)) != len(pods):
        return None
    plans = {system.agent_state(p).applied_plan_id for p in pods}
    return plans if len(plans) == 1 and None not in plans else None


def test_a_template_change_whose_validation_tests_fail_is_not_used(system: System) -> None:
    # Issue 18: the leader runs spec.validationTests (haproxy -c included) before it renders
    # with a changed template; a refused change leaves the last good template in use and is
    # reported (Event, status condition, metric).
    wait_for(lambda: system.serves("x.example", "echo-"), 90, what="x.example served")
    wait_for(lambda: system.leader() in system.controllers, 30, what="a leader")
    assert _debug_header(system) == {None}
    plans = wait_for(lambda: _fleet_plan(system), 60, what="every pod Ready on one plan")
    # A jsonpath assertion reads the render model of the changed template (debug headers on).
    debug_off = {"type": "jsonpath", "path": "$.libraries.debug_headers", "equals": False}
    failing = {
        "fixtures": [],
        "assertions": [{"type": "contains", "value": "no such line"}, debug_off],
    }
    passing = {
        "fixtures": [],
        "assertions": [
            {"type": "haproxyValid"},
            {"type": "contains", "value": "X-Haptic-Backend"},
            {**debug_off, "equals": True},
        ],
    }
    debug = {"ingress": {"enabled": True, "debugHeaders": True}}
    _patch_template(system, {"templateLibraries": debug, "validationTests": {"must-fail": failing}})
    try:
        refused = wait_for(
            lambda: _template_condition(system).get("status") == "False", 60, what="refused"
        )
        assert refused
        condition = _template_condition(system)
        assert condition["reason"] == "TemplateValidationFailed"
        assert "must-fail: assertions[0]" in condition["message"]
        assert (
            "must-fail: assertions[1]: jsonpath '$.libraries.debug_headers' is true, expected false"
            in condition["message"]
        )
        events = system.core().list_namespaced_event(stack.NAMESPACE).items
        assert any(
            e.reason == "TemplateValidationFailed"
            and e.involved_object.kind == "HAProxyTemplateConfig"
            for e in events
        )
        metrics = system.health(system.leader(), "/metrics").text
        assert "haptic_template_validation_refused 1.0" in metrics
        time.sleep(3)  # what a render with the refused template would have deployed by now
        assert {system.agent_state(p).applied_plan_id for p in system.haproxy_pods()} == plans
        assert _debug_header(system) == {None}

        # Tests that pass: the change is used.
        _patch_template(system, {"validationTests": {"must-fail": None, "valid": passing}})
        wait_for(lambda: None not in _debug_header(system), 60, what="debug headers")
        assert _template_condition(system)["status"] == "True"
    finally:
        _patch_template(
            system,
            {"templateLibraries": {"ingress": {"debugHeaders": None}}, "validationTests": None},
        )
        wait_for(lambda: _debug_header(system) == {None}, 60, what="debug headers gone")

"""The local node against the real local API server, through the official client."""

from __future__ import annotations

import ipaddress
import json
import sys
import threading
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubernetes import client, watch

from devstack.stack import wait_for
from localcluster.node.processes import MARKER_ENV

from .conftest import Cluster
from .support import pids_with_env

GATE = "haproxy-haptic.org/load-balancer-ready"
PY = sys.executable


def backend_container(**extra: Any) -> dict[str, Any]:
    return {
        "name": "web",
        "image": "ignored",
        "command": ["python", "-m", "localcluster.sample_backend"],
        "args": ["--port", "8080"],
        "ports": [{"name": "http", "containerPort": 8080}],
        "readinessProbe": {
            "httpGet": {"path": "/healthz", "port": "http"},
            "periodSeconds": 1,
            **extra,
        },
    }


def deployment(name: str, replicas: int = 1, **probe: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [backend_container(**probe)]},
            },
        },
    }


def simple_pod(name: str, command: list[str], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": "ignored", "command": command}], **spec},
    }


def condition(pod: client.V1Pod, ctype: str) -> str | None:
    for c in pod.status.conditions or []:
        if c.type == ctype:
            return c.status
    return None


def make_service(cluster: Cluster, ns: str, name: str, selector: dict[str, str]) -> None:
    cluster.core.create_namespaced_service(
        ns,
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name},
            "spec": {
                "selector": selector,
                "ports": [{"name": "p", "port": 80, "targetPort": 8080}],
            },
        },
    )


def endpoint_conditions(cluster: Cluster, ns: str, service: str) -> list[tuple[bool, bool, bool]]:
    """(ready, serving, terminating) of every endpoint in the Service's slices."""
    slices = cluster.discovery.list_namespaced_endpoint_slice(
        ns, label_selector=f"kubernetes.io/service-name={service}"
    ).items
    return [
        (e.conditions.ready, e.conditions.serving, e.conditions.terminating)
        for s in slices
        for e in s.endpoints or []
    ]


def pod_processes(cluster: Cluster, uid: str) -> list[int]:
    return pids_with_env(**{MARKER_ENV: str(cluster.state_dir), "POD_UID": uid})


def test_deployment_ready_with_endpoint_slice_and_traffic(cluster: Cluster, ns: str) -> None:
    cluster.apps.create_namespaced_deployment(ns, deployment("web"))
    cluster.core.create_namespaced_service(
        ns,
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "web"},
            "spec": {
                "selector": {"app": "web"},
                "ports": [{"name": "http", "port": 80, "targetPort": "http"}],
            },
        },
    )
    dep = wait_for(
        lambda: (
            (d := cluster.apps.read_namespaced_deployment("web", ns)).status.ready_replicas == 1
            and d
        ),
        what="deployment ready",
    )
    assert dep.status.observed_generation == dep.metadata.generation
    assert dep.status.updated_replicas == 1 and dep.status.available_replicas == 1
    [pod] = cluster.core.list_namespaced_pod(ns, label_selector="app=web").items
    ip = pod.status.pod_ip
    assert ipaddress.ip_address(ip) in ipaddress.ip_network("127.0.0.0/8")
    assert ip != "127.0.0.1"
    assert pod.spec.node_name == cluster.node.node_name
    assert pod.metadata.labels["pod-template-hash"]
    assert [c.restart_count for c in pod.status.container_statuses] == [0]

    def ready_slice() -> client.V1EndpointSlice | None:
        slices = cluster.discovery.list_namespaced_endpoint_slice(
            ns, label_selector="kubernetes.io/service-name=web"
        ).items
        for s in slices:
            for e in s.endpoints or []:
                if e.conditions.ready:
                    return s
        return None

    sl = wait_for(ready_slice, what="ready endpoint")
    [endpoint] = sl.endpoints
    assert endpoint.addresses == [ip]
    assert endpoint.target_ref.name == pod.metadata.name
    assert endpoint.target_ref.uid == pod.metadata.uid
    assert (endpoint.conditions.serving, endpoint.conditions.terminating) == (True, False)
    assert [(p.name, p.port, p.protocol) for p in sl.ports] == [("http", 8080, "TCP")]
    assert sl.metadata.owner_references[0].name == "web"

    with urllib.request.urlopen(f"http://{ip}:8080/probe/path", timeout=5) as resp:
        body = json.loads(resp.read())
    assert body["pod"] == pod.metadata.name
    assert body["path"] == "/probe/path"
    log = cluster.state_dir / "pods" / ns / pod.metadata.name / "web.log"
    assert "GET /probe/path" in log.read_text()
    assert "GET /probe/path" in cluster.core.read_namespaced_pod_log(pod.metadata.name, ns)


def test_readiness_gate_holds_ready_until_condition_true(cluster: Cluster, ns: str) -> None:
    pod = simple_pod("gated", ["sleep", "600"], readinessGates=[{"conditionType": GATE}])
    pod["metadata"]["labels"] = {"app": "gated"}
    make_service(cluster, ns, "gated", {"app": "gated"})
    cluster.core.create_namespaced_pod(ns, pod)
    got = wait_for(
        lambda: (
            condition(p := cluster.core.read_namespaced_pod("gated", ns), "ContainersReady")
            == "True"
            and p
        ),
        what="containers ready",
    )
    ready = next(c for c in got.status.conditions if c.type == "Ready")
    assert (ready.status, ready.reason) == ("False", "ReadinessGatesNotReady")
    assert got.status.phase == "Running"
    assert got.spec.node_name == cluster.node.node_name  # bound by the node's scheduler
    assert condition(got, "PodScheduled") == "True"
    wait_for(
        lambda: endpoint_conditions(cluster, ns, "gated") == [(False, False, False)],
        what="not-ready endpoint",
    )
    # The gate condition written by another manager: first False, still not Ready.
    for status in ("False", "True"):
        cluster.core.patch_namespaced_pod_status(
            "gated",
            ns,
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "gated"},
                "status": {"conditions": [{"type": GATE, "status": status}]},
            },
            field_manager="haptic-deployed",
            force=True,
            _content_type="application/apply-patch+yaml",
        )
        if status == "False":
            p = wait_for(
                lambda: (
                    condition(p := cluster.core.read_namespaced_pod("gated", ns), GATE) == "False"
                    and p
                ),
                what="gate False recorded",
            )
            assert condition(p, "Ready") == "False"
    p = wait_for(
        lambda: (
            condition(p := cluster.core.read_namespaced_pod("gated", ns), "Ready") == "True" and p
        ),
        what="Ready after gate",
    )

    def event_reasons() -> set[str]:
        events = cluster.core.list_namespaced_event(ns).items
        return {e.reason for e in events if e.involved_object.name == "gated"}

    wait_for(lambda: event_reasons() >= {"Scheduled", "Started"}, what="lifecycle events")
    # The node's own status writes kept the other manager's condition.
    assert condition(p, GATE) == "True"
    assert condition(p, "ContainersReady") == "True"
    wait_for(
        lambda: endpoint_conditions(cluster, ns, "gated") == [(True, True, False)],
        what="ready endpoint",
    )


def test_one_replica_rolling_restart_orders_ready_before_delete(cluster: Cluster, ns: str) -> None:
    cluster.apps.create_namespaced_deployment(ns, deployment("roll", initialDelaySeconds=1))
    wait_for(
        lambda: cluster.apps.read_namespaced_deployment("roll", ns).status.ready_replicas == 1,
        what="first pod ready",
    )
    [old] = cluster.core.list_namespaced_pod(ns).items
    start_rv = cluster.core.list_namespaced_pod(ns).metadata.resource_version
    events: list[tuple[int, str, str, bool, bool]] = []  # rv, type, name, ready, terminating
    stop = threading.Event()

    def collect() -> None:
        rv = start_rv
        while not stop.is_set():
            w = watch.Watch()
            try:
                for ev in w.stream(
                    cluster.core.list_namespaced_pod, ns, resource_version=rv, _request_timeout=3
                ):
                    obj = ev["object"]
                    rv = obj.metadata.resource_version
                    events.append(
                        (
                            int(rv),
                            ev["type"],
                            obj.metadata.name,
                            condition(obj, "Ready") == "True",
                            obj.metadata.deletion_timestamp is not None,
                        )
                    )
                    if stop.is_set():
                        return
            except Exception:  # read timeout on an idle watch: resume from rv
                continue

    thread = threading.Thread(target=collect, daemon=True)
    thread.start()
    try:
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        cluster.apps.patch_namespaced_deployment(
            "roll",
            ns,
            {
                "spec": {
                    "template": {
                        "metadata": {"annotations": {"kubectl.kubernetes.io/restartedAt": stamp}}
                    }
                }
            },
            _content_type="application/strategic-merge-patch+json",
        )

        def rolled() -> bool:
            pods = cluster.core.list_namespaced_pod(ns).items
            dep = cluster.apps.read_namespaced_deployment("roll", ns)
            return (
                len(pods) == 1
                and pods[0].metadata.name != old.metadata.name
                and dep.status.updated_replicas == 1
                and dep.status.ready_replicas == 1
                and dep.status.replicas == 1
            )

        wait_for(rolled, timeout=60, what="rollout complete")
        wait_for(
            lambda: any(e[1] == "DELETED" and e[2] == old.metadata.name for e in events),
            what="old pod deletion seen",
        )
    finally:
        stop.set()
    [new] = cluster.core.list_namespaced_pod(ns).items
    assert new.metadata.labels["pod-template-hash"] != old.metadata.labels["pod-template-hash"]
    new_ready_rv = min(e[0] for e in events if e[2] == new.metadata.name and e[3])
    old_gone_rv = min(
        e[0] for e in events if e[2] == old.metadata.name and (e[4] or e[1] == "DELETED")
    )
    created_rv = min(e[0] for e in events if e[2] == new.metadata.name)
    # New pod created first, Ready next, and only then was the old one told to go.
    assert created_rv < new_ready_rv < old_gone_rv


def test_delete_with_grace_zero_kills_at_once(cluster: Cluster, ns: str) -> None:
    # Ignores SIGTERM and asks for a long grace period: only an immediate SIGKILL ends it soon.
    pod = simple_pod(
        "stubborn",
        ["sh", "-c", "trap '' TERM; sleep 600 & wait; sleep 600"],
        terminationGracePeriodSeconds=120,
    )
    created = cluster.core.create_namespaced_pod(ns, pod)
    uid = created.metadata.uid
    wait_for(lambda: len(pod_processes(cluster, uid)) >= 2, what="processes running")
    cluster.core.delete_namespaced_pod("stubborn", ns, grace_period_seconds=0)
    wait_for(lambda: not pod_processes(cluster, uid), timeout=15, what="processes killed")
    assert not cluster.core.list_namespaced_pod(ns).items


def test_graceful_delete_runs_pre_stop_then_kills_after_grace(cluster: Cluster, ns: str) -> None:
    pod = simple_pod(
        "graceful", ["sh", "-c", "trap 'echo got-term' TERM; while :; do sleep 0.2; done"]
    )
    pod["spec"]["terminationGracePeriodSeconds"] = 5
    pod["metadata"]["labels"] = {"app": "graceful"}
    make_service(cluster, ns, "graceful", {"app": "graceful"})
    pod["spec"]["containers"][0]["lifecycle"] = {
        "preStop": {"exec": {"command": ["sh", "-c", "echo prestop > prestop.txt"]}}
    }
    created = cluster.core.create_namespaced_pod(ns, pod)
    uid = created.metadata.uid
    wait_for(lambda: pod_processes(cluster, uid), what="process running")
    wait_for(
        lambda: endpoint_conditions(cluster, ns, "graceful") == [(True, True, False)],
        what="ready endpoint",
    )
    cluster.core.delete_namespaced_pod("graceful", ns)
    pod_dir = cluster.state_dir / "pods" / ns / "graceful"
    # While the grace period runs, the pod is still there, terminating, its process alive.
    terminating = cluster.core.read_namespaced_pod("graceful", ns)
    assert terminating.metadata.deletion_timestamp is not None
    assert terminating.metadata.deletion_grace_period_seconds == 5
    # A terminating endpoint is no longer ready but still serving.
    wait_for(
        lambda: endpoint_conditions(cluster, ns, "graceful") == [(False, True, True)],
        what="terminating endpoint",
    )
    wait_for(lambda: "got-term" in (pod_dir / "main.log").read_text(), what="SIGTERM delivered")
    assert (pod_dir / "prestop.txt").read_text().strip() == "prestop"
    wait_for(lambda: not cluster.core.list_namespaced_pod(ns).items, what="pod finalized")
    assert not pod_processes(cluster, uid)


def test_crashed_container_restarts_and_count_grows(cluster: Cluster, ns: str) -> None:
    cluster.core.create_namespaced_pod(
        ns, simple_pod("crashy", ["sh", "-c", "echo run-$POD_NAME; exit 3"])
    )

    def restarted_twice() -> client.V1ContainerStatus | None:
        statuses = cluster.core.read_namespaced_pod("crashy", ns).status.container_statuses
        return statuses and statuses[0].restart_count >= 2 and statuses[0]

    status = wait_for(restarted_twice, timeout=45, what="restartCount >= 2")
    assert status.last_state.terminated.exit_code == 3
    log = cluster.state_dir / "pods" / ns / "crashy" / "main.log"
    wait_for(lambda: log.read_text().count("run-crashy") >= 3, what="three runs' output")
    pod = cluster.core.read_namespaced_pod("crashy", ns)
    assert pod.status.phase == "Running"
    # Between runs it waits in back-off (unless caught in one of its short runs).
    state = pod.status.container_statuses[0].state
    assert state.running is not None or state.waiting.reason == "CrashLoopBackOff"


def test_env_and_missing_command(cluster: Cluster, ns: str) -> None:
    cluster.core.create_namespaced_config_map(
        ns,
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "cfg"},
            "data": {"k": "from-cm"},
        },
    )
    pod = simple_pod("envy", ["sh", "-c", "env > env.tmp && mv env.tmp env.txt; sleep 600"])
    pod["spec"]["containers"][0]["env"] = [
        {"name": "GREETING", "value": "hi-$(POD_NAME)"},
        {"name": "MY_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "CM", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "k"}}},
    ]
    pod["spec"]["containers"].append({"name": "noimage", "image": "nginx"})
    cluster.core.create_namespaced_pod(ns, pod)
    env_file = cluster.state_dir / "pods" / ns / "envy" / "env.txt"
    wait_for(lambda: env_file.exists() and "CM=" in env_file.read_text(), what="env written")
    env = dict(line.split("=", 1) for line in env_file.read_text().splitlines() if "=" in line)
    p = wait_for(
        lambda: (p := cluster.core.read_namespaced_pod("envy", ns)).status.pod_ip and p,
        what="pod ip",
    )
    assert env["GREETING"] == "hi-envy"
    assert env["MY_IP"] == env["POD_IP"] == p.status.pod_ip
    assert env["CM"] == "from-cm"
    assert env["POD_UID"] == p.metadata.uid and env["POD_NAMESPACE"] == ns

    def waiting_noimage() -> Any:
        pod = cluster.core.read_namespaced_pod("envy", ns)
        for s in pod.status.container_statuses or []:
            if s.name == "noimage" and s.state.waiting:
                return s.state.waiting
        return None

    waiting = wait_for(waiting_noimage, what="noimage waiting")
    assert waiting.reason == "CreateContainerConfigError"
    assert "command" in waiting.message


def test_scale_up_and_down(cluster: Cluster, ns: str) -> None:
    cluster.apps.create_namespaced_deployment(ns, deployment("scaled", replicas=3))
    wait_for(
        lambda: cluster.apps.read_namespaced_deployment("scaled", ns).status.ready_replicas == 3,
        timeout=60,
        what="3 ready",
    )
    pods = cluster.core.list_namespaced_pod(ns).items
    ips = {p.status.pod_ip for p in pods}
    assert len(ips) == 3
    for ip in ips:
        with urllib.request.urlopen(f"http://{ip}:8080/", timeout=5) as resp:
            assert json.loads(resp.read())["ip"] == ip
    cluster.apps.patch_namespaced_deployment(
        "scaled", ns, {"spec": {"replicas": 1}}, _content_type="application/merge-patch+json"
    )

    def scaled_down() -> bool:
        dep = cluster.apps.read_namespaced_deployment("scaled", ns)
        return len(cluster.core.list_namespaced_pod(ns).items) == 1 and dep.status.replicas == 1

    wait_for(scaled_down, timeout=60, what="scaled to 1")


def test_failing_liveness_probe_restarts_the_container(cluster: Cluster, ns: str) -> None:
    pod = simple_pod("unhealthy", ["sh", "-c", "echo start-$POD_NAME; exec sleep 600"])
    pod["spec"]["terminationGracePeriodSeconds"] = 1
    pod["spec"]["containers"][0]["livenessProbe"] = {
        "exec": {"command": ["test", "-f", "healthy"]},
        "periodSeconds": 1,
        "failureThreshold": 2,
    }
    cluster.core.create_namespaced_pod(ns, pod)

    def restarted() -> client.V1ContainerStatus | None:
        statuses = cluster.core.read_namespaced_pod("unhealthy", ns).status.container_statuses
        return statuses and statuses[0].restart_count >= 1 and statuses[0]

    status = wait_for(restarted, timeout=45, what="liveness restart")
    assert status.last_state.terminated is not None
    log = cluster.state_dir / "pods" / ns / "unhealthy" / "main.log"
    # restartCount moves when the process is spawned; its output follows.
    wait_for(lambda: log.read_text().count("start-unhealthy") >= 2, what="second run's output")
    # A healthy container is left alone: once the file exists no more restarts happen.
    (cluster.state_dir / "pods" / ns / "unhealthy" / "healthy").write_text("ok")
    count = cluster.core.read_namespaced_pod("unhealthy", ns).status.container_statuses[0]
    wait_for(
        lambda: (
            cluster.core.read_namespaced_pod("unhealthy", ns).status.container_statuses[0].ready
        ),
        what="ready again",
    )
    assert (
        cluster.core.read_namespaced_pod("unhealthy", ns).status.container_statuses[0].restart_count
        <= count.restart_count + 1
    )


def set_gate(cluster: Cluster, ns: str, pod_name: str, status: str) -> None:
    """What the controller's status applier does: SSA of one condition, own field manager."""
    cluster.core.patch_namespaced_pod_status(
        pod_name,
        ns,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": pod_name},
            "status": {"conditions": [{"type": GATE, "status": status}]},
        },
        field_manager="haptic-deployed",
        force=True,
        _content_type="application/apply-patch+yaml",
    )


def test_gated_rollout_keeps_old_pod_until_gate_is_true(cluster: Cluster, ns: str) -> None:
    """ADR-0034: with the gate in the template, a one-replica rollout waits for the gate."""
    dep = deployment("gated")
    dep["spec"]["template"]["spec"]["readinessGates"] = [{"conditionType": GATE}]
    cluster.apps.create_namespaced_deployment(ns, dep)
    [first] = wait_for(lambda: cluster.core.list_namespaced_pod(ns).items, what="first pod")
    wait_for(
        lambda: (
            condition(cluster.core.read_namespaced_pod(first.metadata.name, ns), "ContainersReady")
            == "True"
        ),
        what="first containers ready",
    )
    assert cluster.apps.read_namespaced_deployment("gated", ns).status.ready_replicas in (0, None)
    set_gate(cluster, ns, first.metadata.name, "True")
    wait_for(
        lambda: cluster.apps.read_namespaced_deployment("gated", ns).status.ready_replicas == 1,
        what="gated pod ready",
    )
    cluster.apps.patch_namespaced_deployment(
        "gated",
        ns,
        {
            "spec": {
                "template": {
                    "metadata": {"annotations": {"kubectl.kubernetes.io/restartedAt": "x"}}
                }
            }
        },
        _content_type="application/strategic-merge-patch+json",
    )

    def new_pod() -> client.V1Pod | None:
        for p in cluster.core.list_namespaced_pod(ns).items:
            if p.metadata.name != first.metadata.name and condition(p, "ContainersReady") == "True":
                return p
        return None

    second = wait_for(new_pod, what="new pod with containers ready")
    assert condition(second, "Ready") == "False"
    # However long it waits, the old pod stays while the new one's gate is not True.
    for _ in range(20):
        old = cluster.core.read_namespaced_pod(first.metadata.name, ns)
        assert old.metadata.deletion_timestamp is None
        time.sleep(0.1)
    set_gate(cluster, ns, second.metadata.name, "True")
    wait_for(
        lambda: (
            [p.metadata.name for p in cluster.core.list_namespaced_pod(ns).items]
            == [second.metadata.name]
        ),
        what="old pod gone after the gate",
    )


def test_init_containers_run_first_and_terminal_phases(cluster: Cluster, ns: str) -> None:
    pod = simple_pod("inited", ["sh", "-c", "cat init.txt; sleep 600"])
    pod["spec"]["initContainers"] = [
        {"name": "prep", "image": "x", "command": ["sh", "-c", "echo prepared > init.txt"]}
    ]
    cluster.core.create_namespaced_pod(ns, pod)
    p = wait_for(
        lambda: (
            (p := cluster.core.read_namespaced_pod("inited", ns)).status.phase == "Running" and p
        ),
        what="running after init",
    )
    assert condition(p, "Initialized") == "True"
    assert p.status.init_container_statuses[0].state.terminated.exit_code == 0
    log = cluster.state_dir / "pods" / ns / "inited" / "main.log"
    wait_for(lambda: "prepared" in log.read_text(), what="main saw init output")

    for name, code, phase in (("ok", 0, "Succeeded"), ("bad", 1, "Failed")):
        cluster.core.create_namespaced_pod(
            ns, simple_pod(name, ["sh", "-c", f"exit {code}"], restartPolicy="Never")
        )
        done = wait_for(
            lambda n=name, ph=phase: (
                (p := cluster.core.read_namespaced_pod(n, ns)).status.phase == ph and p
            ),
            what=f"{name} {phase}",
        )
        assert done.status.container_statuses[0].state.terminated.exit_code == code
        assert done.status.container_statuses[0].restart_count == 0


def test_secret_volume_is_readable_at_its_mount_path(cluster: Cluster, ns: str) -> None:
    cluster.core.create_namespaced_secret(
        ns,
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "agent-token"},
            "stringData": {"token": "s3cret"},
        },
    )
    pod = simple_pod(
        "mounted",
        [
            "sh",
            "-c",
            '(cat /var/run/haptic/token; echo; echo "$TOKEN_FILE") > s.tmp; mv s.tmp seen.txt; '
            "sleep 600",
        ],
    )
    container = pod["spec"]["containers"][0]
    container["env"] = [{"name": "TOKEN_FILE", "value": "/var/run/haptic/token"}]
    container["volumeMounts"] = [
        {"name": "token", "mountPath": "/var/run/haptic", "readOnly": True}
    ]
    pod["spec"]["volumes"] = [{"name": "token", "secret": {"secretName": "agent-token"}}]
    cluster.core.create_namespaced_pod(ns, pod)
    seen = cluster.state_dir / "pods" / ns / "mounted" / "seen.txt"

    def both_lines() -> bool:
        return seen.exists() and len(seen.read_text().splitlines()) == 2

    wait_for(both_lines, what="seen.txt")
    content, path = seen.read_text().splitlines()
    assert content == "s3cret"
    assert Path(path).read_text() == "s3cret"


def test_recreate_strategy_removes_old_pods_before_creating_new(cluster: Cluster, ns: str) -> None:
    dep = deployment("recreated", replicas=2)
    dep["spec"]["strategy"] = {"type": "Recreate"}
    cluster.apps.create_namespaced_deployment(ns, dep)
    wait_for(
        lambda: cluster.apps.read_namespaced_deployment("recreated", ns).status.ready_replicas == 2,
        timeout=60,
        what="2 ready",
    )
    old = {p.metadata.name for p in cluster.core.list_namespaced_pod(ns).items}
    snapshots: list[set[str]] = []
    cluster.apps.patch_namespaced_deployment(
        "recreated",
        ns,
        {
            "spec": {
                "template": {
                    "metadata": {"annotations": {"kubectl.kubernetes.io/restartedAt": "y"}}
                }
            }
        },
        _content_type="application/strategic-merge-patch+json",
    )

    def done() -> bool:
        names = {p.metadata.name for p in cluster.core.list_namespaced_pod(ns).items}
        snapshots.append(names)
        dep = cluster.apps.read_namespaced_deployment("recreated", ns)
        return len(names) == 2 and not names & old and dep.status.ready_replicas == 2

    wait_for(done, timeout=60, what="recreated")
    # No moment showed an old and a new pod side by side.
    assert all(s <= old or not s & old for s in snapshots)

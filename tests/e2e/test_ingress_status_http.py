"""Issue 18 through the whole system (local API server, real HAProxy pods, a controller):
Ingress status as `kubectl get ingress` shows it, and spec.httpResources fetched from a real
HTTP server into the files the HAProxy pods run."""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Iterator

import kubernetes
import pytest

from devstack import stack
from devstack.stack import wait_for
from tests.e2e.harness import System, start_system
from tests.httpstore.conftest import Source, _template, serve_sources

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def system() -> Iterator[System]:
    system = start_system("ingress-status-http", haproxy_replicas=2, controllers=1)
    try:
        system.apply(stack.backend("echo", replicas=1))
        system.apply([stack.ingress("echo", "x.example", "echo")])
        yield system
    finally:
        system.stop()


def _kubectl_address(system: System, name: str) -> str:
    kubeconfig = str(system.api.kubeconfig)
    out = subprocess.run(
        ["kubectl", "--kubeconfig", kubeconfig, "get", "ingress", name, "-n", stack.NAMESPACE],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout.splitlines()
    start = out[0].index("ADDRESS")
    return out[1][start:].split(" ")[0]


def test_kubectl_shows_the_address_once_served_and_none_after(system: System) -> None:
    wait_for(lambda: system.serves("x.example", "echo-"), 120, what="x.example served")
    pod_ips = sorted(p.status.pod_ip for p in system.haproxy_pods(ready_only=False))
    wait_for(
        lambda: _kubectl_address(system, "echo") == ",".join(pod_ips), 60, what="ADDRESS shown"
    )
    # Another controller's class: no longer ours, so it loses the addresses we wrote.
    networking = kubernetes.client.NetworkingV1Api(system.client)
    patch = {"spec": {"ingressClassName": "someone-else"}}
    networking.patch_namespaced_ingress("echo", stack.NAMESPACE, patch)
    wait_for(lambda: _kubectl_address(system, "echo") == "", 60, what="ADDRESS cleared")
    networking.patch_namespaced_ingress(
        "echo", stack.NAMESPACE, {"spec": {"ingressClassName": None}}
    )
    wait_for(lambda: _kubectl_address(system, "echo") == ",".join(pod_ips), 60, what="again")


def test_http_resources_reach_the_pods_and_a_failing_source_keeps_the_body(system: System) -> None:
    sources = {"motd": Source(b"first\n", etag='"1"')}
    with serve_sources(sources) as base:
        custom = kubernetes.client.CustomObjectsApi(system.client)
        patch = _template(base, motd={"refreshInterval": "1s", "timeout": "500ms"})
        patch["spec"]["files"] = {"motd.txt": {"template": "{{ http.motd }}"}}
        custom.patch_namespaced_custom_object(
            "haproxy-haptic.org",
            "v1alpha1",
            stack.NAMESPACE,
            "haproxytemplateconfigs",
            "haptic",
            patch,
        )
        first = hashlib.sha256(b"first\n").hexdigest()
        wait_for(
            lambda: system.file_digests("general/motd.txt") == {first},
            90,
            what="first body on the pods",
        )
        sources["motd"].body, sources["motd"].etag = b"second\n", '"2"'
        second = hashlib.sha256(b"second\n").hexdigest()
        wait_for(
            lambda: system.file_digests("general/motd.txt") == {second},
            60,
            what="second body on the pods",
        )
        assert any(r.get("If-None-Match") == '"1"' for r in sources["motd"].requests)
        # The source breaks: the pods keep the accepted body, /healthz and metrics say so.
        sources["motd"].status, sources["motd"].etag = 500, None
        leader = wait_for(system.leader, 10, what="leader")

        def reported() -> bool:
            error = system.health(leader).json()["components"]["http-store"]["error"]
            return bool(error) and "HTTP 500" in error

        wait_for(reported, 30, what="http-store error on /healthz")
        metrics = system.health(leader, "/metrics").text
        assert 'haptic_http_resource_fetch_errors_total{resource="motd"}' in metrics
        assert system.file_digests("general/motd.txt") == {second}
        events = kubernetes.client.CoreV1Api(system.client).list_namespaced_event(stack.NAMESPACE)
        assert "HTTPResourceFetchFailed" in {e.reason for e in events.items}


def _ingress_entries(system: System, name: str) -> list[dict]:
    ing = kubernetes.client.NetworkingV1Api(system.client).read_namespaced_ingress(
        name, stack.NAMESPACE
    )
    lb = ing.status.load_balancer if ing.status else None
    return [
        {k: v for k, v in (("hostname", e.hostname), ("ip", e.ip)) if v}
        for e in ((lb.ingress if lb else None) or [])
    ]


def test_a_publish_service_in_another_namespace_gives_its_addresses(system: System) -> None:
    # The controller watches Services in every namespace, so the publish Service may live
    # outside the controller's own (docs/annotations.md, "Ingress status").
    wait_for(lambda: system.serves("x.example", "echo-"), 120, what="x.example served")
    core = kubernetes.client.CoreV1Api(system.client)
    core.create_namespace({"metadata": {"name": "edge"}})
    core.create_namespaced_service(
        "edge",
        {
            "metadata": {"name": "haproxy-public"},
            "spec": {
                "type": "LoadBalancer",
                "selector": {"app.kubernetes.io/name": "haproxy"},
                "ports": [{"name": "http", "port": 80, "targetPort": 8080}],
            },
        },
    )
    # What a cloud's load balancer controller would write.
    lb = {"ingress": [{"ip": "203.0.113.10"}, {"hostname": "lb.example.net"}]}
    core.patch_namespaced_service_status("haproxy-public", "edge", {"status": {"loadBalancer": lb}})
    custom = kubernetes.client.CustomObjectsApi(system.client)

    def publish(value: str | None) -> None:
        custom.patch_namespaced_custom_object(
            "haproxy-haptic.org",
            "v1alpha1",
            stack.NAMESPACE,
            "haproxytemplateconfigs",
            "haptic",
            {"spec": {"templateLibraries": {"ingress": {"publishService": value}}}},
        )

    publish("edge/haproxy-public")
    try:
        wanted = [{"hostname": "lb.example.net"}, {"ip": "203.0.113.10"}]
        wait_for(lambda: _ingress_entries(system, "echo") == wanted, 60, what="publish status")
        assert _kubectl_address(system, "echo") == "203.0.113.10,lb.example.net"
    finally:
        publish(None)
    pod_ips = sorted(p.status.pod_ip for p in system.haproxy_pods(ready_only=False))
    wait_for(lambda: _kubectl_address(system, "echo") == ",".join(pod_ips), 60, what="pod IPs")

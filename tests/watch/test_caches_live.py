"""WatchCaches, Reconciler and health endpoints against the local API server over HTTP."""

from __future__ import annotations

import base64
import contextlib
import json
import threading
import urllib.error
import urllib.request

import pytest
from kubernetes import client

from controller.health import RESOURCE_WATCHER, ComponentHealth, HealthServer
from controller.reconciler import DebounceConfig, Reconciler, Trigger
from controller.render.engine import render
from controller.render.model import RenderInput
from controller.render.validate import render_input, run_test
from controller.rendergate import check_output
from controller.watch import (
    BACKEND_PODS,
    HAPROXY_PODS,
    REPLAY,
    ChangeEvent,
    DiscoveredPod,
    WatchCaches,
)
from controller.watch.replica import ReplicaWatch
from devstack.stack import wait_for
from localcluster.testing import ApiServer
from tests.watch.conftest import FAST, service

T = 10
GROUP, VERSION, PLURAL = "haproxy-haptic.org", "v1alpha1", "haproxytemplateconfigs"
GATE = "haproxy-haptic.org/load-balancer-ready"


def template(selector: dict, gate: bool = False, watched: dict | None = None) -> dict:
    spec: dict = {
        "podSelector": {"matchLabels": selector},
        "templateLibraries": {"kubernetesBackends": {"podReadinessGate": {"enabled": gate}}},
    }
    if watched is not None:
        spec["watchedResources"] = watched
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "HAProxyTemplateConfig",
        "metadata": {"name": "haptic"},
        "spec": spec,
    }


def pod(name: str, labels: dict, gated: bool = False) -> dict:
    spec: dict = {"containers": [{"name": "c", "image": "none", "command": ["sleep", "1"]}]}
    if gated:
        spec["readinessGates"] = [{"conditionType": GATE}]
    return {"metadata": {"name": name, "labels": labels}, "spec": spec}


def ingress(name: str) -> dict:
    return {
        "metadata": {"name": name},
        "spec": {
            "rules": [
                {
                    "host": f"{name}.example",
                    "http": {
                        "paths": [
                            {
                                "path": "/",
                                "pathType": "Prefix",
                                "backend": {"service": {"name": "web", "port": {"number": 80}}},
                            }
                        ]
                    },
                }
            ]
        },
    }


def secret(name: str, tls: bool) -> dict:
    b64 = base64.b64encode(b"x").decode()
    if tls:
        return {
            "metadata": {"name": name},
            "type": "kubernetes.io/tls",
            "data": {"tls.crt": b64, "tls.key": b64},
        }
    return {"metadata": {"name": name}, "type": "Opaque", "data": {"k": b64}}


def endpointslice(name: str, svc: str) -> dict:
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/service-name": svc}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["127.0.0.10"], "conditions": {"ready": True}}],
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
    }


class Cluster:
    """Typed clients for the test's writes; the controller namespace and an apps namespace."""

    def __init__(self, ac: client.ApiClient, ctl_ns: str, apps_ns: str) -> None:
        self.core = client.CoreV1Api(ac)
        self.net = client.NetworkingV1Api(ac)
        self.disc = client.DiscoveryV1Api(ac)
        self.custom = client.CustomObjectsApi(ac)
        self.ctl, self.apps = ctl_ns, apps_ns

    def create_template(self, body: dict) -> None:
        self.custom.create_namespaced_custom_object(
            GROUP, VERSION, self.ctl, PLURAL, body, _request_timeout=T
        )

    def patch_template(self, spec: dict) -> None:
        self.custom.patch_namespaced_custom_object(
            GROUP, VERSION, self.ctl, PLURAL, "haptic", {"spec": spec}, _request_timeout=T
        )

    def set_pod_status(self, ns: str, name: str, ip: str, ready: bool) -> None:
        status = {
            "podIP": ip,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        }
        self.core.patch_namespaced_pod_status(name, ns, {"status": status}, _request_timeout=T)


@pytest.fixture
def cluster(api_client, core, namespace) -> Cluster:
    apps = namespace + "-apps"
    core.create_namespace({"metadata": {"name": apps}}, _request_timeout=T)
    return Cluster(api_client, namespace, apps)


@pytest.fixture
def make_caches(api_client):
    started: list[WatchCaches] = []

    def make(cluster: Cluster) -> WatchCaches:
        caches = WatchCaches(
            api_client, cluster.ctl, "haptic", watch_namespace=cluster.apps, config=FAST
        )
        started.append(caches)
        return caches

    yield make
    for caches in started:
        assert caches.stop(timeout=20), "watch caches did not stop"


def test_caches_fill_and_snapshot_is_render_input(cluster, make_caches):
    c = cluster
    c.create_template(template({"app": "haproxy"}))
    c.net.create_namespaced_ingress(c.apps, ingress("b"), _request_timeout=T)
    c.net.create_namespaced_ingress(c.apps, ingress("a"), _request_timeout=T)
    c.core.create_namespaced_service(c.apps, service("web"), _request_timeout=T)
    c.disc.create_namespaced_endpoint_slice(
        c.apps, endpointslice("web-1", "web"), _request_timeout=T
    )
    c.core.create_namespaced_secret(c.apps, secret("tls", True), _request_timeout=T)
    c.core.create_namespaced_secret(c.apps, secret("opaque", False), _request_timeout=T)

    caches = make_caches(c).start()
    assert wait_for(lambda: HAPROXY_PODS in caches.kinds() and caches.synced)
    assert caches.kinds() == [
        "endpointslices",
        HAPROXY_PODS,
        "ingressclasses",
        "ingresses",
        "opaque-secrets",
        "secrets",
        "services",
    ]
    snap = caches.snapshot()
    assert [i["metadata"]["name"] for i in snap.get("ingresses")] == ["a", "b"]
    assert [s["metadata"]["name"] for s in snap.get("secrets")] == ["tls"]
    assert [s["metadata"]["name"] for s in snap.get("opaque-secrets")] == ["opaque"]
    assert snap.template_config["metadata"]["name"] == "haptic"
    assert snap.get("pods") == ()  # backend pods only with the readiness gate
    slices = caches.informer("endpointslices").store.by_index("service-name", f"{c.apps}/web")
    assert [s["metadata"]["name"] for s in slices] == ["web-1"]

    inp = RenderInput(**snap.render_kwargs())
    assert [i["metadata"]["name"] for i in inp.ingresses] == ["a", "b"]
    # Both secret types render (certificates, basic-auth users); the class set is known.
    assert sorted(s["metadata"]["name"] for s in inp.secrets) == ["opaque", "tls"]
    assert inp.ingressclasses == ()
    assert inp.template_config["spec"]["podSelector"] == {"matchLabels": {"app": "haproxy"}}

    # The snapshot is a frozen view: later changes do not leak into it.
    c.net.delete_namespaced_ingress("a", c.apps, _request_timeout=T)
    assert wait_for(lambda: len(caches.snapshot().get("ingresses")) == 1)
    assert len(snap.get("ingresses")) == 2
    with pytest.raises(TypeError):
        snap.objects["ingresses"] = ()  # type: ignore[index]


def test_discovery_publishes_only_real_changes_and_replays(cluster, make_caches):
    c = cluster
    c.create_template(template({"app": "haproxy"}))
    c.core.create_namespaced_pod(c.ctl, pod("hp-0", {"app": "haproxy"}), _request_timeout=T)
    c.core.create_namespaced_pod(c.ctl, pod("other", {"app": "web"}), _request_timeout=T)

    published: list[tuple[DiscoveredPod, ...]] = []
    events: list[ChangeEvent] = []
    caches = make_caches(c)
    caches.subscribe_discovery(published.append)
    caches.subscribe(events.append)
    caches.start()
    assert wait_for(lambda: published and [p.name for p in published[-1]] == ["hp-0"])
    first = published[-1][0]
    assert first.pod_ip is None and not first.ready and first.uid

    c.set_pod_status(c.ctl, "hp-0", "127.0.1.7", ready=True)
    assert wait_for(lambda: published[-1][0].ready)
    assert published[-1][0].pod_ip == "127.0.1.7"
    assert caches.haproxy_pods() == published[-1]

    # Metadata noise is not a discovery change; a second pod is.
    n = len(published)
    c.core.patch_namespaced_pod(
        "hp-0", c.ctl, {"metadata": {"annotations": {"noise": "1"}}}, _request_timeout=T
    )
    c.core.create_namespaced_pod(c.ctl, pod("hp-1", {"app": "haproxy"}), _request_timeout=T)
    assert wait_for(lambda: [p.name for p in published[-1]] == ["hp-0", "hp-1"])
    assert len(published) == n + 1

    # A pod leaving the selector leaves the set.
    c.core.patch_namespaced_pod(
        "hp-1", c.ctl, {"metadata": {"labels": {"app": "web"}}}, _request_timeout=T
    )
    assert wait_for(lambda: [p.name for p in published[-1]] == ["hp-0"])

    # Replay to a new leader: the unchanged set again, and a REPLAY render trigger.
    n = len(published)
    caches.replay()
    assert len(published) == n + 1 and published[-1] == published[-2]
    assert events[-1] == ChangeEvent("templateconfig", REPLAY, None)


def test_workload_cluster_is_watched_apart_from_the_template(cluster, core):
    """Seed 004's topology: the template config comes from the control plane's own cluster,
    the Ingresses and HAProxy pods from the shared workload cluster (another API server)."""
    c = cluster
    c.create_template(template({"app": "haproxy"}))
    # Decoys in the control plane's cluster: never part of the view.
    c.net.create_namespaced_ingress(c.apps, ingress("local-only"), _request_timeout=T)
    c.core.create_namespaced_pod(c.ctl, pod("hp-local", {"app": "haproxy"}), _request_timeout=T)
    with ApiServer.start() as workload:
        wac = workload.api_client()
        wac.configuration.retries = False
        w = Cluster(wac, c.ctl, c.apps)
        for ns in (c.ctl, c.apps):
            w.core.create_namespace({"metadata": {"name": ns}}, _request_timeout=T)
        w.net.create_namespaced_ingress(c.apps, ingress("shared"), _request_timeout=T)
        w.core.create_namespaced_pod(c.ctl, pod("hp-0", {"app": "haproxy"}), _request_timeout=T)
        caches = WatchCaches(
            cluster.core.api_client, c.ctl, "haptic", watch_namespace=c.apps, config=FAST,
            workload_client=wac,
        )  # fmt: skip
        caches.start()
        try:
            # kinds() before synced: read the other way round, a pod informer added between
            # the two reads counted as synced before its first list (failed once in CI).
            assert wait_for(lambda: HAPROXY_PODS in caches.kinds() and caches.synced)
            snap = caches.snapshot()
            assert snap.template_config["metadata"]["name"] == "haptic"
            assert [i["metadata"]["name"] for i in snap.get("ingresses")] == ["shared"]
            assert [p.name for p in caches.haproxy_pods()] == ["hp-0"]
            # Changes in the workload cluster flow in; the template still comes from ours.
            w.net.create_namespaced_ingress(c.apps, ingress("later"), _request_timeout=T)
            assert wait_for(lambda: len(caches.snapshot().get("ingresses")) == 2)
            c.patch_template({"podSelector": {"matchLabels": {"app": "haproxy2"}}})
            assert wait_for(lambda: caches.haproxy_pods() == ())
        finally:
            assert caches.stop(timeout=20)
        wac.close()


def test_template_changes_start_and_stop_watches(cluster, make_caches):
    c = cluster
    c.create_template(template({"app": "haproxy"}))
    c.core.create_namespaced_pod(c.ctl, pod("hp-a", {"app": "haproxy"}), _request_timeout=T)
    c.core.create_namespaced_pod(c.ctl, pod("hp-b", {"app": "haproxy-b"}), _request_timeout=T)
    c.core.create_namespaced_pod(
        c.apps, pod("web-1", {"app": "web"}, gated=True), _request_timeout=T
    )
    c.core.create_namespaced_pod(c.apps, pod("web-2", {"app": "web"}), _request_timeout=T)
    c.core.create_namespaced_config_map(c.apps, {"metadata": {"name": "cm"}}, _request_timeout=T)
    published: list[tuple[DiscoveredPod, ...]] = []
    caches = make_caches(c)
    caches.subscribe_discovery(published.append)
    caches.start()
    assert wait_for(lambda: HAPROXY_PODS in caches.kinds() and caches.synced)
    assert BACKEND_PODS not in caches.kinds()
    old_ingresses = caches.informer("ingresses")

    # Gate on, selector changed, an extra watched resource.
    c.patch_template(
        {
            "podSelector": {"matchLabels": {"app": "haproxy-b"}},
            "templateLibraries": {"kubernetesBackends": {"podReadinessGate": {"enabled": True}}},
            "watchedResources": {
                "configmaps": {"apiVersion": "v1", "resources": "configmaps"},
            },
        }
    )
    assert wait_for(lambda: {BACKEND_PODS, "configmaps"} <= set(caches.kinds()) and caches.synced)
    assert wait_for(lambda: [p.name for p in caches.haproxy_pods()] == ["hp-b"])
    assert wait_for(lambda: [p.name for p in published[-1]] == ["hp-b"])
    snap = caches.snapshot()
    assert [p["metadata"]["name"] for p in snap.get("pods")] == ["web-1", "web-2"]
    gated = caches.informer(BACKEND_PODS).store.by_index("readiness-gate", GATE)
    assert [p["metadata"]["name"] for p in gated] == ["web-1"]
    assert [o["metadata"]["name"] for o in snap.render_kwargs()["resources"]["configmaps"]] == [
        "cm"
    ]
    # Watches whose definition did not change kept running (their caches stayed hot).
    assert caches.informer("ingresses") is old_ingresses

    # Gate off and the extra gone: their watches stop.
    c.patch_template(
        {
            "templateLibraries": {"kubernetesBackends": {"podReadinessGate": {"enabled": False}}},
            "watchedResources": None,
        }
    )
    assert wait_for(lambda: BACKEND_PODS not in caches.kinds())
    assert "configmaps" not in caches.kinds()
    assert caches.snapshot().get("pods") == ()


def test_reconciler_renders_once_caches_settle(cluster, make_caches):
    c = cluster
    c.create_template(template({"app": "haproxy"}))
    caches = make_caches(c)
    seen: list[tuple[Trigger, int]] = []
    lock = threading.Lock()

    def render(trig: Trigger) -> None:
        with lock:
            seen.append((trig, len(caches.snapshot().get("ingresses"))))

    reconciler = Reconciler(render, DebounceConfig(default_delay=0.3, max_wait=2.0)).start()
    try:
        caches.subscribe(reconciler.on_change)
        caches.start()
        assert wait_for(lambda: caches.synced and seen)  # the initial lists trigger a render
        for i in range(5):
            c.net.create_namespaced_ingress(c.apps, ingress(f"i{i}"), _request_timeout=T)
        assert wait_for(lambda: seen[-1][1] == 5)
        assert any("ingresses" in t.kinds for t, _ in seen)
        # A new leader's replay renders at once, with nothing changed.
        n = len(seen)
        caches.replay()
        assert wait_for(lambda: len(seen) > n)
        assert seen[-1][0].reason == "immediate"
    finally:
        assert reconciler.stop()


def http_get(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_health_endpoints_follow_the_caches(cluster, make_caches, api):
    c = cluster
    c.create_template(template({"app": "haproxy"}))
    caches = make_caches(c)
    health = ComponentHealth()
    health.register_probe(RESOURCE_WATCHER, caches.health_error)
    health.add_readiness_check("caches-synced", lambda: caches.synced)
    server = HealthServer(health, "127.0.0.1", 0).start()
    try:
        assert http_get(server.url + "/readyz")[0] == 503  # not started: not synced
        caches.start()
        assert wait_for(lambda: http_get(server.url + "/readyz")[0] == 200)
        status, body = http_get(server.url + "/healthz")
        assert status == 200 and body["components"][RESOURCE_WATCHER]["error"] is None

        # The API server stops answering ingress reads: reported, but still healthy (200).
        api.add_fault(path_regex=f"/namespaces/{c.apps}/ingresses", methods=["GET"], blackhole=True)
        try:
            assert wait_for(lambda: not caches.informer("ingresses").cut_watch())

            def ingress_error():
                status, body = http_get(server.url + "/healthz")
                err = body["components"][RESOURCE_WATCHER]["error"]
                return status == 200 and err and "ingresses" in err

            assert wait_for(ingress_error, timeout=40)
        finally:
            api.clear_faults()
        c.net.create_namespaced_ingress(c.apps, ingress("back"), _request_timeout=T)

        def healed():
            body = http_get(server.url + "/healthz")[1]
            return body["components"][RESOURCE_WATCHER]["error"] is None

        assert wait_for(healed, timeout=30)
        metrics = urllib.request.urlopen(server.url + "/metrics", timeout=10).read().decode()
        assert 'haptic_watch_errors_total{kind="ingresses"}' in metrics
    finally:
        server.stop()


def test_replica_watch_replays_to_a_new_leader_and_followers_drop_triggers(api_client, cluster):
    c = cluster
    c.create_template(template({"app": "haproxy"}))
    c.core.create_namespaced_pod(c.ctl, pod("hp-0", {"app": "haproxy"}), _request_timeout=T)
    rw = ReplicaWatch(
        api_client,
        c.ctl,
        watch_namespace=c.apps,
        informer_config=FAST,
        debounce=DebounceConfig(default_delay=0.05, max_wait=0.5),
        health_address=("127.0.0.1", 0),
    ).start()
    try:
        assert wait_for(lambda: rw.caches.synced and rw.caches.haproxy_pods())
        assert wait_for(lambda: rw.reconciler.fired >= 1)  # a follower: fired, dropped
        assert http_get(rw.server.url + "/readyz")[0] == 200

        triggers: list[Trigger] = []
        pods: list[tuple[DiscoveredPod, ...]] = []
        rw.attach_leader(triggers.append, pods.append)
        assert [p.name for p in pods[-1]] == ["hp-0"]  # replayed at once
        assert wait_for(lambda: any(t.reason == "immediate" for t in triggers))

        c.net.create_namespaced_ingress(c.apps, ingress("lead"), _request_timeout=T)
        assert wait_for(lambda: any("ingresses" in t.kinds for t in triggers))

        rw.detach_leader()
        n, fired = len(triggers), rw.reconciler.fired
        c.net.create_namespaced_ingress(c.apps, ingress("follow"), _request_timeout=T)
        assert wait_for(lambda: rw.reconciler.fired > fired)
        assert len(triggers) == n
    finally:
        assert rw.stop()


def test_template_status_writes_are_not_template_changes(cluster, make_caches):
    c = cluster
    c.create_template(template({"app": "haproxy"}))
    events: list[ChangeEvent] = []
    caches = make_caches(c)
    caches.subscribe(lambda ev: events.append(ev) if ev.kind == "templateconfig" else None)
    caches.start()
    assert wait_for(lambda: caches.synced)
    start = len(events)
    # What the leader writes after a render: status only.
    c.custom.patch_namespaced_custom_object_status(
        GROUP,
        VERSION,
        c.ctl,
        PLURAL,
        "haptic",
        {"status": {"lastRenderedAt": "2026-01-01T00:00:00Z"}},
        _request_timeout=T,
    )
    # A spec change afterwards: same watch, so its event comes after the status one.
    c.patch_template({"extraContext": {"marker": "1"}})
    assert wait_for(
        lambda: any(
            (e.obj or {}).get("spec", {}).get("extraContext") == {"marker": "1"}
            for e in events[start:]
        )
    )
    assert wait_for(lambda: (caches.template_config or {}).get("status"))
    modified = [e for e in events[start:] if e.type == "MODIFIED"]
    assert len(modified) == 1 and modified[0].obj["spec"]["extraContext"] == {"marker": "1"}


def test_ingress_classes_are_watched_and_decide_what_renders(cluster, make_caches, namespace):
    # The class set is part of the render input: adding our class serves the Ingresses that
    # name it (or name none, when it is the default), removing it stops serving them.
    from controller.render import render

    c = cluster
    cls_name = f"{namespace}-cls"
    c.create_template(template({"app": "haproxy"}))
    named = ingress("named")
    named["spec"]["ingressClassName"] = cls_name
    c.net.create_namespaced_ingress(c.apps, named, _request_timeout=T)
    c.net.create_namespaced_ingress(c.apps, ingress("unnamed"), _request_timeout=T)
    caches = make_caches(c)
    hosts: list[set[str]] = []
    lock = threading.Lock()

    def on_trigger(trig: Trigger) -> None:
        out = render(RenderInput(**caches.snapshot().render_kwargs()))
        with lock:
            hosts.append(set(out.plan["maps"]["maps/hosts.map"]))

    reconciler = Reconciler(on_trigger, DebounceConfig(default_delay=0.1, max_wait=1.0)).start()
    classes = client.NetworkingV1Api(c.core.api_client)
    try:
        caches.subscribe(reconciler.on_change)
        caches.start()
        assert wait_for(lambda: caches.synced and hosts)
        assert hosts[-1] == set()  # no class of ours: nothing is served
        body = {
            "metadata": {
                "name": cls_name,
                "annotations": {"ingressclass.kubernetes.io/is-default-class": "true"},
            },
            "spec": {"controller": "haproxy-haptic.org/controller"},
        }
        classes.create_ingress_class(body, _request_timeout=T)
        assert wait_for(lambda: hosts[-1] == {"named.example", "unnamed.example"})
        classes.delete_ingress_class(cls_name, _request_timeout=T)
        assert wait_for(lambda: hosts[-1] == set())
    finally:
        assert reconciler.stop()
        with contextlib.suppress(client.ApiException):
            classes.delete_ingress_class(cls_name, _request_timeout=T)


def test_a_validation_fixture_of_a_watched_kind_renders_as_the_watched_object(cluster, make_caches):
    # Issue 18: spec.validationTests fixtures of a spec.watchedResources kind reach the
    # template where the controller's watch puts the real objects (resources.<name>).
    c = cluster
    spec = template(
        {"app": "haproxy"}, watched={"blocked": {"apiVersion": "v1", "resources": "configmaps"}}
    )
    spec["spec"]["haproxyConfig"] = {
        "template": '{% include "haproxy.cfg.j2" %}\n# blocked:'
        " {% for cm in resources.blocked %}{{ cm.metadata.name }}={{ cm.data.path }}"
        " {% endfor %}.\n"  # a block tag eats the newline after it (trim_blocks)
    }
    c.create_template(spec)
    fixture = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"namespace": c.apps, "name": "deny-admin", "labels": {"role": "deny"}},
        "data": {"path": "/admin"},
    }
    c.core.create_namespaced_config_map(c.apps, fixture, _request_timeout=T)
    caches = make_caches(c).start()
    assert wait_for(lambda: "blocked" in caches.kinds() and caches.synced)
    assert wait_for(lambda: caches.snapshot().render_kwargs()["resources"].get("blocked"))
    snap = caches.snapshot()
    watched = render(RenderInput(**snap.render_kwargs())).config
    assert b"# blocked: " in watched and b"deny-admin=/admin" in watched

    template_config = snap.template_config
    offline = render(render_input(template_config, [fixture])).config
    assert offline == watched
    test = {
        "fixtures": [fixture],
        "assertions": [
            {"type": "jsonpath", "path": "$.resources.blocked[0].data.path", "equals": "/admin"},
            {"type": "haproxyValid"},
        ],
    }
    result = run_test(
        "watched", template_config, test, lambda out: (check_output(out).accepted, "")
    )
    assert result.passed, result.failures

"""What the caches watch for a template config, the discovery view, snapshots (no I/O)."""

from __future__ import annotations

from types import MappingProxyType

from hypothesis import given
from hypothesis import strategies as st

from controller.watch import BACKEND_PODS, HAPROXY_PODS, Snapshot, desired_resources
from controller.watch.discovery import discovered_pod, discovered_set
from controller.watch.resources import ResourceRef, template_config_ref

FIXED = ["endpointslices", "ingressclasses", "ingresses", "opaque-secrets", "secrets", "services"]


def spec(**kw) -> dict:
    return {"spec": kw}


def test_without_a_template_only_the_fixed_kinds_are_watched():
    refs, problems = desired_resources(None, "haptic", None)
    assert sorted(refs) == FIXED and problems == []
    assert refs["secrets"].field_selector == "type=kubernetes.io/tls"
    assert refs["opaque-secrets"].field_selector == "type=Opaque"
    assert refs["ingresses"].collection_path() == "/apis/networking.k8s.io/v1/ingresses"
    assert refs["services"].collection_path() == "/api/v1/services"


def test_haproxy_pods_follow_the_selector_in_the_controller_namespace():
    refs, _ = desired_resources(
        spec(podSelector={"matchLabels": {"app": "haproxy", "fleet": "a"}}), "haptic", "apps"
    )
    pods = refs[HAPROXY_PODS]
    assert pods == ResourceRef(HAPROXY_PODS, "v1", "pods", "haptic", "app=haproxy,fleet=a")
    assert pods.collection_path() == "/api/v1/namespaces/haptic/pods"
    assert refs["ingresses"].namespace == "apps"
    # IngressClasses are cluster-scoped: watched cluster-wide whatever the watch namespace.
    assert refs["ingressclasses"].namespace is None
    assert refs["ingressclasses"].collection_path() == "/apis/networking.k8s.io/v1/ingressclasses"
    # An empty selector would select every pod: never a deployment target.
    refs, _ = desired_resources(spec(podSelector={"matchLabels": {}}), "haptic", None)
    assert HAPROXY_PODS not in refs


def test_backend_pods_only_with_the_readiness_gate():
    gate = {"kubernetesBackends": {"podReadinessGate": {"enabled": True}}}
    refs, _ = desired_resources(spec(templateLibraries=gate), "haptic", None)
    assert refs[BACKEND_PODS] == ResourceRef(BACKEND_PODS, "v1", "pods")
    gate["kubernetesBackends"]["podReadinessGate"]["enabled"] = False
    refs, _ = desired_resources(spec(templateLibraries=gate), "haptic", None)
    assert BACKEND_PODS not in refs


def test_watched_resources_and_their_problems():
    refs, problems = desired_resources(
        spec(
            watchedResources={
                "configmaps": {
                    "apiVersion": "v1",
                    "resources": "configmaps",
                    "namespace": "cfg",
                    "labelSelector": "use=haproxy",
                },
                "gateways": {"apiVersion": "gateway.networking.k8s.io/v1", "resources": "gateways"},
                "ingresses": {"apiVersion": "v1", "resources": "configmaps"},
                "broken": {"resources": "things"},
            }
        ),
        "haptic",
        None,
    )
    assert refs["configmaps"].collection_path() == "/api/v1/namespaces/cfg/configmaps"
    assert refs["configmaps"].query() == [("labelSelector", "use=haproxy")]
    assert refs["gateways"].collection_path() == "/apis/gateway.networking.k8s.io/v1/gateways"
    assert refs["ingresses"].api_version == "networking.k8s.io/v1"  # the reserved one stays
    assert "broken" not in refs
    assert len(problems) == 2 and any("reserved" in p for p in problems)


def test_template_config_is_watched_by_name():
    ref = template_config_ref("haptic", "main")
    assert ref.collection_path() == (
        "/apis/haproxy-haptic.org/v1alpha1/namespaces/haptic/haproxytemplateconfigs"
    )
    assert ref.query() == [("fieldSelector", "metadata.name=main")]


def k8s_pod(name: str, ip: str | None, ready: str | None, deleting: bool = False) -> dict:
    status: dict = {}
    if ip:
        status["podIP"] = ip
    if ready:
        status["conditions"] = [
            {"type": "PodScheduled", "status": "True"},
            {"type": "Ready", "status": ready},
        ]
    meta = {"name": name, "namespace": "haptic", "uid": f"uid-{name}", "resourceVersion": "1"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "status": status}


def test_discovered_pod_view():
    p = discovered_pod(k8s_pod("hp-0", "127.0.1.2", "True", deleting=True))
    assert (p.name, p.uid, p.pod_ip, p.ready, p.terminating) == (
        "hp-0",
        "uid-hp-0",
        "127.0.1.2",
        True,
        True,
    )
    assert not discovered_pod(k8s_pod("hp-1", None, "False")).ready
    assert not discovered_pod(k8s_pod("hp-2", None, None)).ready


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b", "c", "d"]),
            st.sampled_from([None, "127.0.0.2"]),
            st.sampled_from([None, "True", "False"]),
        ),
        unique_by=lambda t: t[0],
    ),
    st.randoms(use_true_random=False),
)
def test_discovered_set_ignores_order_and_status_noise(pods, rnd):
    objs = [k8s_pod(*p) for p in pods]
    shuffled = list(objs)
    rnd.shuffle(shuffled)
    # Noise: a new resourceVersion and an unrelated status field.
    for o in shuffled:
        o["metadata"]["resourceVersion"] = "99"
        o["status"]["containerStatuses"] = [{"restartCount": rnd.randint(0, 3)}]
    assert discovered_set(shuffled) == discovered_set(objs)
    assert [p.name for p in discovered_set(objs)] == sorted(p[0] for p in pods)


def test_snapshot_render_kwargs_split_fixed_and_extra_kinds():
    ing = ({"metadata": {"name": "i"}},)
    cm = ({"metadata": {"name": "c"}},)
    snap = Snapshot(
        template_config={"metadata": {"name": "haptic"}},
        objects=MappingProxyType({"ingresses": ing, "configmaps": cm, HAPROXY_PODS: ()}),
    )
    kw = snap.render_kwargs()
    assert kw["ingresses"] == ing and kw["services"] == () and kw["pods"] == ()
    assert kw["resources"] == {"configmaps": cm}
    assert kw["template_config"] == {"metadata": {"name": "haptic"}}

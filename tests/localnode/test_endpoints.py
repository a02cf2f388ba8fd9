"""EndpointSlice computation from Services and pods."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from localcluster.node import endpoints as ep


def service(ports: list[dict[str, Any]], selector: dict[str, str] | None = None) -> dict:
    return {
        "metadata": {"name": "web", "namespace": "ns", "uid": "svc-uid"},
        "spec": {"selector": selector or {"app": "web"}, "ports": ports},
    }


def pod(
    name: str,
    ip: str | None = "127.1.0.1",
    ready: bool = True,
    terminating: bool = False,
    labels: dict[str, str] | None = None,
    container_ports: list[dict[str, Any]] | None = None,
    phase: str = "Running",
) -> dict:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "ns",
        "uid": f"uid-{name}",
        "labels": labels if labels is not None else {"app": "web"},
    }
    if terminating:
        meta["deletionTimestamp"] = "2030-01-01T00:00:00Z"
    status: dict[str, Any] = {
        "phase": phase,
        "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
    }
    if ip:
        status["podIP"] = ip
    return {
        "metadata": meta,
        "spec": {
            "nodeName": "localnode",
            "containers": [{"name": "c", "ports": container_ports or []}],
        },
        "status": status,
    }


def test_conditions_ready_serving_terminating() -> None:
    svc = service([{"name": "http", "port": 80, "targetPort": 8080}])
    pods = [
        pod("a", "127.1.0.1", ready=True),
        pod("b", "127.1.0.2", ready=False),
        pod("c", "127.1.0.3", ready=True, terminating=True),
        pod("d", "127.1.0.4", ready=False, terminating=True),
    ]
    [desired] = ep.desired_slices(svc, pods)
    conds = {e["targetRef"]["name"]: e["conditions"] for e in desired.endpoints}
    assert conds["a"] == {"ready": True, "serving": True, "terminating": False}
    assert conds["b"] == {"ready": False, "serving": False, "terminating": False}
    assert conds["c"] == {"ready": False, "serving": True, "terminating": True}
    assert conds["d"] == {"ready": False, "serving": False, "terminating": True}
    assert desired.port_dicts() == [{"name": "http", "port": 8080, "protocol": "TCP"}]
    first = desired.endpoints[0]
    assert first["addresses"] == ["127.1.0.1"]
    assert first["targetRef"] == {"kind": "Pod", "namespace": "ns", "name": "a", "uid": "uid-a"}


def test_publish_not_ready_addresses() -> None:
    svc = service([{"port": 80}])
    svc["spec"]["publishNotReadyAddresses"] = True
    [desired] = ep.desired_slices(svc, [pod("a", ready=False)])
    assert desired.endpoints[0]["conditions"]["ready"] is True


def test_excluded_pods() -> None:
    svc = service([{"port": 80}])
    pods = [
        pod("noip", ip=None),
        pod("other", labels={"app": "other"}),
        pod("done", phase="Succeeded"),
        pod("ok", ip="127.1.0.9"),
    ]
    [desired] = ep.desired_slices(svc, pods)
    assert [e["targetRef"]["name"] for e in desired.endpoints] == ["ok"]


def test_named_target_port_resolves_per_pod_and_groups_by_port_set() -> None:
    svc = service([{"name": "http", "port": 80, "targetPort": "web"}])
    pods = [
        pod("a", "127.1.0.1", container_ports=[{"name": "web", "containerPort": 8080}]),
        pod("b", "127.1.0.2", container_ports=[{"name": "web", "containerPort": 9090}]),
        pod("c", "127.1.0.3", container_ports=[{"name": "web", "containerPort": 8080}]),
    ]
    slices = ep.desired_slices(svc, pods)
    by_port = {s.ports[0][1]: [e["targetRef"]["name"] for e in s.endpoints] for s in slices}
    assert by_port == {8080: ["a", "c"], 9090: ["b"]}


def test_empty_service_gets_placeholder() -> None:
    assert ep.desired_slices(service([{"port": 80}]), []) == [ep.DesiredSlice((), ())]


def test_plan_reuses_creates_and_deletes() -> None:
    svc = service([{"name": "http", "port": 80, "targetPort": 8080}])
    [want] = ep.desired_slices(svc, [pod("a")])
    same = {
        "metadata": {"name": "web-1"},
        "ports": want.port_dicts(),
        "endpoints": list(want.endpoints),
    }
    stale = {"metadata": {"name": "web-2"}, "ports": want.port_dicts(), "endpoints": []}
    other = {"metadata": {"name": "web-3"}, "ports": [{"name": "x", "port": 1}], "endpoints": []}
    assert ep.plan_slices([want], [same]) == ep.SlicePlan((), (), ())
    plan = ep.plan_slices([want], [stale, other])
    assert plan.update == (("web-2", want),)
    assert plan.delete == ("web-3",)
    assert ep.plan_slices([want], []).create == (want,)


@settings(deadline=None)  # a loaded 2-core machine must not fail on speed
@given(
    st.lists(
        st.tuples(st.booleans(), st.booleans(), st.booleans(), st.booleans()),
        min_size=0,
        max_size=250,
    )
)
def test_every_eligible_pod_appears_exactly_once(flags: list[tuple[bool, ...]]) -> None:
    svc = service([{"port": 80, "targetPort": 8080}])
    pods = []
    for i, (has_ip, ready, terminating, matches) in enumerate(flags):
        pods.append(
            pod(
                f"p{i:03d}",
                ip=f"127.2.{i // 250}.{i % 250 + 1}" if has_ip else None,
                ready=ready,
                terminating=terminating,
                labels={"app": "web" if matches else "nope"},
            )
        )
    slices = ep.desired_slices(svc, pods)
    names = [e["targetRef"]["name"] for s in slices for e in s.endpoints]
    expected = [f"p{i:03d}" for i, f in enumerate(flags) if f[0] and f[3]]
    assert sorted(names) == expected
    assert all(len(s.endpoints) <= ep.MAX_ENDPOINTS_PER_SLICE for s in slices)

"""Ingress status.loadBalancer: written on served Ingresses, cleared when no longer served,
fenced, through the local API server over HTTP; the decision as a property."""

from __future__ import annotations

import subprocess
import time
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kubernetes import client

from controller.fencing import StaleTerm
from controller.ingressstatus import (
    FIELD_MANAGER,
    IngressStatusWriter,
    fleet_addresses,
    fleet_entries,
    publish_addresses,
    status_changes,
)
from controller.watch.informer import KEPT_FIELD_MANAGERS, strip_managed_fields
from tests.watch.test_caches_live import ingress

T = 10


def _status(net, ns: str, name: str) -> list:
    obj = net.read_namespaced_ingress_status(name, ns, _request_timeout=T)
    lb = obj.status.load_balancer if obj.status else None
    return [(e.ip, e.hostname) for e in (lb.ingress or [])] if lb else []


def _kubectl_addresses(api, namespace: str) -> dict[str, str]:
    """NAME -> ADDRESS as `kubectl get ingress` prints them."""
    out = subprocess.run(
        ["kubectl", "--kubeconfig", str(api.kubeconfig), "get", "ingress", "-n", namespace],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout.splitlines()
    start = out[0].index("ADDRESS")
    return {line.split()[0]: line[start:].split(" ")[0] for line in out[1:]}


def test_served_ingresses_get_the_fleet_addresses_and_lose_them_after(api, api_client, namespace):
    net = client.NetworkingV1Api(api_client)
    for name in ("served", "dropped", "foreign"):
        net.create_namespaced_ingress(namespace, ingress(name), _request_timeout=T)
    foreign = {"status": {"loadBalancer": {"ingress": [{"hostname": "lb.other.example"}]}}}
    net.patch_namespaced_ingress_status("foreign", namespace, foreign, _request_timeout=T)
    addresses = ["127.0.0.12", "127.0.0.11"]
    over: list = []

    def check_term() -> None:
        if over:
            raise StaleTerm(over[0], "test")

    def listed() -> list[dict]:
        items = net.list_namespaced_ingress(namespace, _request_timeout=T).items
        return [api_client.sanitize_for_serialization(i) for i in items]

    writer = IngressStatusWriter(
        api_client,
        listed,
        lambda: list(addresses),
        term_valid=lambda: True,
        check_term=check_term,
    )
    ns = namespace
    out = SimpleNamespace(served_ingresses=(f"{ns}/served", f"{ns}/dropped"))
    assert writer.apply(out) == [f"{ns}/dropped", f"{ns}/served"]
    both = [("127.0.0.11", None), ("127.0.0.12", None)]
    assert _status(net, ns, "served") == both and _status(net, ns, "dropped") == both
    assert _status(net, ns, "foreign") == [(None, "lb.other.example")]  # not ours: untouched
    assert writer.apply(out) == []  # nothing changed: no writes
    shown = _kubectl_addresses(api, ns)
    assert shown["served"] == "127.0.0.11,127.0.0.12" and shown["foreign"] == "lb.other.example"

    # "dropped" is no longer served: it loses our addresses; the foreign one keeps its own.
    assert writer.apply(SimpleNamespace(served_ingresses=(f"{ns}/served",))) == [f"{ns}/dropped"]
    assert _status(net, ns, "dropped") == [] and _status(net, ns, "served") == both
    assert _status(net, ns, "foreign") == [(None, "lb.other.example")]
    assert _kubectl_addresses(api, ns)["dropped"] == ""
    managed = net.read_namespaced_ingress("served", ns).metadata.managed_fields or []
    assert FIELD_MANAGER in {m.manager for m in managed}

    # After the term: nothing is written even though the fleet changed.
    addresses[:] = ["127.0.0.13"]
    over.append(SimpleNamespace(holder="x", epoch=1))
    with pytest.raises(StaleTerm):
        writer.apply(out)
    assert _status(net, ns, "served") == both


def test_apply_later_returns_at_once_and_writes_the_newest_output(
    api, api_client, namespace
) -> None:
    net = client.NetworkingV1Api(api_client)
    for name in ("a", "b"):
        net.create_namespaced_ingress(namespace, ingress(name), _request_timeout=T)
    valid = [True]

    def listed() -> list[dict]:
        items = net.list_namespaced_ingress(namespace, _request_timeout=T).items
        return [api_client.sanitize_for_serialization(i) for i in items]

    writer = IngressStatusWriter(
        api_client,
        listed,
        lambda: ["127.0.0.21"],
        term_valid=lambda: valid[0],
        check_term=lambda: None,
    )
    writer.apply_later(SimpleNamespace(served_ingresses=(f"{namespace}/a",)))
    writer.apply_later(SimpleNamespace(served_ingresses=(f"{namespace}/b",)))
    deadline = time.monotonic() + 30
    while _status(net, namespace, "b") != [("127.0.0.21", None)]:
        assert time.monotonic() < deadline, "the newest output's status was not written"
        time.sleep(0.1)
    # "a" is not served by the newest output: written and cleared again, or never written.
    assert _status(net, namespace, "a") == []
    valid[0] = False  # the term ended: the writer's thread stops
    assert writer._later.join(5)


def test_publish_service_addresses_win_over_pod_ips() -> None:
    template = {"spec": {"templateLibraries": {"ingress": {"publishService": "infra/lb"}}}}
    svc = {
        "spec": {"clusterIP": "10.96.0.10"},
        "status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.5"}]}},
    }
    assert fleet_addresses(template, lambda ns, n: svc, ["10.0.0.1"]) == ["203.0.113.5"]
    assert publish_addresses({"spec": {"externalIPs": ["198.51.100.1"]}}) == ["198.51.100.1"]
    assert publish_addresses({"spec": {"clusterIP": "None"}}) == []
    assert fleet_addresses({}, lambda ns, n: None, ["10.0.0.2", None, "10.0.0.1"]) == [
        "10.0.0.1",
        "10.0.0.2",
    ]


@pytest.mark.parametrize(
    ("publish", "service", "says"),
    [
        ("infra/missing", None, "publish Service infra/missing not found"),
        ("infra/lb", {"spec": {"clusterIP": "None"}}, "publish Service infra/lb has no address"),
        ("no-slash", None, "publishService 'no-slash' is not 'namespace/name'"),
    ],
)
def test_a_publish_service_that_gives_no_address_is_said_not_silently_dropped(
    publish: str, service: dict | None, says: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Without addresses no Ingress gets a status: the controller log says why (once)."""
    template = {"spec": {"templateLibraries": {"ingress": {"publishService": publish}}}}
    with caplog.at_level("WARNING", logger="controller.ingressstatus"):
        assert fleet_addresses(template, lambda ns, n: service, ["10.0.0.1"]) == []
        assert fleet_addresses(template, lambda ns, n: service, ["10.0.0.1"]) == []
    assert [r.getMessage() for r in caplog.records if says in r.getMessage()] != []
    assert len([r for r in caplog.records if says in r.getMessage()]) == 1


_keys = st.sampled_from([f"ns/i{i}" for i in range(6)])
_entries = st.sampled_from([(), fleet_entries(["10.0.0.1"]), fleet_entries(["lb.example"])])


@given(
    st.sets(_keys),
    st.dictionaries(_keys, _entries),
    st.sampled_from([fleet_entries(["10.0.0.1"]), fleet_entries(["10.0.0.2", "10.0.0.3"])]),
)
def test_writes_touch_served_ingresses_and_only_our_addresses_elsewhere(served, current, desired):
    objs = [
        {
            "metadata": {"namespace": "ns", "name": key[3:]},
            "status": {"loadBalancer": {"ingress": [dict(e) for e in entries]}},
        }
        for key, entries in current.items()
    ]
    ours = {fleet_entries(["10.0.0.1"])}
    changes = status_changes(served, objs, desired, lambda _obj, cur: cur in ours)
    for ns, name, entries in changes:
        key = f"{ns}/{name}"
        if key in served:
            assert entries == desired and current[key] != desired
        else:
            assert entries == () and current[key] in ours
    written = {f"{ns}/{name}" for ns, name, _ in changes}
    # Every served Ingress ends with the desired addresses; no foreign status is touched.
    for key, entries in current.items():
        final = dict((f"{n}/{m}", e) for n, m, e in changes).get(key, entries)
        if key in served:
            assert final == desired
        elif entries not in ours:
            assert key not in written


def test_a_new_term_clears_what_an_earlier_term_wrote_after_the_pods_moved(api_client, namespace):
    # The next leader knows nothing the last one wrote, and the HAProxy pods now have other
    # IPs; the field manager in managedFields still says whose addresses these are.
    net = client.NetworkingV1Api(api_client)
    for name in ("old", "foreign"):
        net.create_namespaced_ingress(namespace, ingress(name), _request_timeout=T)

    def listed() -> list[dict]:
        # As the watch caches hold them: managedFields stripped but for ours.
        items = net.list_namespaced_ingress(namespace, _request_timeout=T).items
        return [strip_managed_fields(api_client.sanitize_for_serialization(i)) for i in items]

    def writer(addresses: list[str]) -> IngressStatusWriter:
        return IngressStatusWriter(
            api_client, listed, lambda: addresses, term_valid=lambda: True, check_term=lambda: None
        )

    ns = namespace
    writer(["127.0.0.21"]).apply(SimpleNamespace(served_ingresses=(f"{ns}/old",)))
    foreign = {"status": {"loadBalancer": {"ingress": [{"ip": "127.0.0.21"}]}}}
    net.patch_namespaced_ingress_status(
        "foreign", ns, foreign, field_manager="someone-else", _request_timeout=T
    )
    assert _status(net, ns, "old") == [("127.0.0.21", None)]
    # Next term: the pods moved to .22 and neither Ingress is served any more.
    assert writer(["127.0.0.22"]).apply(SimpleNamespace(served_ingresses=())) == [f"{ns}/old"]
    assert _status(net, ns, "old") == []
    assert _status(net, ns, "foreign") == [("127.0.0.21", None)]  # another manager's
    assert {FIELD_MANAGER} == KEPT_FIELD_MANAGERS

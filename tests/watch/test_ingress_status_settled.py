"""The Ingress status writer looks at the Ingresses again only when something it reads
changed (controller/ingressstatus.py, issue 19): the same served list, the same fleet
addresses and the very same Ingress objects found nothing to write last time."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from kubernetes import client

from controller.ingressstatus import IngressStatusWriter


def _ingress(name: str, ip: str | None = None) -> dict[str, Any]:
    status = {"loadBalancer": {"ingress": [{"ip": ip}]}} if ip else {}
    return {"metadata": {"namespace": "ns", "name": name}, "status": status}


def _writer(ingresses: list, addresses: list[str]) -> tuple[IngressStatusWriter, list]:
    writes: list = []
    writer = IngressStatusWriter(
        client.ApiClient(),
        lambda: list(ingresses),
        lambda: list(addresses),
        term_valid=lambda: True,
        check_term=lambda: None,
    )
    # The API (a collaborator here; tests/watch/test_ingress_status_live.py writes to a real
    # API server): each status PATCH is recorded.
    writer.api = SimpleNamespace(  # type: ignore[assignment]
        patch_namespaced_ingress_status=lambda name, ns, body, **_: writes.append(
            (name, body["status"]["loadBalancer"]["ingress"])
        )
    )
    return writer, writes


def test_a_settled_fleet_is_not_looked_at_again(monkeypatch: Any) -> None:
    import controller.ingressstatus as module

    passes = []
    real = module.status_changes
    monkeypatch.setattr(
        module,
        "status_changes",
        lambda *a: passes.append(1) or real(*a),  # type: ignore[func-returns-value]
    )
    ingresses = [_ingress("a", "10.0.0.1"), _ingress("b", "10.0.0.1")]
    addresses = ["10.0.0.1"]
    writer, writes = _writer(ingresses, addresses)
    out = SimpleNamespace(served_ingresses=("ns/a", "ns/b"))
    assert writer.apply(out) == [] and len(passes) == 1
    assert writer.apply(out) == [] and len(passes) == 1  # the very same inputs: no pass
    # An Ingress replaced (a watch event), the served list or the addresses changed: a pass.
    ingresses[1] = _ingress("b")
    assert writer.apply(out) == ["ns/b"] and len(passes) == 2
    assert writer.apply(out) == ["ns/b"] and len(passes) == 3  # written, not yet seen back
    ingresses[1] = _ingress("b", "10.0.0.1")
    assert writer.apply(out) == [] and len(passes) == 4
    assert writer.apply(SimpleNamespace(served_ingresses=("ns/a",))) == ["ns/b"]
    addresses[:] = ["10.0.0.2"]
    assert writer.apply(out) == ["ns/a", "ns/b"] and len(passes) == 6
    assert writes[-2:] == [("a", [{"ip": "10.0.0.2"}]), ("b", [{"ip": "10.0.0.2"}])]

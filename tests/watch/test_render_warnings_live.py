"""Render warnings reach the cluster: Events on the objects, over HTTP, deduplicated."""

from __future__ import annotations

from prometheus_client import REGISTRY

from controller.render import RenderInput, render
from controller.render.warnings import event_emitter, report_warnings, warnings_summary
from devstack.stack import wait_for
from tests.render import builders as b

T = 10


def _events(core, namespace: str) -> list:
    return core.list_namespaced_event(namespace, _request_timeout=T).items


def _gauge(reason: str) -> float | None:
    return REGISTRY.get_sample_value("haptic_render_warnings", {"reason": reason})


def test_each_warning_becomes_one_event_on_its_object_and_a_gauge(api_client, core, namespace):
    ns = namespace
    bad = b.ingress(ns, "bad", [("bad.test", [b.path("/", "web")])])
    bad["metadata"]["annotations"] = {"haproxy.org/rate-limit-requests": "lots"}
    orphan = b.ingress(ns, "orphan", [("orphan.test", [b.path("/", "missing")])])
    fine = b.ingress(ns, "fine", [("fine.test", [b.path("/", "web")])])
    out = render(
        RenderInput(
            b.template_config(),
            ingresses=[bad, orphan, fine],
            services=[b.service(ns, "web", [(None, 80, 8080)])],
        )
    )
    assert sorted((w.kind, w.name, w.reason) for w in out.warnings) == [
        ("Ingress", "bad", "InvalidAnnotation"),
        ("Ingress", "orphan", "ServiceNotFound"),
    ]
    # The bad annotation skipped that Ingress only.
    assert set(out.plan["maps"]["maps/hosts.map"]) == {"fine.test", "orphan.test"}

    reported: set = set()
    emit = event_emitter(api_client, "controller-test")
    assert len(report_warnings(out.warnings, reported, emit)) == 2
    assert wait_for(lambda: len(_events(core, ns)) == 2)
    events = {e.involved_object.name: e for e in _events(core, ns)}
    assert events["bad"].reason == "InvalidAnnotation" and events["bad"].type == "Warning"
    assert "rate-limit-requests" in events["bad"].message
    assert events["bad"].involved_object.kind == "Ingress"
    assert events["orphan"].reason == "ServiceNotFound"
    assert _gauge("InvalidAnnotation") == 1 and _gauge("ServiceNotFound") == 1
    assert _gauge("RouteConflict") == 0

    # The same warnings on the next render: no new Events. Once fixed, the gauge drops.
    assert report_warnings(out.warnings, reported, emit) == []
    web = [b.service(ns, "web", [(None, 80, 8080)])]
    fixed = render(RenderInput(b.template_config(), ingresses=[fine], services=web))
    report_warnings(fixed.warnings, reported, emit)
    assert _gauge("InvalidAnnotation") == 0 and reported == set()
    assert len(_events(core, ns)) == 2
    summary = warnings_summary(out.warnings, limit=1)
    assert summary["count"] == 2 and len(summary["first"]) == 1
    assert summary["reasons"] == [
        {"reason": "InvalidAnnotation", "count": 1},
        {"reason": "ServiceNotFound", "count": 1},
    ]


def test_the_template_config_status_carries_the_summary_fenced(api_client, namespace):
    from kubernetes import client

    from controller.fencing import StaleTerm
    from controller.render.warnings import render_warning_reporter, template_status_writer

    custom = client.CustomObjectsApi(api_client)
    group, version, plural = "haproxy-haptic.org", "v1alpha1", "haproxytemplateconfigs"
    body = {
        "apiVersion": f"{group}/{version}",
        "kind": "HAProxyTemplateConfig",
        "metadata": {"name": "haptic"},
        "spec": {"podSelector": {"matchLabels": {"app": "haproxy"}}},
    }
    custom.create_namespaced_custom_object(group, version, namespace, plural, body)
    over = []

    def check_term() -> None:
        if over:
            raise StaleTerm(over[0], "test: term ended")

    write = template_status_writer(api_client, namespace, "haptic", check_term)
    report = render_warning_reporter(api_client, "controller-test", write)
    orphan = b.ingress(namespace, "orphan", [("orphan.test", [b.path("/", "missing")])])
    out = render(RenderInput(b.template_config(), ingresses=[orphan]))
    report(out)

    def status() -> dict:
        obj = custom.get_namespaced_custom_object(group, version, namespace, plural, "haptic")
        return (obj.get("status") or {}).get("renderWarnings") or {}

    assert status()["count"] == 1
    assert status()["reasons"] == [{"reason": "ServiceNotFound", "count": 1}]
    assert "orphan" in status()["first"][0]
    # Once the term is over nothing is written, even though the summary changed.
    from controller.election.term import FencingToken

    over.append(FencingToken.of("someone", 1, "haptic-leader", namespace))
    report(render(RenderInput(b.template_config())))
    assert status()["count"] == 1

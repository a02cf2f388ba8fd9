"""The template gate (issue 18): a changed template config is used only once its
spec.validationTests pass; a refused one is reported on the template config."""

from __future__ import annotations

import copy

from hypothesis import given, settings
from hypothesis import strategies as st
from kubernetes import client
from prometheus_client import REGISTRY

from controller.render.validate import TestResult as Result
from controller.rendergate import check_output
from controller.templategate import (
    CONDITION,
    FAILED_REASON,
    PASSED_REASON,
    TemplateChoice,
    TemplateGate,
    template_reporter,
    validation_runner,
)
from devstack.stack import wait_for
from tests.render import builders as b

T = 10
GROUP, VERSION, PLURAL = "haproxy-haptic.org", "v1alpha1", "haproxytemplateconfigs"
FIXTURES = [
    b.ingress("shop", "front", [("shop.test", [b.path("/", "front")])]),
    b.service("shop", "front", [(None, 80, 8080)]),
]


def _version(n: int, passes: bool) -> dict:
    """Template config generation n whose one validation test passes or fails."""
    config = b.template_config(extraContext={"version": n})
    config["metadata"]["generation"] = n
    value = "frontend http" if passes else "no such line"
    config["spec"]["validationTests"] = {
        "t": {"fixtures": [], "assertions": [{"type": "contains", "value": value}]}
    }
    return config


def _fake_run(template: dict) -> tuple[Result, ...]:
    passes = template["spec"]["validationTests"]["t"]["assertions"][0]["value"] == "frontend http"
    return (Result("t", passes, () if passes else ("does not contain it",)),)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.booleans()), min_size=1, max_size=12))
def test_renders_use_the_newest_template_whose_tests_passed(steps) -> None:
    # A sequence of template versions (a version may come back, as after a revert).
    choice = TemplateChoice()
    runs: list[int] = []
    newest_passing = None
    for n, passes in steps:
        current = _version(n * 2 + (1 if passes else 0), passes)

        def run(t: dict) -> tuple[Result, ...]:
            runs.append(t["metadata"]["generation"])
            return _fake_run(t)

        before = len(runs)
        used, verdict = choice.select(current, run)
        if passes:
            newest_passing = current
        assert used is newest_passing or (used is None and newest_passing is None)
        if used is not None:
            assert used["metadata"]["generation"] == newest_passing["metadata"]["generation"]
        if not passes:
            assert verdict is not None and not verdict.accepted
            assert verdict.fallback_generation == (
                newest_passing["metadata"]["generation"] if newest_passing else None
            )
        # Tests run once per distinct template in a row, never for the accepted one; the
        # refusal stands exactly while the newest template is not the one in use.
        assert len(runs) - before <= 1
        assert (choice.refused is None) == (used is current)
    assert choice.select(None, _fake_run) == (None, None)


def test_a_template_without_tests_is_accepted_without_running_anything() -> None:
    reports: list = []
    gate = TemplateGate(validation_runner(lambda out: (False, "never called")))
    gate.attach(reports.append)
    config = b.template_config()
    assert gate.select(config) is config
    assert [(v.accepted, v.results) for v in reports] == [(True, ())]
    assert gate.select(copy.deepcopy(config)) is not None and len(reports) == 1


def _refused() -> float | None:
    return REGISTRY.get_sample_value("haptic_template_validation_refused")


def _template_events(core, ns: str, reason: str) -> list:
    return [
        e
        for e in core.list_namespaced_event(ns, _request_timeout=T).items
        if e.reason == reason and e.involved_object.kind == "HAProxyTemplateConfig"
    ]


def test_a_refused_template_keeps_the_last_good_one_and_is_reported(api_client, core, namespace):
    # The real parts: haproxy -c for haproxyValid, Events and status through the API server.
    custom = client.CustomObjectsApi(api_client)
    good = b.template_config()
    good["metadata"] = {"name": "haptic", "namespace": namespace}
    good["spec"]["validationTests"] = {
        "valid": {"fixtures": FIXTURES, "assertions": [{"type": "haproxyValid"}]}
    }
    good = custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, good)
    custom.patch_namespaced_custom_object_status(
        GROUP,
        VERSION,
        namespace,
        PLURAL,
        "haptic",
        {"status": {"conditions": [{"type": "Other", "status": "True"}]}},
    )
    events: list[tuple[str, str, str]] = []

    def record(type_: str, reason: str, message: str) -> None:
        events.append((type_, reason, message))
        core.create_namespaced_event(
            namespace,
            {
                "metadata": {"generateName": "haptic."},
                "involvedObject": {
                    "kind": "HAProxyTemplateConfig",
                    "name": "haptic",
                    "namespace": namespace,
                },
                "reason": reason,
                "message": message,
                "type": type_,
            },
        )

    def conditions() -> list[dict]:
        obj = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "haptic")
        return (obj.get("status") or {}).get("conditions") or []

    def check(out) -> tuple[bool, str]:
        verdict = check_output(out)
        return verdict.accepted, verdict.output

    gate = TemplateGate(validation_runner(check))
    gate.attach(
        template_reporter(api_client, namespace, "haptic", record, lambda: None, conditions)
    )
    assert gate.select(good) is good
    assert [e[1] for e in events] == [PASSED_REASON]
    assert _refused() == 0

    # A change haproxy refuses: the template says a directive HAProxy does not know.
    bad = copy.deepcopy(good)
    bad["metadata"]["generation"] = good["metadata"]["generation"] + 1
    bad["spec"]["haproxyConfig"] = {"template": "global\n    no-such-directive on\n"}
    assert gate.select(bad) is good
    assert _refused() == 1
    assert [e[1] for e in events] == [PASSED_REASON, FAILED_REASON]
    assert "valid: assertions[0]: haproxy -c refused" in events[-1][2]
    assert f"renders use generation {good['metadata']['generation']}" in events[-1][2]
    assert wait_for(lambda: _template_events(core, namespace, FAILED_REASON))
    by_type = {c["type"]: c for c in conditions()}
    assert by_type[CONDITION]["status"] == "False"
    assert by_type[CONDITION]["reason"] == FAILED_REASON
    assert "no-such-directive" in by_type[CONDITION]["message"]
    assert gate.refusal() == by_type[CONDITION]["message"]  # /healthz shows it too
    assert by_type["Other"]["status"] == "True"  # other conditions kept

    # The same refused template again: no new run, no new report; it stays refused.
    assert gate.select(copy.deepcopy(bad)) is good
    assert len(events) == 2
    # A new term hears the standing refusal once.
    gate.attach(
        template_reporter(api_client, namespace, "haptic", record, lambda: None, conditions)
    )
    assert gate.select(bad) is good
    assert [e[1] for e in events][-1] == FAILED_REASON and len(events) == 3

    # Fixed: used at once, the condition turns True.
    fixed = copy.deepcopy(bad)
    fixed["spec"].pop("haproxyConfig")
    fixed["spec"]["extraContext"] = {"fixed": True}
    assert gate.select(fixed) is fixed
    assert _refused() == 0 and gate.refusal() is None
    assert {c["type"]: c for c in conditions()}[CONDITION]["status"] == "True"

    # Refused again, then reverted to the template in use: the refusal is over.
    assert gate.select(bad) is fixed
    assert _refused() == 1 and gate.refusal() is not None
    assert gate.select(fixed) is fixed
    assert _refused() == 0 and gate.refusal() is None
    assert {c["type"]: c for c in conditions()}[CONDITION]["status"] == "True"

    # Refused again, then the tests are removed: the template is used and the condition
    # no longer says False.
    assert gate.select(bad) is fixed
    assert {c["type"]: c for c in conditions()}[CONDITION]["status"] == "False"
    untested = copy.deepcopy(bad)
    untested["spec"].pop("validationTests")
    assert gate.select(untested) is untested
    condition = {c["type"]: c for c in conditions()}[CONDITION]
    assert condition["status"] == "True" and "no validation tests" in condition["message"]


def test_validation_renders_see_the_http_store_bodies_the_render_would_see() -> None:
    # A template that reads spec.httpResources: its tests render with the fetched bodies,
    # not without them (which would refuse every such template).
    config = b.template_config()
    config["spec"]["haproxyConfig"] = {"template": "# {{ http.denylist }}\n"}
    config["spec"]["validationTests"] = {
        "reads-http": {"assertions": [{"type": "contains", "value": "# 10.0.0.0/8"}]}
    }
    bodies = {"denylist": "10.0.0.0/8"}
    gate = TemplateGate(validation_runner(lambda out: (True, ""), http=lambda: bodies))
    assert gate.select(config) is config
    assert _refused() == 0


def test_a_template_whose_jsonpath_assertion_fails_is_refused(api_client, core, namespace):
    # The render model changes under a template change (fewer server slots) that haproxy
    # accepts: only the jsonpath assertion sees it. Reported through the API server.
    custom = client.CustomObjectsApi(api_client)
    slices = [b.endpointslice("shop", "front", [b.endpoint("10.0.0.1")], [(None, 8080)])]
    good = b.template_config(slots=10)
    good["metadata"] = {"name": "haptic", "namespace": namespace}
    path = "$.backends[?@.name == 'shop_front_80'].servers[*]"
    good["spec"]["validationTests"] = {
        "ten-slots": {
            "fixtures": [*FIXTURES, *slices],
            "assertions": [
                {"type": "haproxyValid"},
                {"type": "jsonpath", "path": path, "count": 10},
            ],
        }
    }
    good = custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, good)
    events: list[tuple[str, str, str]] = []

    def conditions() -> list[dict]:
        obj = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "haptic")
        return (obj.get("status") or {}).get("conditions") or []

    def check(out) -> tuple[bool, str]:
        verdict = check_output(out)
        return verdict.accepted, verdict.output

    def record(*event: str) -> None:
        events.append(event)  # type: ignore[arg-type]

    gate = TemplateGate(validation_runner(check))
    gate.attach(
        template_reporter(api_client, namespace, "haptic", record, lambda: None, conditions)
    )
    assert gate.select(good) is good
    assert [e[1] for e in events] == [PASSED_REASON]

    fewer = copy.deepcopy(good)
    fewer["metadata"]["generation"] = good["metadata"]["generation"] + 1
    fewer["spec"]["templateLibraries"]["kubernetesBackends"]["serverSlots"] = 3
    assert gate.select(fewer) is good
    assert _refused() == 1
    assert [e[1] for e in events] == [PASSED_REASON, FAILED_REASON]
    expected = f"ten-slots: assertions[1]: jsonpath {path!r} selects 3 values, expected 10"
    assert expected in events[-1][2]
    condition = {c["type"]: c for c in conditions()}[CONDITION]
    assert condition["status"] == "False" and expected in condition["message"]

    # A bad expression refuses the template the same way; the gate goes on working.
    broken = copy.deepcopy(good)
    broken["spec"]["validationTests"]["ten-slots"]["assertions"][1]["path"] = "$.backends["
    assert gate.select(broken) is good
    assert "ten-slots: assertions[1]: jsonpath '$.backends[': invalid expression" in events[-1][2]
    assert gate.select(good) is good and _refused() == 0

"""spec.validationTests (controller/render/validate.py): jsonpath assertions on the render
model, and fixtures of the kinds spec.watchedResources watches."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.render.engine import render_with_model
from controller.render.validate import TestResult as Result
from controller.render.validate import (
    render_input,
    render_model,
    resource_plural,
    run_test,
    run_tests,
)
from controller.rendergate import check_output
from tests.render import builders as b

REPO = Path(__file__).resolve().parents[2]
FIXTURES = [
    b.ingress("shop", "front", [("shop.test", [b.path("/", "front")])]),
    b.service("shop", "front", [(None, 80, 8080)]),
    b.endpointslice("shop", "front", [b.endpoint("10.0.0.1")], [(None, 8080)]),
]


def _never(out) -> tuple[bool, str]:
    raise AssertionError("haproxy -c not asked for")


def _haproxy(out) -> tuple[bool, str]:
    verdict = check_output(out)
    return verdict.accepted, verdict.output


def _jsonpath_test(*assertions: dict, fixtures: list | None = None) -> Result:
    test = {
        "fixtures": FIXTURES if fixtures is None else fixtures,
        "assertions": [{"type": "jsonpath", **a} for a in assertions],
    }
    return run_test("t", b.template_config(), test, _never)


def test_jsonpath_assertions_read_the_model_the_templates_saw() -> None:
    result = _jsonpath_test(
        {"path": "$.ingress.hosts[0][0]", "equals": "shop.test"},
        {"path": "$.ingress.routes[?@.host_key == 'shop.test'].backend", "equals": "shop_front_80"},
        {"path": "$.backends[0].servers[?@.enabled == true].address", "equals": "10.0.0.1"},
        {"path": "$.backends[0].servers[*]", "count": 10},
        {"path": "$.backend_names", "equals": ["shop_front_80"]},
        {"path": "$.services[0].metadata.name", "equals": "front"},
        {"path": "$.libraries.server_slots", "equals": 10},
        {"path": "$.ingress.default_backend"},  # exists, even when null
        {"path": "$.resources.anything", "exists": False},
        {"path": "$.backend_settings", "exists": False},  # helpers are not data
    )
    assert result.passed, result.failures


def test_a_failing_jsonpath_assertion_says_what_it_selected() -> None:
    result = _jsonpath_test(
        {"path": "$.ingress.hosts[0][0]", "equals": "other.test"},
        {"path": "$.backends[0].servers[*]", "count": 3},
        {"path": "$.ingress.routes[*].backend", "exists": False},
        {"path": "$.nothing.here"},
        {"path": "$.backends[*].servers[*].address", "equals": "10.0.0.1"},
        {"path": "$.libraries.server_slots", "equals": True},  # 10 is not true in JSON
    )
    assert not result.passed
    assert result.failures == (
        'assertions[0]: jsonpath \'$.ingress.hosts[0][0]\' is "shop.test", expected "other.test"',
        "assertions[1]: jsonpath '$.backends[0].servers[*]' selects 10 values, expected 3",
        "assertions[2]: jsonpath '$.ingress.routes[*].backend' selects [\"shop_front_80\"],"
        " expected no match",
        "assertions[3]: jsonpath '$.nothing.here' selects nothing, expected a match",
        "assertions[4]: jsonpath '$.backends[*].servers[*].address' selects 10 values,"
        " expected exactly one",
        "assertions[5]: jsonpath '$.libraries.server_slots' is 10, expected true",
    )


@pytest.mark.parametrize(
    "path",
    ["$.backends[", "backends[0]", "$.backends[?@.name ==]", "$.a[?length(@.b, 1)]", ""],
)
def test_a_bad_expression_fails_its_test_with_a_message_naming_it(path: str) -> None:
    config = b.template_config()
    config["spec"]["validationTests"] = {
        "bad-path": {"fixtures": FIXTURES, "assertions": [{"type": "jsonpath", "path": path}]},
        "good": {"fixtures": FIXTURES, "assertions": [{"type": "jsonpath", "path": "$.ingress"}]},
    }
    bad, good = run_tests(config, _never)
    assert good.passed
    assert (bad.name, bad.passed) == ("bad-path", False)
    (failure,) = bad.failures
    if path:
        assert failure.startswith(f"assertions[0]: jsonpath {path!r}: invalid expression: ")
    else:
        assert failure == "assertions[0]: jsonpath assertion without a path"


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=12,
)


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.text("abcxyz", min_size=1, max_size=4), _json, max_size=4))
def test_every_value_of_the_extra_context_is_reachable_by_its_path(extra: dict) -> None:
    # spec.extraContext reaches the templates as `extra`; each key's value is what the path
    # `$.extra['key']` selects, and a key that is not there selects nothing.
    config = b.template_config(extraContext=extra)
    test = {
        "assertions": [
            *(
                {"type": "jsonpath", "path": f"$.extra[{json.dumps(k)}]", "equals": v}
                for k, v in extra.items()
            ),
            {"type": "jsonpath", "path": "$.extra['absent-key']", "exists": False},
        ]
    }
    result = run_test("extra", config, test, _never)
    assert result.passed, result.failures


def test_the_render_model_is_json_with_the_templates_names() -> None:
    _, context = render_with_model(
        render_input(b.template_config(), [*FIXTURES, b.tls_secret("shop", "tls")])
    )
    model = render_model(context)
    assert json.loads(json.dumps(model)) == model  # plain JSON, nothing lost on the way
    assert set(model) == {k for k, v in context.items() if not callable(v)}
    assert model["backends"][0]["servers"][0] == {
        "name": "SRV_1",
        "address": "10.0.0.1",
        "port": 8080,
        "weight": 1,
        "enabled": True,
    }
    assert model["ingress"]["secrets_read"] == sorted(model["ingress"]["secrets_read"])


# -- fixtures of watched kinds ---------------------------------------------------------------


def configmap(namespace: str, name: str, labels: dict | None = None, **data: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"namespace": namespace, "name": name, "labels": labels or {}},
        "data": data,
    }


# A template that reads a watched kind: a comment naming each ConfigMap of `blocked`.
READS_CONFIGMAPS = """\
{% include "haproxy.cfg.j2" %}
# blocked: {% for cm in resources.blocked %}{{ cm.metadata.name }}={{ cm.data.path }} {% endfor %}.
"""


def _watching(**entries: dict) -> dict:
    config = b.template_config(watchedResources=entries)
    config["spec"]["haproxyConfig"] = {"template": READS_CONFIGMAPS}
    return config


def test_a_fixture_of_a_watched_kind_reaches_the_template_as_the_watched_objects_do() -> None:
    config = _watching(blocked={"apiVersion": "v1", "resources": "configmaps"})
    cms = [configmap("shop", "b", path="/admin"), configmap("web", "a", path="/debug")]
    inp = render_input(config, [*FIXTURES, *cms])
    assert inp.resources == {"blocked": cms}
    assert inp.services == [FIXTURES[1]]
    test = {
        "fixtures": [*FIXTURES, *cms],
        "assertions": [
            {"type": "contains", "value": "# blocked: b=/admin a=/debug .\n"},
            {"type": "jsonpath", "path": "$.resources.blocked[*].metadata.name", "count": 2},
            {"type": "warnings", "value": 0},
            {"type": "haproxyValid"},
        ],
    }
    result = run_test("watched", config, test, _haproxy)
    assert result.passed, result.failures


def test_watched_entries_take_only_the_fixtures_their_namespace_and_selector_watch() -> None:
    config = _watching(
        blocked={"apiVersion": "v1", "resources": "configmaps", "namespace": "shop"},
        labelled={"apiVersion": "v1", "resources": "configmaps", "labelSelector": "role=deny"},
        # A built-in kind watched once more under its own name: both places get it.
        more={"apiVersion": "v1", "resources": "services"},
        # Not its regular plural: the entry names the kind.
        odd={"apiVersion": "example.org/v1", "resources": "octopi", "kind": "Octopus"},
    )
    shop = configmap("shop", "s", {"role": "deny"}, path="/x")
    web = configmap("web", "w", {"role": "deny"}, path="/y")
    octopus = {"apiVersion": "example.org/v1", "kind": "Octopus", "metadata": {"name": "o"}}
    inp = render_input(config, [shop, web, FIXTURES[1], octopus])
    assert inp.resources == {
        "blocked": [shop],
        "labelled": [shop, web],
        "more": [FIXTURES[1]],
        "odd": [octopus],
    }
    assert inp.services == [FIXTURES[1]]

    with pytest.raises(ValueError, match="outside the namespace or labelSelector of"):
        render_input(config, [configmap("web", "plain")])


def test_a_fixture_of_a_kind_nothing_watches_fails_its_test_naming_the_kind() -> None:
    config = _watching(blocked={"apiVersion": "v1", "resources": "configmaps"})
    for unknown in (
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}},
        # The right kind in another API version is not what the entry watches.
        {**configmap("shop", "x"), "apiVersion": "v2"},
    ):
        config["spec"]["validationTests"] = {"u": {"fixtures": [unknown], "assertions": []}}
        (result,) = run_tests(config, _never)
        (failure,) = result.failures
        kind = unknown["kind"]
        assert failure.startswith(f"render failed: fixture {kind} ")
        assert "not a built-in kind (EndpointSlice, Ingress, IngressClass, Pod" in failure
        plural = f"resources '{kind.lower()}s'"
        assert (
            f"no spec.watchedResources entry watches it (same apiVersion, and {plural}" in failure
        )


@pytest.mark.parametrize(
    ("kind", "plural"),
    [
        ("ConfigMap", "configmaps"),
        ("Ingress", "ingresses"),
        ("NetworkPolicy", "networkpolicies"),
        ("Gateway", "gateways"),
        ("Endpoints", "endpoints"),
        ("Box", "boxes"),
        ("HAProxyCfg", "haproxycfgs"),
        ("HTTPRoute", "httproutes"),
    ],
)
def test_the_regular_plural_of_a_kind(kind: str, plural: str) -> None:
    assert resource_plural(kind) == plural


def test_the_shipped_config_s_jsonpath_assertions_catch_a_backend_without_endpoints() -> None:
    sample = yaml.safe_load((REPO / "deploy" / "template-config.yaml").read_text())
    name = "ingress-routes-to-its-service"
    test = sample["spec"]["validationTests"][name]
    test["fixtures"] = [f for f in test["fixtures"] if f["kind"] != "EndpointSlice"]
    result = run_test(name, sample, test, lambda out: (True, ""))
    assert result.failures == (
        "assertions[4]: jsonpath \"$.backends[?@.name == 'shop_front_80'].servers[?@.enabled =="
        ' true].address" selects 0 values, expected exactly one',
    )


def _file_test(*assertions: dict) -> Result:
    return run_test(
        "t", b.template_config(), {"fixtures": FIXTURES, "assertions": assertions}, _never
    )


def test_equals_holds_when_the_file_is_exactly_the_value() -> None:
    result = _file_test(
        {"type": "equals", "file": "maps/hosts.map", "value": "shop.test shop.test\n"},
        {"type": "equals", "file": "maps/path-exact.map", "value": ""},
    )
    assert result.passed, result.failures


def test_equals_fails_on_any_difference_and_names_the_file() -> None:
    result = _file_test(
        {"type": "equals", "file": "maps/hosts.map", "value": "shop.test shop.test"},  # no \n
        {"type": "equals", "file": "maps/hosts.map", "value": "other.test other.test\n"},
        {"type": "equals", "file": "maps/nothing.map", "value": ""},
        {"type": "equals", "value": "shop.test shop.test\n"},  # file defaults to haproxy.cfg
    )
    assert result.failures == (
        "assertions[0]: maps/hosts.map differs from the expected content",
        "assertions[1]: maps/hosts.map differs from the expected content",
        "assertions[2]: maps/nothing.map: not rendered",
        "assertions[3]: haproxy.cfg differs from the expected content",
    )

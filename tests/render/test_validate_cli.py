"""`python -m controller.render validate`: a user's CI runs the template config's own tests
and fixtures offline, through the real haproxy -c."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from tests.render import builders as b

REPO = Path(__file__).resolve().parents[2]


def _config(tests: dict) -> dict:
    config = b.template_config()
    config["spec"]["validationTests"] = tests
    return config


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "controller.render", "validate", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )


FIXTURES = [
    b.ingress("shop", "front", [("shop.test", [b.path("/", "front")])]),
    b.service("shop", "front", [(None, 80, 8080)]),
    b.endpointslice("shop", "front", [b.endpoint("10.0.0.1")], [(None, 8080)]),
]


def test_passing_and_failing_tests_are_reported_with_the_exit_status(tmp_path: Path) -> None:
    tests = {
        "routes-shop": {
            "fixtures": FIXTURES,
            "assertions": [
                {"type": "contains", "file": "maps/hosts.map", "value": "shop.test shop.test"},
                {"type": "contains", "value": "backend shop_front_80"},
                {"type": "notContains", "value": "http-request auth"},
                {"type": "warnings", "value": 0},
                {"type": "haproxyValid"},
            ],
        },
        "wrong-expectation": {
            "fixtures": FIXTURES,
            "assertions": [{"type": "contains", "value": "backend nowhere"}],
        },
    }
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(_config(tests)))
    result = _run(str(config), "--output", "json", "--dump-rendered", str(tmp_path / "out"))
    assert result.returncode == 1, result.stderr
    report = {t["name"]: t for t in json.loads(result.stdout)["tests"]}
    assert report["routes-shop"] == {"name": "routes-shop", "passed": True, "failures": []}
    assert report["wrong-expectation"]["passed"] is False
    assert "does not contain 'backend nowhere'" in report["wrong-expectation"]["failures"][0]
    assert (tmp_path / "out" / "routes-shop" / "haproxy.cfg").is_file()

    del tests["wrong-expectation"]
    config.write_text(yaml.safe_dump(_config(tests)))
    assert _run(str(config)).returncode == 0


def test_a_fixtures_directory_renders_and_must_pass_haproxy(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(_config({})))
    fixtures = tmp_path / "fixtures"
    fixtures.mkdir()
    (fixtures / "shop.yaml").write_text(yaml.safe_dump_all(FIXTURES))
    result = _run(str(config), "--fixtures", str(fixtures))
    assert result.returncode == 0 and "PASS fixtures" in result.stdout, result.stdout
    # A fixture the library must skip is a failure: nothing is dropped silently.
    broken = b.ingress("shop", "bad", [("bad.test", [b.path("/", "front")])])
    broken["metadata"]["annotations"] = {"haproxy.org/maxconn": "lots"}
    (fixtures / "bad.yaml").write_text(yaml.safe_dump(broken))
    result = _run(str(config), "--fixtures", str(fixtures))
    assert result.returncode == 1 and "FAIL fixtures" in result.stdout
    assert "1 render warnings, expected 0" in result.stdout and "maxconn" in result.stdout


def test_jsonpath_assertions_and_a_bad_expression_in_the_json_report(tmp_path: Path) -> None:
    tests = {
        "model": {
            "fixtures": FIXTURES,
            "assertions": [
                {"type": "jsonpath", "path": "$.backends[0].name", "equals": "shop_front_80"},
                {"type": "jsonpath", "path": "$.ingress.routes[?@.path == '/']", "count": 1},
            ],
        },
        "bad-expression": {
            "fixtures": FIXTURES,
            "assertions": [{"type": "jsonpath", "path": "$.backends[?@.name ==]"}],
        },
    }
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(_config(tests)))
    out = tmp_path / "out"
    result = _run(str(config), "--output", "json", "--dump-rendered", str(out))
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    report = {t["name"]: t for t in json.loads(result.stdout)["tests"]}
    assert report["model"] == {"name": "model", "passed": True, "failures": []}
    (failure,) = report["bad-expression"]["failures"]
    assert failure.startswith(
        "assertions[0]: jsonpath '$.backends[?@.name ==]': invalid expression"
    )
    # The render model is dumped beside each tree: the paths an assertion can read.
    model = json.loads((out / "model.render-model.json").read_text())
    assert model["backends"][0]["name"] == "shop_front_80"
    assert (out / "model" / "haproxy.cfg").is_file()


def test_the_shipped_template_config_passes_its_own_validation_tests() -> None:
    # deploy/template-config.yaml carries the bundled libraries' own tests (docs/annotations.md).
    sample = REPO / "deploy" / "template-config.yaml"
    tests = yaml.safe_load(sample.read_text())["spec"]["validationTests"]
    kinds = {a["type"] for t in tests.values() for a in t["assertions"]}
    assert {"jsonpath", "haproxyValid"} <= kinds
    result = _run(str(sample), "--output", "json")
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)["tests"]
    assert sorted(t["name"] for t in report) == sorted(tests)
    assert all(t["passed"] for t in report), report

"""Template validation tests: render fixtures with a template config and check the output.

`spec.validationTests` of an HAProxyTemplateConfig maps a test name to
`{fixtures: [Kubernetes objects], assertions: [...]}`; an assertion is one of
  {type: contains,    file: haproxy.cfg, value: "..."}
  {type: notContains, file: maps/hosts.map, value: "..."}
  {type: equals,      file: haproxy.cfg, value: "..."}   (the whole file)
  {type: haproxyValid}                                   (haproxy -c accepts the tree)
  {type: warnings,    value: 0}                          (number of render warnings)
`file` defaults to haproxy.cfg. Fixtures without an IngressClass render every Ingress.

`run_tests` is pure apart from the injected haproxy check; `python -m controller.render
validate` (controller/render/__main__.py) is the command line around it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from controller.render.engine import render
from controller.render.model import RenderError, RenderInput, RenderOutput

# Which RenderInput field a fixture object goes to, by kind.
FIXTURE_FIELDS = {
    "Ingress": "ingresses",
    "Service": "services",
    "EndpointSlice": "endpointslices",
    "Secret": "secrets",
    "Pod": "pods",
    "IngressClass": "ingressclasses",
}
Check = Callable[[RenderOutput], tuple[bool, str]]


@dataclass(frozen=True)
class TestResult:
    name: str
    passed: bool
    failures: tuple[str, ...] = ()
    output: RenderOutput | None = field(default=None, compare=False)

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "passed": self.passed, "failures": list(self.failures)}


def render_input(
    template_config: Mapping[str, Any],
    objects: Iterable[Any],
    http_resources: Mapping[str, str] | None = None,
) -> RenderInput:
    """A RenderInput of fixture objects, by kind; unknown kinds are refused. `http_resources`:
    the bodies templates read as `http.<name>` (the controller passes its HTTP store's)."""
    fields: dict[str, list[Any]] = {}
    for obj in objects:
        kind = obj.get("kind") if isinstance(obj, Mapping) else None
        if kind not in FIXTURE_FIELDS:
            raise ValueError(f"fixture of kind {kind!r}: expected one of {sorted(FIXTURE_FIELDS)}")
        fields.setdefault(FIXTURE_FIELDS[kind], []).append(obj)
    classes = fields.pop("ingressclasses", None)
    return RenderInput(
        template_config, ingressclasses=classes, http_resources=http_resources or {}, **fields
    )


def _assertion(out: RenderOutput, spec: Mapping[str, Any], check: Check) -> str | None:
    """None when the assertion holds, else why not."""
    kind = spec.get("type")
    if kind == "haproxyValid":
        accepted, text = check(out)
        return None if accepted else f"haproxy -c refused the configuration: {text}"
    if kind == "warnings":
        expected = int(spec.get("value", 0))
        got = len(out.warnings)
        shown = "; ".join(map(str, out.warnings[:3]))
        return None if got == expected else f"{got} render warnings, expected {expected}: {shown}"
    path = str(spec.get("file") or "haproxy.cfg")
    try:
        content = out.file(path).content.decode("utf-8", "replace")
    except KeyError:
        return f"{path}: not rendered"
    value = str(spec.get("value", ""))
    if kind == "contains":
        return None if value in content else f"{path} does not contain {value!r}"
    if kind == "notContains":
        return None if value not in content else f"{path} contains {value!r}"
    if kind == "equals":
        return None if content == value else f"{path} differs from the expected content"
    return f"unknown assertion type {kind!r}"


def run_test(
    name: str,
    template_config: Mapping[str, Any],
    test: Mapping[str, Any],
    check: Check,
    http_resources: Mapping[str, str] | None = None,
) -> TestResult:
    try:
        out = render(render_input(template_config, test.get("fixtures") or [], http_resources))
    except (RenderError, ValueError) as exc:
        return TestResult(name, False, (f"render failed: {exc}",))
    failures = []
    for i, spec in enumerate(test.get("assertions") or []):
        problem = _assertion(out, spec if isinstance(spec, Mapping) else {}, check)
        if problem:
            failures.append(f"assertions[{i}]: {problem}")
    return TestResult(name, not failures, tuple(failures), out)


def run_tests(
    template_config: Mapping[str, Any],
    check: Check,
    http_resources: Mapping[str, str] | None = None,
) -> list[TestResult]:
    """Every entry of spec.validationTests, by name."""
    tests = (template_config.get("spec") or {}).get("validationTests") or {}
    return [
        run_test(name, template_config, tests[name], check, http_resources)
        for name in sorted(tests)
    ]

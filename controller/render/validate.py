"""Template validation tests: render fixtures with a template config and check the output.

`spec.validationTests` of an HAProxyTemplateConfig maps a test name to
`{fixtures: [Kubernetes objects], assertions: [...]}`; an assertion is one of
  {type: contains,    file: haproxy.cfg, value: "..."}
  {type: notContains, file: maps/hosts.map, value: "..."}
  {type: equals,      file: haproxy.cfg, value: "..."}   (the whole file)
  {type: haproxyValid}                                   (haproxy -c accepts the tree)
  {type: warnings,    value: 0}                          (number of render warnings)
  {type: jsonpath,    path: "$.backends[*].name", exists: true, equals: ..., count: N}
`file` defaults to haproxy.cfg. Fixtures without an IngressClass render every Ingress.
A jsonpath assertion reads the render model, the context the templates saw, as JSON
(`render_model`); its expression is RFC 9535 JSONPath (docs/annotations.md).

A fixture goes where a watched object of its kind would: the built-in kinds to their
RenderInput field, a kind that `spec.watchedResources` watches to `resources.<name>` of every
entry whose namespace and labelSelector select it (as the controller's watches would).

`run_tests` is pure apart from the injected haproxy check; `python -m controller.render
validate` (controller/render/__main__.py) is the command line around it.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import Any

import jsonpath

from controller.render.engine import render_with_model
from controller.render.model import RenderError, RenderInput, RenderOutput
from controller.watch.caches import desired_resources
from kubewatch import selectors

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
# RFC 9535 as written (no extensions), so an expression means what the standard says.
_JSONPATH = jsonpath.JSONPathEnvironment(strict=True)


@dataclass(frozen=True)
class TestResult:
    name: str
    passed: bool
    failures: tuple[str, ...] = ()
    output: RenderOutput | None = field(default=None, compare=False)
    # The render model as JSON (what jsonpath assertions read), made on first call.
    model: Callable[[], Any] | None = field(default=None, compare=False, repr=False)

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "passed": self.passed, "failures": list(self.failures)}


def resource_plural(kind: str) -> str:
    """The regular plural resource name of a kind, as CRD generators and Kubernetes' own
    guess make it (Ingress -> ingresses, NetworkPolicy -> networkpolicies, Gateway ->
    gateways, Endpoints -> endpoints)."""
    name = kind.lower()
    if name.endswith("endpoints"):
        return name
    if name.endswith(("s", "x", "z", "ch", "sh")):
        return name + "es"
    if name.endswith("y") and name[-2:-1] not in ("a", "e", "i", "o", "u", ""):
        return name[:-1] + "ies"
    return name + "s"


@dataclass(frozen=True)
class WatchedKind:
    """One spec.watchedResources entry, as a fixture sees it: which objects reach
    `resources.<name>`."""

    name: str
    api_version: str
    kind: str | None  # the entry's `kind`; None: any kind whose plural is `plural`
    plural: str
    namespace: str | None
    label_selector: str

    def is_kind(self, api_version: str, kind: str) -> bool:
        if api_version != self.api_version:
            return False
        return kind == self.kind if self.kind else resource_plural(kind) == self.plural

    def selects(self, obj: Mapping[str, Any]) -> bool:
        meta = obj.get("metadata") or {}
        if self.namespace and meta.get("namespace") != self.namespace:
            return False
        try:
            return selectors.matches_string(self.label_selector, meta.get("labels"))
        except selectors.SelectorError:
            return False


def watched_kinds(template_config: Mapping[str, Any]) -> tuple[WatchedKind, ...]:
    """The template config's spec.watchedResources entries the controller would watch
    (the same reading as its watch caches: controller.watch.caches.desired_resources)."""
    refs, _ = desired_resources(template_config, "", None)
    entries = (template_config.get("spec") or {}).get("watchedResources") or {}
    out = []
    for name in sorted(entries):
        ref = refs.get(name)
        if ref is None:  # reserved name or incomplete entry: not watched
            continue
        kind = entries[name].get("kind")
        out.append(
            WatchedKind(
                name,
                ref.api_version,
                str(kind) if kind else None,
                ref.plural,
                ref.namespace,
                ref.label_selector,
            )
        )
    return tuple(out)


def _fixture_name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    name = meta.get("name")
    return f"{meta['namespace']}/{name}" if meta.get("namespace") else str(name)


def render_input(
    template_config: Mapping[str, Any],
    objects: Iterable[Any],
    http_resources: Mapping[str, str] | None = None,
) -> RenderInput:
    """A RenderInput of fixture objects, each where a watched object of its kind would be
    (module docstring); a kind neither built in nor watched is refused. `http_resources`:
    the bodies templates read as `http.<name>` (the controller passes its HTTP store's)."""
    fields: dict[str, list[Any]] = {}
    resources: dict[str, list[Any]] = {}
    watched = watched_kinds(template_config)
    for obj in objects:
        kind = obj.get("kind") if isinstance(obj, Mapping) else None
        if not isinstance(obj, Mapping) or not isinstance(kind, str):
            raise ValueError(f"fixture without a kind: {obj!r:.80}")
        api_version = str(obj.get("apiVersion") or "")
        entries = [w for w in watched if w.is_kind(api_version, kind)]
        if kind not in FIXTURE_FIELDS and not entries:
            raise ValueError(
                f"fixture {kind} {_fixture_name(obj)} (apiVersion {api_version!r}): not a"
                f" built-in kind ({', '.join(sorted(FIXTURE_FIELDS))}) and no"
                " spec.watchedResources entry watches it (same apiVersion, and resources"
                f" {resource_plural(kind)!r} or kind {kind!r})"
            )
        selecting = [w for w in entries if w.selects(obj)]
        if kind not in FIXTURE_FIELDS and not selecting:
            names = ", ".join(w.name for w in entries)
            raise ValueError(
                f"fixture {kind} {_fixture_name(obj)}: outside the namespace or labelSelector"
                f" of spec.watchedResources {names}"
            )
        if kind in FIXTURE_FIELDS:
            fields.setdefault(FIXTURE_FIELDS[kind], []).append(obj)
        for w in selecting:
            resources.setdefault(w.name, []).append(obj)
    classes = fields.pop("ingressclasses", None)
    return RenderInput(
        template_config,
        ingressclasses=classes,
        resources=resources,
        http_resources=http_resources or {},
        **fields,
    )


def render_model(value: Any) -> Any:
    """The render model as JSON: what a jsonpath assertion reads. Names are the templates'
    (`ingress.hosts`, `backends[0].servers[0].address`); records (dataclasses, named tuples)
    become objects, sequences arrays, sets sorted arrays, bytes text; helpers (functions
    such as `backend_settings`) are left out."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: render_model(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return {k: render_model(v) for k, v in zip(value._fields, value, strict=True)}
    if isinstance(value, Mapping):
        return {str(k): render_model(v) for k, v in value.items() if not callable(v)}
    if isinstance(value, Set):
        return sorted((render_model(v) for v in value), key=_canonical)
    if isinstance(value, Sequence):
        return [render_model(v) for v in value]
    return str(value)


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _jsonpath(model: Any, spec: Mapping[str, Any]) -> str | None:
    """None when the jsonpath assertion holds on the render model, else why not."""
    path = spec.get("path")
    if not isinstance(path, str) or not path:
        return "jsonpath assertion without a path"
    try:
        found = _JSONPATH.findall(path, model)
    except jsonpath.JSONPathError as exc:
        return f"jsonpath {path!r}: invalid expression: {exc.message}"
    except Exception as exc:  # a user's expression must fail its test, never the gate
        return f"jsonpath {path!r}: evaluation failed: {type(exc).__name__}: {exc}"
    exists = spec.get("exists", True if not {"equals", "count"} & spec.keys() else None)
    if exists is not None and bool(found) != bool(exists):
        shown = f"selects {_canonical(found)[:200]}" if found else "selects nothing"
        return f"jsonpath {path!r} {shown}, expected {'a' if exists else 'no'} match"
    if "count" in spec and len(found) != spec["count"]:
        return f"jsonpath {path!r} selects {len(found)} values, expected {spec['count']}"
    if "equals" in spec:
        if len(found) != 1:
            return f"jsonpath {path!r} selects {len(found)} values, expected exactly one"
        if _canonical(found[0]) != _canonical(spec["equals"]):
            got, want = _canonical(found[0])[:200], _canonical(spec["equals"])[:200]
            return f"jsonpath {path!r} is {got}, expected {want}"
    return None


def _assertion(
    out: RenderOutput, model: Callable[[], Any], spec: Mapping[str, Any], check: Check
) -> str | None:
    """None when the assertion holds, else why not. `model()`: the render model as JSON."""
    kind = spec.get("type")
    if kind == "jsonpath":
        return _jsonpath(model(), spec)
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
        inp = render_input(template_config, test.get("fixtures") or [], http_resources)
        out, context = render_with_model(inp)
    except (RenderError, ValueError) as exc:
        return TestResult(name, False, (f"render failed: {exc}",))
    # Made once, and only for a test with a jsonpath assertion: it copies every object.
    model = functools.cache(lambda: render_model(context))
    failures = []
    for i, spec in enumerate(test.get("assertions") or []):
        problem = _assertion(out, model, spec if isinstance(spec, Mapping) else {}, check)
        if problem:
            failures.append(f"assertions[{i}]: {problem}")
    return TestResult(name, not failures, tuple(failures), out, model)


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

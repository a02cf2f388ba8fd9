"""render(RenderInput) -> RenderOutput: Jinja2 over the template libraries, no I/O.

Library templates (templates/ at the repository root) are read once and kept compiled, like
imported code; user templates from the HAProxyTemplateConfig are compiled and cached by their
source. Everything a template sees is sorted, so the same input gives the same bytes.
"""

from __future__ import annotations

import functools
import re
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

import jinja2
import jinja2.meta
from jinja2.sandbox import ImmutableSandboxedEnvironment

from controller.render import incremental
from controller.render import ingress as ingress_lib
from controller.render import libraries as lib
from controller.render import model as m
from controller.render.incremental import RenderBasis
from controller.render.model import (
    RenderedFile,
    RenderError,
    RenderInput,
    RenderOutput,
    RenderWarning,
)
from controller.render.plan import PlanJSON, build_plan, checksum, plan_id

TEMPLATES_DIR = Path(__file__).resolve().parents[2] / "templates"
MAIN_TEMPLATE = "haproxy.cfg.j2"
MAP_TEMPLATE = "ingress/map.j2"
CRT_LIST_TEMPLATE = "ingress/crt-list.j2"
CRT_LIST_PATH = "crt-lists/crt-list.txt"
# The ingress library's maps, always rendered (even empty) so that the first route of a kind
# is a runtime map change, not a new file.
INGRESS_MAPS = {
    "hosts": "maps/hosts.map",
    "hosts_wildcard": "maps/hosts-wildcard.map",
    "path_exact": "maps/path-exact.map",
    "path_prefix_exact": "maps/path-prefix-exact.map",
    "path_prefix": "maps/path-prefix.map",
    "sni_passthrough": "maps/sni-passthrough.map",
}
_FILE_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_USER_PREFIX = "spec."
_LIB_PREFIX = "templates/"


class _LibraryLoader(jinja2.BaseLoader):
    """Loads library templates from templates/; reports them as `templates/<name>`."""

    def __init__(self, root: Path):
        self.root = root.resolve()

    def get_source(
        self, environment: jinja2.Environment, template: str
    ) -> tuple[str, str, Callable[[], bool]]:
        path = (self.root / template).resolve()
        if self.root not in path.parents or not path.is_file():
            raise jinja2.TemplateNotFound(template)
        return path.read_text(encoding="utf-8"), _LIB_PREFIX + template, lambda: True


def _fail(message: str) -> NoReturn:
    """`{{ fail("why") }}` lets a template refuse to render with its own message."""
    raise jinja2.TemplateRuntimeError(message)


@functools.lru_cache(maxsize=4)
def environment(templates_dir: str = str(TEMPLATES_DIR)) -> ImmutableSandboxedEnvironment:
    # Immutable sandbox: templates come from a custom resource, so they must not reach Python
    # internals, and they must not mutate the watched objects they are given (the caches
    # share them; a render stays a pure function).
    env = ImmutableSandboxedEnvironment(
        loader=_LibraryLoader(Path(templates_dir)),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        auto_reload=False,
        cache_size=-1,
    )
    env.globals["fail"] = _fail
    env.filters["server_params"] = lib.server_params
    return env


@functools.lru_cache(maxsize=128)
def _user_template(templates_dir: str, label: str, source: str) -> jinja2.Template:
    env = environment(templates_dir)
    try:
        code = env.compile(source, name=label, filename=label)
    except jinja2.TemplateSyntaxError as exc:
        raise RenderError(f"syntax error: {exc.message}", label, exc.lineno) from None
    return env.template_class.from_code(env, code, env.make_globals(None), None)


def _template_frame(exc: BaseException) -> tuple[str | None, int | None]:
    # Jinja2 rewrites tracebacks so template frames carry the template's name and line.
    found: tuple[str | None, int | None] = (None, None)
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename.startswith((_USER_PREFIX, _LIB_PREFIX)):
            found = (frame.filename, frame.lineno)
    return found


def _run(template: jinja2.Template | Callable[[], jinja2.Template], label: str, ctx: dict) -> str:
    try:
        if not isinstance(template, jinja2.Template):
            template = template()
        return template.render(ctx)
    except RenderError:
        raise
    except jinja2.TemplateSyntaxError as exc:
        where = exc.filename or exc.name or label
        raise RenderError(f"syntax error: {exc.message}", where, exc.lineno) from None
    except jinja2.TemplateNotFound as exc:
        name, line = _template_frame(exc)
        raise RenderError(f"template not found: {exc.name}", name or label, line) from None
    except Exception as exc:
        name, line = _template_frame(exc)
        kind = "undefined variable" if isinstance(exc, jinja2.UndefinedError) else "error"
        raise RenderError(f"{kind}: {exc}", name or label, line) from exc


class _SortedObjects(Sequence[Mapping[str, Any]]):
    """Watched objects sorted by (namespace, name), sorted on first use: most templates never
    look at the raw lists, and sorting thousands of objects each render adds up."""

    def __init__(self, objs: Sequence[Mapping[str, Any]]):
        self._objs = objs
        self._sorted: list[Mapping[str, Any]] | None = None

    def _items(self) -> list[Mapping[str, Any]]:
        if self._sorted is None:
            self._sorted = sorted(self._objs, key=lib.obj_key)
        return self._sorted

    def __getitem__(self, index):  # type: ignore[override]
        return self._items()[index]

    def __len__(self) -> int:
        return len(self._objs)

    def __iter__(self) -> Iterator[Mapping[str, Any]]:
        return iter(self._items())


def _sorted_objects(objs: Sequence[Mapping[str, Any]]) -> _SortedObjects:
    return _SortedObjects(objs)


SETTINGS_TEMPLATE = "kubernetes-backends/settings.cfg.j2"


@functools.lru_cache(maxsize=4)
def _settings_read_only_backend(env: ImmutableSandboxedEnvironment) -> bool:
    """Whether the settings template, with every template it includes, reads nothing but
    `backend` (true of the bundled library). Its text is then a function of the backend's
    settings alone and is kept across renders: a full render re-renders only the backends
    whose policies changed (docs/design/incremental.md)."""
    loader = env.loader
    assert loader is not None  # environment() always sets the library loader
    seen: set[str] = set()
    pending = [SETTINGS_TEMPLATE]
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        ast = env.parse(loader.get_source(env, name)[0])
        if not jinja2.meta.find_undeclared_variables(ast) <= {"backend"}:
            return False
        for included in jinja2.meta.find_referenced_templates(ast):
            if included is None:  # a computed name: cannot tell what it reads
                return False
            pending.append(included)
    return True


# Settings texts kept across renders (keyed by environment and the backend's settings),
# bounded so a churning cluster cannot grow it without limit.
_SETTINGS_CACHE_MAX = 16384
_settings_cache: dict[tuple[Any, ...], str] = {}


def _backend_settings(
    env: ImmutableSandboxedEnvironment, ctx: dict[str, Any]
) -> Callable[[lib.Backend], str]:
    """`backend_settings(backend)` for the templates: its settings lines, rendered once per
    distinct (policy, route, server options, userlist, mode): per render, or per process
    when the settings template reads only `backend`."""
    shared = _settings_read_only_backend(env)
    cache: dict[tuple[Any, ...], str] = _settings_cache if shared else {}

    def settings(backend: lib.Backend) -> str:
        key = (
            env if shared else None,
            backend.policy,
            backend.route,
            backend.server_options,
            backend.userlist,
            backend.mode,
        )
        text = cache.get(key)
        if text is None:
            if shared and len(cache) >= _SETTINGS_CACHE_MAX:
                cache.clear()
            template = env.get_template(SETTINGS_TEMPLATE)
            text = cache[key] = template.render({**ctx, "backend": backend})
        return text

    return settings


def _named_templates(spec: Mapping[str, Any], field: str) -> list[tuple[str, str]]:
    entries = spec.get(field) or {}
    if not isinstance(entries, Mapping):
        raise RenderError(f"spec.{field} is not an object")
    out = []
    for name in sorted(entries):
        if not _FILE_NAME_RE.fullmatch(name) or ".." in name:
            raise RenderError(f"spec.{field}: invalid file name {name!r}")
        entry = entries[name]
        source = entry.get("template") if isinstance(entry, Mapping) else None
        if not isinstance(source, str):
            raise RenderError(f"spec.{field}.{name}: template is not a string")
        out.append((name, source))
    return out


def _build_libraries(
    inp: RenderInput,
    settings: lib.LibrarySettings,
    objs: Mapping[str, list[Mapping[str, Any]]],
    classes: list[Mapping[str, Any]] | None,
    warnings: list[RenderWarning],
    ref_warnings: dict[lib.ServiceRef, tuple[RenderWarning, ...]] | None = None,
) -> tuple[lib.IngressModel, tuple[lib.Backend, ...], set[str]]:
    """The data side of the ingress and kubernetes-backends libraries; the Service ports'
    warnings come last in `warnings` (and in `ref_warnings` when given)."""
    model = lib.IngressModel()
    backends: tuple[lib.Backend, ...] = ()
    gated_pods: set[str] = set()
    try:
        if settings.ingress:
            model = ingress_lib.build_ingress_model(
                objs["ingresses"], objs["services"], objs["secrets"], classes, settings, warnings
            )
        if settings.kubernetes_backends:
            previous = (inp.previous_plan or {}).get("backends")
            backends = lib.build_backends(
                model.services,
                objs["services"],
                objs["endpointslices"],
                objs["pods"],
                settings,
                warnings,
                previous if isinstance(previous, Mapping) else None,
                gated_pods,
                ref_warnings,
            )
        elif model.services:
            warnings.append(
                RenderWarning(
                    "HAProxyTemplateConfig",
                    "",
                    "",
                    m.LIBRARY_DISABLED,
                    "kubernetesBackends library disabled: ingress routes have no backends",
                )
            )
    except Exception as exc:  # a library bug must surface as a render error, not a crash
        raise RenderError(f"template library failed: {type(exc).__name__}: {exc}") from exc

    return model, backends, gated_pods


def _render_files(
    env: ImmutableSandboxedEnvironment,
    tdir: str,
    spec: Mapping[str, Any],
    settings: lib.LibrarySettings,
    model: lib.IngressModel,
    ctx: dict[str, Any],
) -> tuple[RenderedFile, ...]:
    """Every file of the tree from the templates, in path order."""
    files: dict[str, RenderedFile] = {}

    def add(path: str, kind: str, content: str | bytes) -> None:
        if path in files:
            raise RenderError(f"two templates render {path}")
        data = content.encode("utf-8") if isinstance(content, str) else content
        files[path] = RenderedFile(path, kind, data)

    if settings.ingress:
        map_template = functools.partial(env.get_template, MAP_TEMPLATE)
        for field, path in INGRESS_MAPS.items():
            entries = getattr(model, field)
            add(path, "map", _run(map_template, _LIB_PREFIX + MAP_TEMPLATE, {"entries": entries}))
        for cert in model.certificates:
            add(cert.path, "certificate", cert.content)
        default_cert = model.default_certificate
        if default_cert is not None and default_cert.path not in files:
            add(default_cert.path, "certificate", default_cert.content)
        for path, content in model.ca_files:
            add(path, "certificate", content)
        if model.certificates:
            crt = functools.partial(env.get_template, CRT_LIST_TEMPLATE)
            add(CRT_LIST_PATH, "crt-list", _run(crt, _LIB_PREFIX + CRT_LIST_TEMPLATE, ctx))

    for field, directory, kind in (("maps", "maps", "map"), ("files", "general", "general")):
        for name, source in _named_templates(spec, field):
            label = f"spec.{field}.{name}.template"
            add(f"{directory}/{name}", kind, _run(_user_template(tdir, label, source), label, ctx))

    haproxy_config = spec.get("haproxyConfig") or {}
    if not isinstance(haproxy_config, Mapping):
        raise RenderError("spec.haproxyConfig is not an object")
    override = haproxy_config.get("template")
    if override:
        label = "spec.haproxyConfig.template"
        config = _run(_user_template(tdir, label, override), label, ctx)
    elif settings.base:
        config = _run(functools.partial(env.get_template, MAIN_TEMPLATE), MAIN_TEMPLATE, ctx)
    else:
        raise RenderError("base library disabled and spec.haproxyConfig.template is empty")
    add("haproxy.cfg", "config", config)

    return tuple(files[p] for p in sorted(files))


def render(inp: RenderInput, templates_dir: str | None = None) -> RenderOutput:
    """Render the complete file set for one HAProxyTemplateConfig and its watched objects.

    Raises RenderError for a fault no object-level isolation can fix (bad template, bad
    template config). Bad watched objects are skipped and listed in `warnings`.
    """
    return _render(inp, templates_dir, keep_basis=False)[0]


def render_with_basis(
    inp: RenderInput, templates_dir: str | None = None
) -> tuple[RenderOutput, RenderBasis | None]:
    """`render`, plus the basis the incremental path updates from (None when this template
    config's renders cannot be updated incrementally; docs/design/incremental.md)."""
    output, basis, _ = _render(inp, templates_dir, keep_basis=True)
    return output, basis


def render_with_model(
    inp: RenderInput, templates_dir: str | None = None
) -> tuple[RenderOutput, Mapping[str, Any]]:
    """`render`, plus the render model: the context every template saw (names as templates
    use them: `ingress`, `backends`, `services`...). Validation tests' jsonpath assertions
    read it (controller/render/validate.py)."""
    output, _, context = _render(inp, templates_dir, keep_basis=False)
    return output, context


def _render(
    inp: RenderInput, templates_dir: str | None, keep_basis: bool
) -> tuple[RenderOutput, RenderBasis | None, dict[str, Any]]:
    tdir = templates_dir or str(TEMPLATES_DIR)
    env = environment(tdir)
    cfg = inp.template_config or {}
    spec = cfg.get("spec") if isinstance(cfg, Mapping) else None
    spec = spec or {}
    if not isinstance(spec, Mapping):
        raise RenderError("template config spec is not an object")
    try:
        settings = lib.LibrarySettings.from_spec(spec)
    except (ValueError, AttributeError, TypeError) as exc:
        raise RenderError(f"spec.templateLibraries: {exc}") from None

    warnings: list[RenderWarning] = []
    objs = {
        kind: lib.usable_objects(getattr(inp, kind), kind, warnings)
        for kind in ("ingresses", "services", "endpointslices", "secrets", "pods")
    }
    classes = None
    if inp.ingressclasses is not None:
        classes = lib.usable_objects(inp.ingressclasses, "ingressclasses", warnings)
    ref_warnings: dict[lib.ServiceRef, tuple[RenderWarning, ...]] = {}
    model, backends, gated_pods = _build_libraries(
        inp, settings, objs, classes, warnings, ref_warnings
    )
    ports_end = len(warnings)
    ports_span = (ports_end - sum(map(len, ref_warnings.values())), ports_end)

    ctx: dict[str, Any] = {
        "template_config": cfg,
        "spec": spec,
        "libraries": settings,
        "ingresses": _sorted_objects(objs["ingresses"]),
        "services": _sorted_objects(objs["services"]),
        "endpointslices": _sorted_objects(objs["endpointslices"]),
        "secrets": _sorted_objects(objs["secrets"]),
        "pods": _sorted_objects(objs["pods"]),
        "ingressclasses": _sorted_objects(classes or []),
        "resources": {
            k: _sorted_objects(lib.usable_objects(v, k, warnings))
            for k, v in sorted(inp.resources.items())
        },
        "http": dict(sorted(inp.http_resources.items())),
        "extra": spec.get("extraContext") or {},
        "ingress": model,
        "backends": backends,
        "backend_names": frozenset(b.name for b in backends),
        "certificates": model.certificates,
        "crt_list": CRT_LIST_PATH if model.certificates else None,
        "default_certificate": model.default_certificate,
        "userlists": model.userlists,
        "maps": INGRESS_MAPS,
        "default_backend": model.default_backend or lib.NOT_FOUND_BACKEND,
        "not_found_backend": lib.NOT_FOUND_BACKEND,
    }

    ctx["backend_settings"] = _backend_settings(env, ctx)
    ordered = _render_files(env, tdir, spec, settings, model, ctx)
    output, plan_json = _output(inp, ordered, warnings, gated_pods, model.served, keep_basis)
    if plan_json is None:
        return output, None, ctx
    basis = incremental.basis_of(
        inp,
        output,
        settings,
        model.services,
        backends,
        ref_warnings,
        ports_span,
        plan_json,
        model.secrets_read,
    )
    return output, basis, ctx


def _output(
    inp: RenderInput,
    ordered: tuple[RenderedFile, ...],
    warnings: list[RenderWarning],
    gated_pods: set[str],
    served: tuple[str, ...],
    keep_plan_json: bool,
) -> tuple[RenderOutput, PlanJSON | None]:
    try:
        plan = build_plan(ordered, inp.previous_plan)
    except (UnicodeDecodeError, ValueError) as exc:
        raise RenderError(f"rendered output cannot be planned: {exc}") from None
    # The basis keeps the plan's JSON in pieces; the plan ID is the hash of the same text.
    plan_json = PlanJSON.of(plan) if keep_plan_json else None
    output = RenderOutput(
        files=ordered,
        plan=plan,
        plan_id=plan_json.plan_id() if plan_json else plan_id(plan),
        checksum=checksum(ordered),
        structure_digest=plan["structure_digest"],
        warnings=tuple(warnings),
        gate_ready_pods=tuple(sorted(gated_pods)),
        served_ingresses=served,
        http_digests=tuple(sorted((n, m.text_digest(b)) for n, b in inp.http_resources.items())),
    )
    return output, plan_json

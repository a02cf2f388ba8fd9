"""The incremental render: an EndpointSlice change recomputes only the backends of its
Service and yields their runtime operations, with the same bytes a full render gives
(docs/design/incremental.md). Pure: no I/O, no clock.

A full render (controller.render.engine.render_with_basis) leaves a `RenderBasis`: the
inputs it read, its output, each Service's route backends, the EndpointSlices grouped by
Service, haproxy.cfg cut into fixed text and one block of server lines per backend, the
warnings of each Service port and the plan's canonical JSON in pieces. `update(basis, inp)`
then answers for a new input:

- None: something other than EndpointSlices changed (templates, Ingresses, Services,
  Secrets, classes, HTTP bodies...) or a backend's slot count would change; the caller runs
  the full render.
- an `Update`: the new output (equal, field for field, to what `render` gives for `inp`
  with the basis output as previous plan), the `set_server` operations from the basis
  output to it, and the basis for the next change.

Nothing outside the server lines of the touched backends changes, so the structure digest
stays and the render gate's verdict on the basis stands.
"""

from __future__ import annotations

import copy
import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from controller.render import libraries as lib
from controller.render.model import (
    RenderedFile,
    RenderInput,
    RenderOutput,
    RenderWarning,
    RuntimeDelta,
)
from controller.render.plan import PlanJSON, checksum, server_operations
from controller.watch.store import same_objects

Key = tuple[str, str]  # (namespace, name)
CONFIG = "haproxy.cfg"
# RenderInput fields an update may not see changed (compared by object identity: the watch
# caches replace an object's dict when it changes and never mutate one).
_FIXED_KINDS = ("ingresses", "services", "secrets", "pods")
# Ingress and Service status writes (the leader publishes load balancer addresses) change
# nothing an eligible render reads; neither does the metadata the API server maintains.
_STATUS_ASIDE = frozenset({"ingresses", "services"})
_SERVER_METADATA = frozenset({"resourceVersion", "managedFields", "generation"})
# A line that starts a section (no indent, not a comment): the end of a backend's section.
_SECTION_START = re.compile(r"\n[^\s#]")


@dataclass(frozen=True)
class RenderBasis:
    """What the incremental path keeps of the last render (see the module docstring)."""

    inputs: RenderInput
    output: RenderOutput
    settings: lib.LibrarySettings
    services: Mapping[Key, Mapping[str, Any]]  # Service by key
    specs: Mapping[Key, tuple[lib.RouteBackend, ...]]  # Service -> its route backends
    slices: Mapping[Key, tuple[Mapping[str, Any], ...]]  # Service -> its EndpointSlices
    chunks: tuple[str, ...]  # haproxy.cfg: fixed text and server blocks, in order
    sizes: tuple[int, ...]  # each chunk's length in bytes (UTF-8), for the apply's edits
    blocks: Mapping[str, int]  # backend name -> index of its server block in chunks
    ref_warnings: Mapping[lib.ServiceRef, tuple[RenderWarning, ...]]  # render order
    warnings_span: tuple[int, int]  # where the Service ports' warnings sit in output.warnings
    plan_json: PlanJSON
    root_checksum: str  # checksum of the full render this basis descends from
    secrets_read: frozenset[Key] = frozenset()  # the only Secrets the render depends on
    updates: int = 0  # incremental updates since that full render
    # A copy of the template config's spec as rendered: a caller that changes the one object
    # in place must still take the full render (the inputs' identity would not show it).
    template_spec: Any = None


@dataclass(frozen=True)
class Update:
    """One incremental step: the output (the basis output itself when nothing it renders
    changed), its operations from the basis output, and the basis for the next step."""

    output: RenderOutput
    operations: tuple[dict[str, Any], ...]
    basis: RenderBasis
    backends: tuple[str, ...]  # backends whose servers changed


def eligible(spec: Mapping[str, Any], settings: lib.LibrarySettings) -> bool:
    """Whether renders of this template config can be updated incrementally: only the
    libraries render (no user template could read EndpointSlices), the kubernetes-backends
    library draws the servers, and the readiness gate (pods decide enabled) is off."""
    haproxy_config = spec.get("haproxyConfig") or {}
    return (
        settings.base
        and settings.kubernetes_backends
        and not settings.readiness_gate
        and not spec.get("maps")
        and not spec.get("files")
        and isinstance(haproxy_config, Mapping)
        and not haproxy_config.get("template")
    )


def server_block(servers: Iterable[lib.Server]) -> str:
    """A backend's server lines as the kubernetes-backends library renders them."""
    return "".join(f"    server {s.name} {lib.server_params(s)}\n" for s in servers)


def plan_servers(servers: Iterable[lib.Server]) -> dict[str, dict[str, Any]]:
    """A backend's servers as the plan reads them back from the server lines."""
    return {
        s.name: {"address": s.address, "port": s.port, "weight": s.weight, "enabled": s.enabled}
        for s in servers
    }


def cut_config(
    config: str, backends: Sequence[lib.Backend], plan_backends: Mapping[str, Mapping]
) -> tuple[tuple[str, ...], dict[str, int]] | None:
    """haproxy.cfg as fixed text and one server block per backend, or None when a backend's
    servers are not exactly one block of library server lines in its own section."""
    chunks: list[str] = []
    blocks: dict[str, int] = {}
    pos = 0
    for backend in backends:
        header = f"\nbackend {backend.name}\n"
        head = config.find(header, pos)
        block = server_block(backend.servers)
        at = config.find(block, head + len(header)) if head >= 0 else -1
        if at < 0 or config[at - 1] != "\n":
            return None
        if len(plan_backends.get(backend.name, ())) != len(backend.servers):
            return None
        if _SECTION_START.search(config, head + len(header) - 1, at) is not None:
            return None  # the block found belongs to a later section
        chunks.append(config[pos:at])
        blocks[backend.name] = len(chunks)
        chunks.append(block)
        pos = at + len(block)
    chunks.append(config[pos:])
    return tuple(chunks), blocks


def basis_of(
    inp: RenderInput,
    output: RenderOutput,
    settings: lib.LibrarySettings,
    specs: Sequence[lib.RouteBackend],
    backends: Sequence[lib.Backend],
    ref_warnings: Mapping[lib.ServiceRef, tuple[RenderWarning, ...]],
    warnings_span: tuple[int, int],
    plan_json: PlanJSON,
    secrets_read: frozenset[Key] = frozenset(),
) -> RenderBasis | None:
    """The basis a full render leaves, or None when its output cannot be updated."""
    spec = (inp.template_config or {}).get("spec") or {}
    if not eligible(spec, settings):
        return None
    cut = cut_config(output.config.decode(), backends, output.plan["backends"])
    if cut is None:
        return None
    by_service: dict[Key, list[lib.RouteBackend]] = {}
    for route_backend in sorted(specs, key=lambda s: s.name):
        ref = route_backend.ref
        by_service.setdefault((ref.namespace, ref.service), []).append(route_backend)
    slices: dict[Key, list[Mapping[str, Any]]] = {}
    for sl in inp.endpointslices:
        try:
            owner = lib.slice_owner(sl)
        except AttributeError:
            continue  # warned by the render; any change to it takes the full path
        if owner is not None:
            slices.setdefault(owner, []).append(sl)
    return RenderBasis(
        inputs=inp,
        output=output,
        settings=settings,
        services={lib.obj_key(s): s for s in inp.services if _named(s)},
        specs={k: tuple(v) for k, v in by_service.items()},
        slices={k: tuple(v) for k, v in slices.items()},
        chunks=cut[0],
        sizes=tuple(len(chunk.encode()) for chunk in cut[0]),
        blocks=cut[1],
        ref_warnings=dict(ref_warnings),
        warnings_span=warnings_span,
        plan_json=plan_json,
        root_checksum=output.checksum,
        secrets_read=secrets_read,
        template_spec=copy.deepcopy((inp.template_config or {}).get("spec")),
    )


def _named(obj: Any) -> bool:
    meta = obj.get("metadata") if lib.is_map(obj) else None
    return lib.is_map(meta) and isinstance(meta.get("name"), str)


def _same_objects(old: Sequence[Any], new: Sequence[Any], status_aside: bool = False) -> bool:
    """The same objects (by identity); with `status_aside`, an object replaced by one that
    differs only in what no library reads (a status write) counts as the same."""
    if same_objects(old, new):
        return True
    if len(old) != len(new):
        return False
    return status_aside and all(
        a is b or _render_view(a) == _render_view(b) for a, b in zip(old, new, strict=True)
    )


def _render_view(obj: Any) -> Any:
    """What an eligible render reads of an Ingress or Service: all but its status and the
    metadata the API server keeps for itself."""
    if not lib.is_map(obj):
        return obj
    view = {k: v for k, v in obj.items() if k != "status"}
    meta = obj.get("metadata")
    if lib.is_map(meta):
        view["metadata"] = {k: v for k, v in meta.items() if k not in _SERVER_METADATA}
    return view


def others_unchanged(
    old: RenderInput, new: RenderInput, secrets_read: frozenset[Key] = frozenset()
) -> bool:
    """Whether everything but the EndpointSlices is what the basis rendered; Secrets other
    than `secrets_read` (those the render looked up) do not count."""
    if old.template_config is not new.template_config:
        old_spec = (old.template_config or {}).get("spec")
        if old_spec != (new.template_config or {}).get("spec"):
            return False  # eligible renders read only the spec (status writes don't count)
    if (old.ingressclasses is None) != (new.ingressclasses is None):
        return False
    if old.ingressclasses is not None and not _same_objects(
        old.ingressclasses, new.ingressclasses or ()
    ):
        return False
    for kind in _FIXED_KINDS:
        same = _same_objects(getattr(old, kind), getattr(new, kind), kind in _STATUS_ASIDE)
        if kind == "secrets" and not same:
            same = _unread_secrets_only(old.secrets, new.secrets, secrets_read)
        if not same:
            return False
    if set(old.resources) != set(new.resources):
        return False
    if any(not _same_objects(v, new.resources[k]) for k, v in old.resources.items()):
        return False
    return old.http_resources == new.http_resources


def _unread_secrets_only(
    old: Sequence[Mapping[str, Any]], new: Sequence[Mapping[str, Any]], read: frozenset[Key]
) -> bool:
    """Every Secret added, removed or replaced is named and one the render never looked up
    (such as the Secrets publication writes)."""
    delta = changed_slices(old, new)  # the same identity diff, for any kind
    if delta is None:
        return False
    return all(lib.obj_key(s) not in read for s in (*delta[0], *delta[1]))


def changed_slices(
    old: Sequence[Mapping[str, Any]], new: Sequence[Mapping[str, Any]]
) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]] | None:
    """(old objects gone or replaced, new objects added or replacing), by identity; None
    when one of them is not a usable named object (the full render warns about it)."""
    if len(old) == len(new):
        pairs = [(a, b) for a, b in zip(old, new, strict=True) if a is not b]
        if all(_named(a) and _named(b) and lib.obj_key(a) == lib.obj_key(b) for a, b in pairs):
            return [a for a, _ in pairs], [b for _, b in pairs]
    old_ids = {id(o) for o in old}
    new_ids = {id(o) for o in new}
    gone = [o for o in old if id(o) not in new_ids]
    added = [o for o in new if id(o) not in old_ids]
    if not all(_named(o) for o in (*gone, *added)):
        return None
    return gone, added


def _regroup(
    basis: RenderBasis, gone: Sequence[Mapping[str, Any]], added: Sequence[Mapping[str, Any]]
) -> tuple[dict[Key, tuple[Mapping[str, Any], ...]], set[Key]] | None:
    """The EndpointSlices of every Service a change touches, and those Services."""
    touched: dict[Key, dict[Key, Mapping[str, Any]]] = {}

    def group(owner: Key) -> dict[Key, Mapping[str, Any]]:
        if owner not in touched:
            touched[owner] = {lib.obj_key(s): s for s in basis.slices.get(owner, ())}
        return touched[owner]

    try:
        for sl in gone:
            owner = lib.slice_owner(sl)
            if owner is not None:
                group(owner).pop(lib.obj_key(sl), None)
        for sl in added:
            owner = lib.slice_owner(sl)
            if owner is not None:
                group(owner)[lib.obj_key(sl)] = sl
    except AttributeError:
        return None  # malformed labels: the full render warns
    regrouped = {owner: tuple(objs[k] for k in sorted(objs)) for owner, objs in touched.items()}
    return regrouped, set(touched)


def update(basis: RenderBasis, inp: RenderInput) -> Update | None:
    """The incremental step from `basis` to `inp`, or None for the full render."""
    if inp.previous_plan is not basis.output.plan:
        return None
    if (inp.template_config or {}).get("spec") != basis.template_spec:
        return None
    if not others_unchanged(basis.inputs, inp, basis.secrets_read):
        return None
    delta = changed_slices(basis.inputs.endpointslices, inp.endpointslices)
    if delta is None:
        return None
    regrouped = _regroup(basis, *delta)
    if regrouped is None:
        return None
    slices, touched = regrouped
    all_slices = {**basis.slices, **slices}
    new_servers, touched_warnings = _recompute(basis, touched, all_slices)
    if new_servers is None:
        return None
    for key in touched:
        if not all_slices[key]:
            del all_slices[key]
    next_basis = replace(basis, inputs=inp, slices=all_slices, updates=basis.updates + 1)
    changed = {
        name: servers
        for name, servers in new_servers.items()
        if server_block(servers) != basis.chunks[basis.blocks[name]]
    }
    warnings, ref_warnings, span = _warnings(basis, touched_warnings)
    next_basis = replace(next_basis, ref_warnings=ref_warnings, warnings_span=span)
    if not changed and warnings == basis.output.warnings:
        return Update(basis.output, (), next_basis, ())
    return _step(basis, next_basis, changed, warnings)


def _recompute(
    basis: RenderBasis, touched: set[Key], slices: Mapping[Key, Sequence[Mapping[str, Any]]]
) -> tuple[dict[str, tuple[lib.Server, ...]] | None, dict]:
    """New servers of every backend of the touched Services (None when a slot count would
    change: new server lines, a reload) and the touched Service ports' warnings."""
    ref_warnings: dict[lib.ServiceRef, tuple[RenderWarning, ...]] = {}
    servers: dict[str, tuple[lib.Server, ...]] = {}
    previous = basis.output.plan["backends"]
    found: dict[lib.ServiceRef, tuple[list, dict]] = {}
    for key in sorted(touched):
        for spec in basis.specs.get(key, ()):
            if spec.ref not in found:
                ordered, endpoints, warned = lib.service_endpoints(
                    spec, basis.services, slices, {}, basis.settings
                )
                found[spec.ref] = ordered, endpoints
                ref_warnings[spec.ref] = warned
            ordered, endpoints = found[spec.ref]
            old = previous.get(spec.name)
            new = lib.backend_servers(ordered, endpoints, basis.settings.server_slots, old)
            if old is None or len(new) != len(old) or spec.name not in basis.blocks:
                return None, ref_warnings
            servers[spec.name] = new
    return servers, ref_warnings


def _warnings(
    basis: RenderBasis, touched: Mapping[lib.ServiceRef, tuple[RenderWarning, ...]]
) -> tuple[
    tuple[RenderWarning, ...],
    Mapping[lib.ServiceRef, tuple[RenderWarning, ...]],
    tuple[int, int],
]:
    """The output's warnings with the touched Service ports' share replaced, and for the
    next basis every port's warnings (render order) and where they sit."""
    old = basis.output.warnings
    if all(basis.ref_warnings.get(ref) == w for ref, w in touched.items()):
        return old, basis.ref_warnings, basis.warnings_span  # the usual case: as before
    start, end = basis.warnings_span
    merged = {**basis.ref_warnings, **touched}  # keeps the render order of the ports
    ports = tuple(w for warned in merged.values() for w in warned)
    return old[:start] + ports + old[end:], merged, (start, start + len(ports))


def _step(
    basis: RenderBasis,
    next_basis: RenderBasis,
    changed: Mapping[str, tuple[lib.Server, ...]],
    warnings: tuple[RenderWarning, ...],
) -> Update:
    old = basis.output
    chunks = list(basis.chunks)
    sizes = list(basis.sizes)
    starts = list(itertools.accumulate(sizes, initial=0))
    edits: list[tuple[int, int, str]] = []
    at = {basis.blocks[name]: name for name in changed}
    for index in sorted(at):
        block = server_block(changed[at[index]])
        edits.append((starts[index], sizes[index], block))
        chunks[index] = block
        sizes[index] = len(block.encode())
    config = RenderedFile(CONFIG, "config", "".join(chunks).encode())
    files = tuple(config if f.path == CONFIG else f for f in old.files)
    plan = dict(old.plan)
    plan["backends"] = {**old.plan["backends"], **{n: plan_servers(s) for n, s in changed.items()}}
    plan["files"] = {**old.plan["files"], CONFIG: {"kind": "config", "sha256": config.sha256}}
    operations: list[dict[str, Any]] = []
    for name in sorted(changed):
        ops = server_operations(name, old.plan["backends"][name], plan["backends"][name])
        assert ops is not None  # same slot names: cut_config and _recompute checked it
        operations += ops
    plan_json = basis.plan_json.replaced(plan, changed, ("files",))
    output = replace(
        old,
        files=files,
        plan=plan,
        plan_id=plan_json.plan_id(),
        checksum=checksum(files),
        warnings=warnings,
        runtime_delta=RuntimeDelta(old.plan_id, tuple(operations), {CONFIG: tuple(edits)}),
    )
    next_basis = replace(
        next_basis,
        output=output,
        chunks=tuple(chunks),
        sizes=tuple(sizes),
        plan_json=plan_json,
    )
    return Update(output, tuple(operations), next_basis, tuple(sorted(changed)))


def structure_key(output: RenderOutput) -> tuple[str, tuple[tuple[str, str], ...]]:
    """What the render gate's verdict on an output covers, less the runtime attributes of
    server slots: the structure digest of haproxy.cfg and every other file's digest. Two
    outputs with the same key get the same verdict."""
    others = tuple((f.path, f.sha256) for f in output.files if f.path != CONFIG)
    return output.structure_digest, others


def differences(incremental: RenderOutput, full: RenderOutput) -> list[str]:
    """What differs between an incrementally updated output and the full render of the
    same input (the consistency check); empty when they agree byte for byte."""
    out = []
    for name in ("plan_id", "checksum", "structure_digest"):
        if getattr(incremental, name) != getattr(full, name):
            out.append(name)
    for a, b in zip(incremental.files, full.files, strict=False):
        if a != b:
            out.append(f"file {b.path}")
    if incremental.paths() != full.paths():
        out.append("file set")
    if incremental.plan != full.plan:
        out.append("plan")
    for name in ("warnings", "gate_ready_pods", "served_ingresses", "http_digests"):
        if getattr(incremental, name) != getattr(full, name):
            out.append(name)
    return out

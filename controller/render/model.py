"""Inputs and outputs of a render: frozen dataclasses, no behaviour beyond small accessors."""

from __future__ import annotations

import base64
import functools
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

FILE_KINDS = ("config", "map", "general", "certificate", "crt-list")


def text_digest(text: str) -> str:
    """Hex sha256 of a text's UTF-8 bytes (names an HTTP resource body in RenderOutput)."""
    return hashlib.sha256(text.encode()).hexdigest()


class RenderError(Exception):
    """A render that cannot produce output: bad template, failed library, bad configuration.

    `template` names the template (library path or `spec.<field>` of the template config) and
    `line` the template line when known, so the message on /healthz points at the fault.
    """

    def __init__(self, message: str, template: str | None = None, line: int | None = None):
        self.message = message
        self.template = template
        self.line = line
        where = ""
        if template:
            where = f"template {template}" + (f" line {line}" if line else "") + ": "
        super().__init__(where + message)


# RenderWarning reasons: Event reasons and haptic_render_warnings{reason} labels.
INVALID_OBJECT = "InvalidObject"
INVALID_ANNOTATION = "InvalidAnnotation"
SERVICE_NOT_FOUND = "ServiceNotFound"
SERVICE_PORT_NOT_FOUND = "ServicePortNotFound"
UNSUPPORTED_SERVICE = "UnsupportedService"
SECRET_NOT_FOUND = "SecretNotFound"
INVALID_SECRET = "InvalidSecret"
ROUTE_CONFLICT = "RouteConflict"
UNSUPPORTED_BACKEND = "UnsupportedBackend"
DEFAULT_BACKEND_CONFLICT = "DefaultBackendConflict"
INVALID_ENDPOINTSLICE = "InvalidEndpointSlice"
LIBRARY_DISABLED = "LibraryDisabled"
REASONS = (
    INVALID_OBJECT,
    INVALID_ANNOTATION,
    SERVICE_NOT_FOUND,
    SERVICE_PORT_NOT_FOUND,
    UNSUPPORTED_SERVICE,
    SECRET_NOT_FOUND,
    INVALID_SECRET,
    ROUTE_CONFLICT,
    UNSUPPORTED_BACKEND,
    DEFAULT_BACKEND_CONFLICT,
    INVALID_ENDPOINTSLICE,
    LIBRARY_DISABLED,
)


@dataclass(frozen=True)
class RenderWarning:
    """One watched object the render skipped or degraded, and why.

    `kind`, `namespace` and `name` name the object the warning is about (the Ingress whose
    route was refused, the Service whose annotation is invalid...); `reason` is a stable
    CamelCase code (the Event reason and the `haptic_render_warnings{reason}` label) and
    `message` says what happened in a sentence.
    """

    kind: str
    namespace: str
    name: str
    reason: str
    message: str

    def __str__(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind.lower()} {where}: {self.message}"


@dataclass(frozen=True)
class RenderInput:
    """Everything a render reads: the HAProxyTemplateConfig and the watched objects.

    Objects are plain dicts as the Kubernetes API returns them (camelCase). Order does not
    matter: the render sorts everything. `resources` holds custom watched resources by their
    name in spec.watchedResources, `http_resources` the fetched bodies by name.
    `previous_plan` (optional) is the plan of the last render: endpoints keep their server
    slots, so an endpoint change becomes the fewest runtime operations. Without it servers
    fill the slots in address order.
    `ingressclasses` are the cluster's networking.k8s.io/v1 IngressClasses: they decide which
    Ingresses are ours. None means the caller has no class information (offline renders of
    fixtures): then every Ingress counts as ours, subject to `ingressClassName` in the
    template config. The controller always passes the watched classes, possibly none.
    """

    template_config: Mapping[str, Any]
    ingresses: Sequence[Mapping[str, Any]] = ()
    services: Sequence[Mapping[str, Any]] = ()
    endpointslices: Sequence[Mapping[str, Any]] = ()
    secrets: Sequence[Mapping[str, Any]] = ()
    pods: Sequence[Mapping[str, Any]] = ()
    ingressclasses: Sequence[Mapping[str, Any]] | None = None
    resources: Mapping[str, Sequence[Mapping[str, Any]]] = field(default_factory=dict)
    http_resources: Mapping[str, str] = field(default_factory=dict)
    previous_plan: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class RenderedFile:
    """One file of the config tree; `path` is relative to the tree (haproxy.cfg at the root)."""

    path: str
    kind: str
    content: bytes

    @functools.cached_property
    def sha256(self) -> str:
        # Cached: every plan, checksum and apply manifest asks, per pod.
        return hashlib.sha256(self.content).hexdigest()

    @property
    def size(self) -> int:
        return len(self.content)


@dataclass(frozen=True)
class RuntimeDelta:
    """From the output of plan `base_plan_id` to this one: the runtime operations that take
    a worker there, and the byte-range edits (offset, length, new text) of each file that
    changed (every other file is the base's, byte for byte)."""

    base_plan_id: str
    operations: tuple[dict[str, Any], ...]
    edits: Mapping[str, tuple[tuple[int, int, str], ...]]


@dataclass(frozen=True)
class RenderOutput:
    """The complete file set plus the identities the deployer and agents agree on.

    `plan` is the canonical plan (JSON-able dict): backends -> server slots, map entries per
    map file, file digests and the structure digest. `plan_id` is the hex sha256 of its
    canonical JSON, `checksum` covers every byte of every file. `warnings` lists watched
    objects skipped or degraded (RenderWarning: which object, reason code, message); they
    never stop the render.
    """

    files: tuple[RenderedFile, ...]
    plan: Mapping[str, Any]
    plan_id: str
    checksum: str
    structure_digest: str
    warnings: tuple[RenderWarning, ...] = ()
    # ADR-0034: "namespace/name" of the pods holding the readiness gate whose endpoints this
    # render routes to; the status applier sets their condition once every HAProxy pod runs
    # this render. Empty with the gate off.
    gate_ready_pods: tuple[str, ...] = ()
    # "namespace/name" of the Ingresses this render serves (at least one route or default):
    # the Ingress status writer publishes the load balancer addresses on exactly these.
    served_ingresses: tuple[str, ...] = ()
    # (name, sha256 of the body) of every spec.httpResources body this render read: the
    # render gate's verdict on it accepts or refuses exactly those (controller.httpstore).
    http_digests: tuple[tuple[str, str], ...] = ()
    # How the incremental path made this output from another (controller.render.incremental):
    # the deployer sends a pod running that plan these operations and edits instead of
    # diffing the whole plan and sending every byte. Not part of identity.
    runtime_delta: RuntimeDelta | None = field(default=None, compare=False, repr=False)

    def file(self, path: str) -> RenderedFile:
        for f in self.files:
            if f.path == path:
                return f
        raise KeyError(path)

    @property
    def config(self) -> bytes:
        return self.file("haproxy.cfg").content

    def paths(self) -> list[str]:
        return [f.path for f in self.files]

    def based_manifest_files(self) -> list[dict[str, Any]]:
        """The `files` list of a manifest for a pod that runs `runtime_delta.base_plan_id`:
        no bytes, only each file's edits from the base (docs/contracts.md)."""
        assert self.runtime_delta is not None
        edits = self.runtime_delta.edits
        return [
            {
                "path": f.path,
                "kind": f.kind,
                "sha256": f.sha256,
                "size": f.size,
                "base_edits": [list(e) for e in edits.get(f.path, ())],
            }
            for f in self.files
        ]

    def manifest_files(self) -> list[dict[str, Any]]:
        """The `files` list of the agent apply manifest (docs/contracts.md), path order."""
        return [
            {
                "path": f.path,
                "kind": f.kind,
                "sha256": f.sha256,
                "size": f.size,
                "content_b64": base64.b64encode(f.content).decode("ascii"),
            }
            for f in self.files
        ]

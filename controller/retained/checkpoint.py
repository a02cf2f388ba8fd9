"""Checkpoint objects (ADR-0033): encode an acknowledged output into Kubernetes objects, and
decode them back with every integrity check, refusing anything modified, foreign, missing or
incomplete. Pure: the publisher and recovery adapters do the reads and writes.

A checkpoint is a content-addressed HAProxyCfg owned by the HAProxyTemplateConfig. Its
auxiliary files are content-addressed HAProxyMapFile / HAProxyGeneralFile /
HAProxyCRTListFile children owned by the template and shared by every checkpoint with the same
bytes; certificates are content-addressed Secrets. spec.retainedPlan keeps the file list and
the worker receipt compressed.
"""

from __future__ import annotations

import base64
import hashlib
import json
import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from contract import (
    API_VERSION,
    CERT_KEY,
    CFG_KIND,
    CHECKPOINT_ROLE,
    CHILD_KINDS,
    ROLE_LABEL,
    SHARED_ROLE,
    TEMPLATE_KIND,
    TEMPLATE_UID_LABEL,
    file_digest,
    pack,
    strip_digest_prefix,
    unpack,
)
from controller.render import RenderedFile, build_plan, checksum, plan_id
from controller.retained.fleet import FileDigest
from controller.retained.receipts import PodReceipt
from controller.retained.selection import CheckpointPointer, CheckpointSnapshot

MAIN_CONFIG = "haproxy.cfg"


@dataclass(frozen=True)
class TemplateRef:
    name: str
    namespace: str
    uid: str

    def owner_reference(self) -> dict[str, Any]:
        return {
            "apiVersion": API_VERSION,
            "kind": TEMPLATE_KIND,
            "name": self.name,
            "uid": self.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }


@dataclass(frozen=True)
class CheckpointObjects:
    """What to write for one checkpoint: children and Secrets first, then the HAProxyCfg."""

    name: str
    children: tuple[dict[str, Any], ...]
    secrets: tuple[dict[str, Any], ...]
    config: dict[str, Any]


@dataclass(frozen=True)
class DecodedCheckpoint:
    snapshot: CheckpointSnapshot
    files: tuple[RenderedFile, ...]  # empty when integrity failed


def checkpoint_name(template: str, content_checksum: str) -> str:
    return f"{template}-cp-{strip_digest_prefix(content_checksum)[:20]}"


def shared_child_name(template: str, kind: str, path: str, content: bytes) -> str:
    """Content address of an auxiliary child: the same path and bytes, the same object."""
    digest = hashlib.sha256(kind.encode() + b"\0" + path.encode() + b"\0" + content).hexdigest()
    short = CHILD_KINDS[kind].short if kind in CHILD_KINDS else "crt"
    return f"{template}-{short}-{digest[:20]}"


def encode_checkpoint(
    template: TemplateRef,
    files: Sequence[RenderedFile],
    receipt: PodReceipt,
    acknowledged_at: str,
    known_plan_id: str | None = None,
) -> CheckpointObjects:
    """Objects for a checkpoint of `files` acknowledged by `receipt`.

    Children and Secrets carry no uid yet; the publisher writes them, then fills the uids
    into the HAProxyCfg's references with `with_child_uids` before writing it.
    `known_plan_id`: the plan ID of these files as the render computed it (the publisher's
    output), so they are not parsed again; recovery recomputes it from the bytes it reads.
    """
    content_checksum = checksum(files)
    planned = known_plan_id or plan_id(build_plan(list(files)))
    ordered = sorted(files, key=lambda f: f.path)
    refs: dict[str, list[dict[str, Any]]] = {v.ref_list: [] for v in CHILD_KINDS.values()}
    refs["certificates"] = []
    children: list[dict[str, Any]] = []
    secrets: list[dict[str, Any]] = []
    main: RenderedFile | None = None
    for f in ordered:
        if f.path == MAIN_CONFIG:
            main = f
            continue
        child_name = shared_child_name(template.name, f.kind, f.path, f.content)
        metadata = _shared_metadata(template, child_name)
        if f.kind == "certificate":
            secrets.append(_certificate_secret(metadata, f.content))
            refs["certificates"].append(
                {
                    "secretName": child_name,
                    "key": CERT_KEY,
                    "path": f.path,
                    "checksum": file_digest(f.content),
                }
            )
            continue
        if f.kind not in CHILD_KINDS:
            raise ValueError(f"unknown file kind {f.kind!r} for {f.path}")
        children.append(_child_object(CHILD_KINDS[f.kind].kind, metadata, f))
        refs[CHILD_KINDS[f.kind].ref_list].append(
            {"name": child_name, "path": f.path, "checksum": file_digest(f.content)}
        )
    if main is None:
        raise ValueError("a checkpoint needs haproxy.cfg")
    retained = {
        "planID": planned,
        "checksum": content_checksum,
        "files": [
            {"path": f.path, "kind": f.kind, "sha256": f.sha256, "size": f.size} for f in ordered
        ],
    }
    name = checkpoint_name(template.name, content_checksum)
    spec = {
        "path": MAIN_CONFIG,
        "content": pack(main.content),
        "compressed": True,
        "checksum": content_checksum,
        "planID": planned,
        "templateUID": template.uid,
        "auxiliaryFiles": refs,
        "retainedPlan": {
            "encoding": "gzip+base64",
            "data": pack(json.dumps(retained, sort_keys=True).encode()),
            "workerReceipt": _worker_receipt(receipt, acknowledged_at),
        },
    }
    return CheckpointObjects(
        name, tuple(children), tuple(secrets), _checkpoint_config(template, name, spec)
    )


def _shared_metadata(template: TemplateRef, name: str) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": template.namespace,
        "labels": {ROLE_LABEL: SHARED_ROLE, TEMPLATE_UID_LABEL: template.uid},
        "ownerReferences": [template.owner_reference()],
    }


def _certificate_secret(metadata: dict[str, Any], content: bytes) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": metadata,
        "type": "Opaque",
        "data": {CERT_KEY: base64.b64encode(content).decode("ascii")},
    }


def _child_object(kind: str, metadata: dict[str, Any], f: RenderedFile) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": kind,
        "metadata": metadata,
        "spec": {
            "path": f.path,
            "content": pack(f.content),
            "compressed": True,
            "checksum": file_digest(f.content),
        },
    }


def _worker_receipt(receipt: PodReceipt, acknowledged_at: str) -> dict[str, Any]:
    return {**receipt.as_status(), "acknowledgedAt": acknowledged_at}


def _checkpoint_config(template: TemplateRef, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": CFG_KIND,
        "metadata": {
            "name": name,
            "namespace": template.namespace,
            "labels": {ROLE_LABEL: CHECKPOINT_ROLE, TEMPLATE_UID_LABEL: template.uid},
            "ownerReferences": [template.owner_reference()],
        },
        "spec": spec,
    }


def with_child_uids(config: dict[str, Any], uids: Mapping[str, str]) -> dict[str, Any]:
    """A copy of the checkpoint HAProxyCfg whose references carry the children's uids."""
    out = json.loads(json.dumps(config))
    aux = out["spec"]["auxiliaryFiles"]
    for refs in aux.values():
        for ref in refs:
            key = ref.get("name") or ref.get("secretName")
            ref["uid"] = uids[key]
    return out


def shared_children_of(config: Mapping[str, Any]) -> frozenset[str]:
    """Names of the shared children and Secrets a checkpoint references."""
    aux = (config.get("spec") or {}).get("auxiliaryFiles") or {}
    names = set()
    for refs in aux.values():
        for ref in refs or ():
            names.add(ref.get("name") or ref.get("secretName"))
    return frozenset(n for n in names if n)


# -- decoding with integrity checks -------------------------------------------------------


class IntegrityError(Exception):
    pass


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise IntegrityError(message)


def _safe_path(path: str) -> bool:
    return (
        bool(path)
        and not path.startswith("/")
        and "\\" not in path
        and posixpath.normpath(path) == path
        and not path.startswith("..")
    )


def _owned_by(obj: Mapping[str, Any], uid: str, kind: str) -> bool:
    return any(
        ref.get("uid") == uid and ref.get("kind") == kind
        for ref in (obj.get("metadata") or {}).get("ownerReferences") or ()
    )


def _check_object(
    obj: Mapping[str, Any] | None, kind: str, name: str, uid: str | None, namespace: str
) -> Mapping[str, Any]:
    _require(obj is not None, f"{kind} {name} is missing")
    assert obj is not None
    meta = obj.get("metadata") or {}
    _require(obj.get("kind", kind) == kind, f"{name} is a {obj.get('kind')}, not a {kind}")
    _require(meta.get("name") == name, f"{kind} {name}: name mismatch")
    _require(meta.get("namespace") == namespace, f"{kind} {name} is in another namespace")
    _require(not meta.get("deletionTimestamp"), f"{kind} {name} is being deleted")
    if uid is not None:
        _require(meta.get("uid") == uid, f"{kind} {name}: uid {meta.get('uid')} is not {uid}")
    return meta


def decode_checkpoint(
    template: TemplateRef,
    pointer: CheckpointPointer,
    config: Mapping[str, Any] | None,
    children: Mapping[tuple[str, str], Mapping[str, Any]],
    secrets: Mapping[str, Mapping[str, Any]],
    known_plan_ids: Mapping[str, str] | None = None,
) -> DecodedCheckpoint:
    """Verify a checkpoint and rebuild its complete output, or report why not.

    `children` maps (kind, name) to the objects of one list per child kind; `secrets` maps
    name to Secret objects read with their bytes (checksum annotations are never trusted).
    `known_plan_ids` (content checksum -> plan ID): the publisher's read-back of bytes it
    rendered itself; bytes with that checksum are those bytes, so their plan is not parsed
    again. Recovery passes none: every plan ID is computed from the bytes read.
    """
    try:
        return _decode(template, pointer, config, children, secrets, known_plan_ids or {})
    except IntegrityError as exc:
        why = str(exc)
    except (KeyError, TypeError, ValueError, OSError, EOFError) as exc:
        why = f"checkpoint {pointer.name} is malformed: {exc!r}"
    snapshot = CheckpointSnapshot(
        name=pointer.name,
        uid=pointer.uid,
        checksum=pointer.checksum,
        plan_id="",
        integrity_error=why,
    )
    return DecodedCheckpoint(snapshot, ())


def _decode(
    template: TemplateRef,
    pointer: CheckpointPointer,
    config: Mapping[str, Any] | None,
    children: Mapping[tuple[str, str], Mapping[str, Any]],
    secrets: Mapping[str, Mapping[str, Any]],
    known_plan_ids: Mapping[str, str],
) -> DecodedCheckpoint:
    spec = _checked_config(template, pointer, config)
    main = _spec_content(spec)
    files: dict[str, RenderedFile] = {MAIN_CONFIG: RenderedFile(MAIN_CONFIG, "config", main)}
    aux = spec.get("auxiliaryFiles") or {}
    for file_kind, child_kind in CHILD_KINDS.items():
        for ref in aux.get(child_kind.ref_list) or ():
            _add_file(
                files, _child_file(template, pointer, file_kind, child_kind.kind, ref, children)
            )
    for ref in aux.get("certificates") or ():
        _add_file(files, _certificate_file(template, ref, secrets))
    retained_spec = spec.get("retainedPlan") or {}
    ordered, computed_plan_id = _checked_against_retained_plan(
        spec, retained_spec, files, known_plan_ids
    )
    receipt = PodReceipt.from_status(retained_spec.get("workerReceipt") or {})
    _require(receipt is not None, "checkpoint has no complete worker receipt")
    assert receipt is not None
    _require(
        receipt.checksum == spec["checksum"] and receipt.applied_plan_id == computed_plan_id,
        "worker receipt names another output",
    )
    snapshot = CheckpointSnapshot(
        name=pointer.name,
        uid=pointer.uid,
        checksum=spec["checksum"],
        plan_id=computed_plan_id,
        files={f.path: FileDigest(f.sha256, f.size) for f in ordered},
        receipt=receipt,
    )
    return DecodedCheckpoint(snapshot, ordered)


def _checked_config(
    template: TemplateRef, pointer: CheckpointPointer, config: Mapping[str, Any] | None
) -> Mapping[str, Any]:
    """The HAProxyCfg's spec, once the object is the checkpoint the pointer names."""
    meta = _check_object(config, CFG_KIND, pointer.name, pointer.uid, template.namespace)
    assert config is not None
    spec = config["spec"]
    _require(
        _owned_by(config, template.uid, TEMPLATE_KIND),
        f"checkpoint {pointer.name} is not owned by template {template.uid}",
    )
    _require(
        (meta.get("labels") or {}).get(ROLE_LABEL) == CHECKPOINT_ROLE,
        f"{pointer.name} is not labelled as a checkpoint",
    )
    _require(spec.get("templateUID") == template.uid, f"{pointer.name} names another template")
    _require(
        spec["checksum"] == pointer.checksum,
        f"{pointer.name}: checksum {spec['checksum']} differs from the pointer's",
    )
    _require(
        pointer.name == checkpoint_name(template.name, spec["checksum"]),
        f"{pointer.name} is not the content address of {spec['checksum']}",
    )
    _require(spec.get("path") == MAIN_CONFIG, f"{pointer.name}: main path {spec.get('path')}")
    return spec


def _spec_content(spec: Mapping[str, Any]) -> bytes:
    return unpack(spec["content"]) if spec.get("compressed") else spec["content"].encode()


def _add_file(files: dict[str, RenderedFile], f: RenderedFile) -> None:
    _require(f.path not in files, f"{f.path} appears twice")
    files[f.path] = f


def _child_file(
    template: TemplateRef,
    pointer: CheckpointPointer,
    file_kind: str,
    kind: str,
    ref: Mapping[str, Any],
    children: Mapping[tuple[str, str], Mapping[str, Any]],
) -> RenderedFile:
    """One auxiliary file from its child object, checked against the checkpoint's reference."""
    name = ref["name"]
    child = children.get((kind, name))
    child_meta = _check_object(child, kind, name, ref.get("uid"), template.namespace)
    assert child is not None
    _require(ref.get("uid") is not None, f"{kind} {name}: reference has no uid")
    if _owned_by(child, template.uid, TEMPLATE_KIND):
        _require(
            (child_meta.get("labels") or {}).get(ROLE_LABEL) == SHARED_ROLE,
            f"{kind} {name} is owned by the template but not shared",
        )
        shared = True
    else:
        # Published before sharing: owned by its checkpoint, named after it.
        _require(
            _owned_by(child, pointer.uid, CFG_KIND) and name.startswith(pointer.name),
            f"{kind} {name} is owned by neither the template nor the checkpoint",
        )
        shared = False
    child_spec = child["spec"]
    _require(child_spec.get("path") == ref["path"], f"{kind} {name}: path differs")
    _require(
        child_spec.get("checksum") == ref["checksum"],
        f"{kind} {name}: checksum differs from the reference",
    )
    content = _spec_content(child_spec)
    _require(
        file_digest(content) == ref["checksum"],
        f"{kind} {name}: content digest mismatch for {ref['path']}",
    )
    if shared:
        _require(
            name == shared_child_name(template.name, file_kind, ref["path"], content),
            f"{kind} {name} is not the content address of its bytes",
        )
    return RenderedFile(ref["path"], file_kind, content)


def _certificate_file(
    template: TemplateRef, ref: Mapping[str, Any], secrets: Mapping[str, Mapping[str, Any]]
) -> RenderedFile:
    """One certificate from its content-addressed Secret, checked against the reference."""
    name = ref["secretName"]
    secret = secrets.get(name)
    _check_object(secret, "Secret", name, ref.get("uid"), template.namespace)
    assert secret is not None
    _require(ref.get("uid") is not None, f"Secret {name}: reference has no uid")
    _require(
        _owned_by(secret, template.uid, TEMPLATE_KIND),
        f"Secret {name} is not owned by the template",
    )
    raw = (secret.get("data") or {}).get(ref.get("key") or CERT_KEY)
    _require(raw is not None, f"Secret {name} has no key {ref.get('key')}")
    content = base64.b64decode(raw)
    _require(
        file_digest(content) == ref["checksum"],
        f"Secret {name}: certificate digest mismatch for {ref['path']}",
    )
    _require(
        name == shared_child_name(template.name, "certificate", ref["path"], content),
        f"Secret {name} is not the content address of its bytes",
    )
    return RenderedFile(ref["path"], "certificate", content)


def _checked_against_retained_plan(
    spec: Mapping[str, Any],
    retained_spec: Mapping[str, Any],
    files: dict[str, RenderedFile],
    known_plan_ids: Mapping[str, str],
) -> tuple[tuple[RenderedFile, ...], str]:
    """The files in path order and their plan id, once they are exactly the retained plan's
    file list and the checkpoint's checksum and plan identity."""
    _require(retained_spec.get("encoding") == "gzip+base64", "retainedPlan encoding unknown")
    retained = json.loads(unpack(retained_spec["data"]))
    declared = {f["path"]: f for f in retained["files"]}
    _require(
        set(declared) == set(files),
        f"auxiliary set incomplete: declared {sorted(declared)}, found {sorted(files)}",
    )
    for path, decl in declared.items():
        _require(_safe_path(path), f"unsafe artifact path {path!r}")
        f = files[path]
        _require(decl["kind"] == f.kind, f"{path}: kind {f.kind} is not {decl['kind']}")
        _require(
            decl["sha256"] == f.sha256 and int(decl["size"]) == f.size,
            f"{path}: content digest mismatch with the retained plan",
        )
    ordered = tuple(files[p] for p in sorted(files))
    computed_checksum = checksum(ordered)
    _require(computed_checksum == spec["checksum"], "content checksum mismatch")
    computed_plan_id = known_plan_ids.get(computed_checksum) or plan_id(build_plan(list(ordered)))
    _require(
        computed_plan_id == spec.get("planID") == retained.get("planID"), "plan identity mismatch"
    )
    return ordered, computed_plan_id

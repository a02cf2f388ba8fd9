"""Checkpoint publication (ADR-0033): write the complete set, verify it by reading it back
with one list per child kind, promote the pointer, then collect garbage.

Interrupted publication leaves the previous pointer usable; identical output reuses its
content address without writing; garbage collection deletes only this template's
unreferenced checkpoints and, with uid and resourceVersion preconditions, shared children no
remaining checkpoint references.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubernetes.client.exceptions import ApiException

from contract import (
    CFG_PLURAL,
    CHECKPOINT_ROLE,
    CHILD_KINDS,
    ROLE_LABEL,
    SHARED_ROLE,
    TEMPLATE_UID_LABEL,
)
from controller.publish.kube import Objects, StatusRaceLost
from controller.render import RenderedFile
from controller.retained.checkpoint import (
    TemplateRef,
    decode_checkpoint,
    encode_checkpoint,
    shared_children_of,
    with_child_uids,
)
from controller.retained.receipts import PodReceipt
from controller.retained.retention import (
    CheckpointRecord,
    ChildRecord,
    checkpoint_deletions,
    promote_pointer,
    prune_pointers,
    retained_names,
    shared_child_deletions,
)
from controller.retained.selection import CheckpointPointer

log = logging.getLogger(__name__)

KIND_PLURALS = {child.kind: child.plural for child in CHILD_KINDS.values()}


class PublicationFailed(Exception):
    pass


@dataclass(frozen=True)
class PublicationResult:
    pointer: CheckpointPointer
    reused: bool  # identical output: nothing written
    deleted_checkpoints: tuple[str, ...]
    deleted_children: tuple[str, ...]


def pointers_from_status(cfg: dict[str, Any] | None) -> list[CheckpointPointer]:
    entries = ((cfg or {}).get("status") or {}).get("retainedConfigs") or []
    return [CheckpointPointer(e["name"], e["uid"], e["checksum"]) for e in entries]


def pod_checksums(cfg: dict[str, Any] | None) -> list[str]:
    entries = ((cfg or {}).get("status") or {}).get("deployedToPods") or []
    return [e["checksum"] for e in entries if e.get("checksum")]


def receipts_from_status(cfg: dict[str, Any] | None) -> list[PodReceipt]:
    """The complete receipts status.deployedToPods lists (a failed apply's entry is none)."""
    entries = ((cfg or {}).get("status") or {}).get("deployedToPods") or []
    return [r for r in map(PodReceipt.from_status, entries) if r is not None]


class CheckpointPublisher:
    def __init__(self, objects: Objects, template: TemplateRef, published_name: str) -> None:
        self.objects = objects
        self.template = template
        self.published_name = published_name  # the ordinary HAProxyCfg holding the pointers

    @property
    def _selector(self) -> str:
        return f"{TEMPLATE_UID_LABEL}={self.template.uid}"

    def publish(
        self,
        files: Sequence[RenderedFile],
        receipt: PodReceipt,
        acknowledged_at: str,
        plan_id: str | None = None,
    ) -> PublicationResult:
        """Checkpoint `files` (whose plan ID the render computed as `plan_id`, when given:
        then neither the encoding nor the read-back parses them again)."""
        objects = encode_checkpoint(self.template, files, receipt, acknowledged_at, plan_id)
        ordinary = self.objects.get(CFG_PLURAL, self.published_name)
        if ordinary is None:
            raise PublicationFailed(f"ordinary HAProxyCfg {self.published_name} does not exist")
        existing = self.objects.get(CFG_PLURAL, objects.name)
        reused = existing is not None and any(
            p.name == objects.name and p.uid == existing["metadata"]["uid"]
            for p in pointers_from_status(ordinary)
        )
        if not reused:
            existing = self._write(objects, existing)
        pointer = CheckpointPointer(
            objects.name, existing["metadata"]["uid"], existing["spec"]["checksum"]
        )
        spec = objects.config["spec"]
        verification = self._verify(pointer, {spec["checksum"]: spec["planID"]})
        if not reused:
            self._promote(pointer)
        deleted_cps, deleted_children = self._collect_garbage(verification)
        return PublicationResult(pointer, reused, deleted_cps, deleted_children)

    # -- write the complete set -----------------------------------------------------------

    def _write(self, objects: Any, existing: dict[str, Any] | None) -> dict[str, Any]:
        uids: dict[str, str] = {}
        for child in objects.children:
            plural = KIND_PLURALS[child["kind"]]
            stored = self._ensure(
                lambda b, p=plural: self.objects.create(p, b),
                lambda n, p=plural: self.objects.get(p, n),
                child,
                compare=lambda a, b: (
                    a["spec"]["checksum"] == b["spec"]["checksum"]
                    and a["spec"]["content"] == b["spec"]["content"]
                ),
            )
            uids[child["metadata"]["name"]] = stored["metadata"]["uid"]
        for secret in objects.secrets:
            stored = self._ensure(
                self.objects.create_secret,
                self.objects.get_secret,
                secret,
                compare=lambda a, b: (a.get("data") or {}) == (b.get("data") or {}),
            )
            uids[secret["metadata"]["name"]] = stored["metadata"]["uid"]
        config = with_child_uids(objects.config, uids)
        if existing is not None:
            # Same content address, not yet pointed at: finish an interrupted publication by
            # writing the references again (never repairing bytes: the checksum is the name).
            if existing["spec"].get("checksum") != config["spec"]["checksum"]:
                raise PublicationFailed(f"{objects.name} holds other content")
            config["metadata"]["resourceVersion"] = existing["metadata"]["resourceVersion"]
            return self.objects.replace(CFG_PLURAL, config)
        try:
            return self.objects.create(CFG_PLURAL, config)
        except ApiException as exc:
            if exc.status != 409:
                raise
            stored = self.objects.get(CFG_PLURAL, objects.name)
            if stored is None or stored["spec"].get("checksum") != config["spec"]["checksum"]:
                raise PublicationFailed(f"{objects.name} holds other content") from exc
            return stored

    @staticmethod
    def _ensure(create, get, body: dict[str, Any], compare) -> dict[str, Any]:
        """Create a content-addressed object, or reuse the identical one already there."""
        name = body["metadata"]["name"]
        try:
            return create(body)
        except ApiException as exc:
            if exc.status != 409:
                raise
        stored = get(name)
        if stored is None:
            raise PublicationFailed(f"{name} vanished during publication")
        if (stored.get("metadata") or {}).get("deletionTimestamp"):
            raise PublicationFailed(f"{name} is being deleted; retry after it is gone")
        if not compare(stored, body):
            raise PublicationFailed(f"{name} exists with other bytes; refusing to reuse it")
        return stored

    # -- verify by reading back, one list per kind ---------------------------------------

    def _verify(self, pointer: CheckpointPointer, known: Mapping[str, str]) -> dict[str, Any]:
        children: dict[tuple[str, str], dict[str, Any]] = {}
        child_records: list[ChildRecord] = []
        for kind, plural in KIND_PLURALS.items():
            for obj in self.objects.list(plural, self._selector):
                children[(kind, obj["metadata"]["name"])] = obj
                if (obj["metadata"].get("labels") or {}).get(ROLE_LABEL) == SHARED_ROLE:
                    child_records.append(_child_record(kind, obj, self.template.uid))
        secrets = {}
        for secret in self.objects.list_secrets(self._selector):
            secrets[secret["metadata"]["name"]] = secret
            if (secret["metadata"].get("labels") or {}).get(ROLE_LABEL) == SHARED_ROLE:
                child_records.append(_child_record("Secret", secret, self.template.uid))
        checkpoints = {
            c["metadata"]["name"]: c
            for c in self.objects.list(
                CFG_PLURAL, f"{self._selector},{ROLE_LABEL}={CHECKPOINT_ROLE}"
            )
        }
        decoded = decode_checkpoint(
            self.template, pointer, checkpoints.get(pointer.name), children, secrets, known
        )
        if decoded.snapshot.integrity_error:
            raise PublicationFailed(f"read-back failed: {decoded.snapshot.integrity_error}")
        return {
            "children": child_records,
            "checkpoints": checkpoints,
            "known": children,
            "secrets": secrets,
        }

    # -- promote ------------------------------------------------------------------------

    def _promote(self, pointer: CheckpointPointer) -> None:
        def promoted(ordinary: dict[str, Any]) -> dict[str, Any]:
            pointers = prune_pointers(
                promote_pointer(pointers_from_status(ordinary), pointer), pod_checksums(ordinary)
            )
            status = dict(ordinary.get("status") or {})
            status["retainedConfigs"] = [
                {"name": p.name, "uid": p.uid, "checksum": p.checksum} for p in pointers
            ]
            return status

        try:
            found = self.objects.update_status(CFG_PLURAL, self.published_name, promoted)
        except StatusRaceLost as exc:
            raise PublicationFailed(f"pointer promotion: {exc}") from exc
        if not found:
            raise PublicationFailed("ordinary HAProxyCfg vanished")

    # -- garbage collection --------------------------------------------------------------

    def _collect_garbage(self, verification: dict[str, Any]) -> tuple[tuple[str, ...], ...]:
        ordinary = self.objects.get(CFG_PLURAL, self.published_name)
        pointers = pointers_from_status(ordinary)
        keep = retained_names(pointers, pod_checksums(ordinary))
        checkpoints = verification["checkpoints"]
        known = verification["known"]
        secrets = verification["secrets"]
        records = [_checkpoint_record(c, known, secrets) for c in checkpoints.values()]
        deleted_cps = []
        for record in checkpoint_deletions(records, keep, self.template.uid):
            obj = checkpoints[record.name]
            if self.objects.delete(
                CFG_PLURAL, record.name, obj["metadata"]["uid"], obj["metadata"]["resourceVersion"]
            ):
                deleted_cps.append(record.name)
        remaining = [r for r in records if r.name not in deleted_cps]
        deleted_children = []
        for child in shared_child_deletions(verification["children"], remaining, self.template.uid):
            if child.kind == "Secret":
                ok = self.objects.delete_secret(child.name, child.uid, child.resource_version)
            else:
                ok = self.objects.delete(
                    KIND_PLURALS[child.kind], child.name, child.uid, child.resource_version
                )
            if ok:
                deleted_children.append(child.name)
        if deleted_cps or deleted_children:
            log.info("collected checkpoints %s and children %s", deleted_cps, deleted_children)
        return tuple(deleted_cps), tuple(deleted_children)


def _child_record(kind: str, obj: dict[str, Any], template_uid: str) -> ChildRecord:
    meta = obj["metadata"]
    return ChildRecord(
        kind=kind,
        name=meta["name"],
        uid=meta["uid"],
        resource_version=meta["resourceVersion"],
        template_uid=(meta.get("labels") or {}).get(TEMPLATE_UID_LABEL, ""),
    )


def _checkpoint_record(
    cfg: dict[str, Any], known: dict[tuple[str, str], Any], secrets: dict[str, Any]
) -> CheckpointRecord:
    """A checkpoint's references are committed when each names a uid of a listed object."""
    meta = cfg["metadata"]
    aux = (cfg.get("spec") or {}).get("auxiliaryFiles") or {}
    listed_uids = {o["metadata"]["uid"] for o in known.values()} | {
        s["metadata"]["uid"] for s in secrets.values()
    }
    committed = all(ref.get("uid") in listed_uids for refs in aux.values() for ref in (refs or ()))
    return CheckpointRecord(
        name=meta["name"],
        uid=meta["uid"],
        checksum=(cfg.get("spec") or {}).get("checksum", ""),
        template_uid=(meta.get("labels") or {}).get(TEMPLATE_UID_LABEL, ""),
        shared_children=shared_children_of(cfg),
        committed=committed,
    )

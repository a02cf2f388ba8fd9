"""Ordinary publication: the rendered output as the HAProxyCfg named after the template, its
HAProxyMapFile / HAProxyGeneralFile / HAProxyCRTListFile children and certificate Secrets,
and the per-pod receipts in status.deployedToPods.

Publishing the next output prunes the previous output's children: this is why the ordinary
publication is no durable receipt and checkpoints are kept apart (ADR-0033).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable, Mapping
from typing import Any

from kubernetes.client.exceptions import ApiException

from contract import (
    API_VERSION,
    CERT_KEY,
    CFG_KIND,
    CFG_PLURAL,
    CHILD_KINDS,
    PUBLISHED_ROLE,
    ROLE_LABEL,
    TEMPLATE_UID_LABEL,
    pack,
    unpack,
)
from controller.publish.checkpoints import receipts_from_status
from controller.publish.kube import Objects
from controller.render import RenderedFile, RenderOutput, build_plan, checksum, plan_id
from controller.retained.checkpoint import MAIN_CONFIG, TemplateRef
from controller.retained.receipts import PodReceipt

COMPRESS_ABOVE = 256 * 1024


def _slug(path: str) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", path.lower()).strip("-")[:200]


def _decode(spec: Mapping[str, Any]) -> bytes:
    if spec.get("compressed"):
        return unpack(spec["content"])
    return str(spec["content"]).encode()


def _content(data: bytes) -> tuple[str, bool]:
    if len(data) > COMPRESS_ABOVE:
        return pack(data), True
    return data.decode("utf-8", errors="replace"), False


class OrdinaryPublisher:
    def __init__(self, objects: Objects, template: TemplateRef) -> None:
        self.objects = objects
        self.template = template
        self.name = template.name

    def _labels(self) -> dict[str, str]:
        return {ROLE_LABEL: PUBLISHED_ROLE, TEMPLATE_UID_LABEL: self.template.uid}

    def publish_output(self, output: RenderOutput) -> dict[str, Any]:
        """Write the HAProxyCfg and its children for `output`; prune children it dropped."""
        cfg = self._ensure_cfg(output)
        owner = {
            "apiVersion": API_VERSION,
            "kind": CFG_KIND,
            "name": self.name,
            "uid": cfg["metadata"]["uid"],
            "controller": True,
        }
        wanted: dict[str, set[str]] = {child.plural: set() for child in CHILD_KINDS.values()}
        wanted_secrets: set[str] = set()
        for f in output.files:
            if f.path == MAIN_CONFIG:
                continue
            name = f"{self.name}-pub-{_slug(f.path)}"
            if f.kind == "certificate":
                wanted_secrets.add(name)
                self._put_secret(name, owner, f.content)
                continue
            kind, plural, _, _ = CHILD_KINDS[f.kind]
            wanted[plural].add(name)
            content, compressed = _content(f.content)
            self._put(
                plural,
                {
                    "apiVersion": API_VERSION,
                    "kind": kind,
                    "metadata": {
                        "name": name,
                        "labels": self._labels(),
                        "ownerReferences": [owner],
                    },
                    "spec": {
                        "path": f.path,
                        "content": content,
                        "compressed": compressed,
                        "checksum": "sha256:" + f.sha256,
                    },
                },
            )
        selector = f"{ROLE_LABEL}={PUBLISHED_ROLE},{TEMPLATE_UID_LABEL}={self.template.uid}"
        for plural, names in wanted.items():
            for obj in self.objects.list(plural, selector):
                meta = obj["metadata"]
                if meta["name"] not in names:
                    self.objects.delete(plural, meta["name"], meta["uid"], meta["resourceVersion"])
        for secret in self.objects.list_secrets(selector):
            meta = secret["metadata"]
            if meta["name"] not in wanted_secrets:
                self.objects.delete_secret(meta["name"], meta["uid"], meta["resourceVersion"])
        return cfg

    def _ensure_cfg(self, output: RenderOutput) -> dict[str, Any]:
        content, compressed = _content(output.config)
        refs: dict[str, list[dict[str, str]]] = {
            child.ref_list: [] for child in CHILD_KINDS.values()
        }
        refs["certificates"] = []
        for f in output.files:
            if f.path == MAIN_CONFIG:
                continue
            name = f"{self.name}-pub-{_slug(f.path)}"
            if f.kind == "certificate":
                refs["certificates"].append(
                    {
                        "secretName": name,
                        "key": CERT_KEY,
                        "path": f.path,
                        "checksum": "sha256:" + f.sha256,
                    }
                )
            else:
                refs[CHILD_KINDS[f.kind].ref_list].append(
                    {"name": name, "path": f.path, "checksum": "sha256:" + f.sha256}
                )
        spec = {
            "path": MAIN_CONFIG,
            "content": content,
            "compressed": compressed,
            "checksum": output.checksum,
            "planID": output.plan_id,
            "templateUID": self.template.uid,
            "auxiliaryFiles": refs,
        }
        body = {
            "apiVersion": API_VERSION,
            "kind": CFG_KIND,
            "metadata": {
                "name": self.name,
                "labels": self._labels(),
                "ownerReferences": [self.template.owner_reference()],
            },
            "spec": spec,
        }
        return self._put(CFG_PLURAL, body)

    def _put(self, plural: str, body: dict[str, Any]) -> dict[str, Any]:
        for _ in range(5):
            existing = self.objects.get(plural, body["metadata"]["name"])
            if existing is None:
                try:
                    return self.objects.create(plural, body)
                except ApiException as exc:
                    if exc.status == 409:
                        continue
                    raise
            if existing.get("spec") == body["spec"]:
                return existing
            updated = dict(existing)
            updated["spec"] = body["spec"]
            try:
                return self.objects.replace(plural, updated)
            except ApiException as exc:
                if exc.status != 409:
                    raise
        raise RuntimeError(f"could not write {plural}/{body['metadata']['name']}")

    def _put_secret(self, name: str, owner: dict[str, Any], content: bytes) -> None:
        data = {CERT_KEY: base64.b64encode(content).decode("ascii")}
        existing = self.objects.get_secret(name)
        if existing is None:
            self.objects.create_secret(
                {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "type": "Opaque",
                    "metadata": {
                        "name": name,
                        "labels": self._labels(),
                        "ownerReferences": [owner],
                    },
                    "data": data,
                }
            )
        elif existing.get("data") != data:
            existing["data"] = data
            self.objects.replace_secret(existing)

    def read_output(self) -> RenderOutput | None:
        """The published output rebuilt from the HAProxyCfg and its children, or None when
        it is missing, incomplete or does not match its checksum. A new leader seeds its
        plan memory with it, so pods already running it are diffed, not reloaded."""
        cfg = self.objects.get(CFG_PLURAL, self.name)
        if cfg is None:
            return None
        spec = cfg.get("spec") or {}
        try:
            files = [RenderedFile(MAIN_CONFIG, "config", _decode(spec))]
            aux = spec.get("auxiliaryFiles") or {}
            for file_kind, (_, plural, ref_list, _) in CHILD_KINDS.items():
                for ref in aux.get(ref_list) or ():
                    child = self.objects.get(plural, ref["name"])
                    if child is None:
                        return None
                    files.append(RenderedFile(ref["path"], file_kind, _decode(child["spec"])))
            for ref in aux.get("certificates") or ():
                secret = self.objects.get_secret(ref["secretName"])
                if secret is None:
                    return None
                raw = base64.b64decode((secret.get("data") or {})[ref.get("key") or CERT_KEY])
                files.append(RenderedFile(ref["path"], "certificate", raw))
        except (KeyError, ValueError, OSError, EOFError):
            return None
        files.sort(key=lambda f: f.path)
        if checksum(files) != spec.get("checksum"):
            return None
        plan = build_plan(files)
        return RenderOutput(
            tuple(files), plan, plan_id(plan), checksum(files), plan["structure_digest"]
        )

    def read_receipts(self) -> list[PodReceipt]:
        """The receipts the published status lists now (a new term's starting point)."""
        return receipts_from_status(self.objects.get(CFG_PLURAL, self.name))

    def publish_receipts(
        self,
        entries: Mapping[str, Mapping[str, Any]],
        present_pods: Iterable[str] | None = None,
        known: dict[str, Any] | None = None,
    ) -> dict[str, Any] | None:
        """Merge per-pod entries into status.deployedToPods (each pod's entry its own).

        `present_pods`, when given, drops entries of pods that left the fleet (discovery
        cleanup); checkpoint receipts are untouched by this. Returns the HAProxyCfg as
        written, which the next round of a publication passes as `known` (Objects.
        update_status: no read before the write).
        """
        present = set(present_pods) if present_pods is not None else None

        def merged(cfg: dict[str, Any]) -> dict[str, Any] | None:
            status = dict(cfg.get("status") or {})
            current = {e["podName"]: e for e in status.get("deployedToPods") or []}
            current.update({name: dict(entry, podName=name) for name, entry in entries.items()})
            if present is not None:
                current = {n: e for n, e in current.items() if n in present}
            receipts = [current[n] for n in sorted(current)]
            if receipts == (status.get("deployedToPods") or []):
                return None
            status["deployedToPods"] = receipts
            return status

        return self.objects.update_status(CFG_PLURAL, self.name, merged, known=known)

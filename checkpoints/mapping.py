"""Pure mapping from Kubernetes objects (JSON dicts, camelCase) to mirror rows (field dicts).

No database access here: checkpoints.store writes what these functions return, so every rule
about where a field lives in Kubernetes (docs/contracts.md) is tested without a database.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any

from django.utils.dateparse import parse_datetime

from contract import (
    CLAIM_ANNOTATION,
    EPOCH_ANNOTATION,
    GROUP,
    INTENT_ANNOTATION,
    ROLE_LABEL,
    TEMPLATE_UID_LABEL,
    unpack,
)
from controller.retained.receipts import term_of

HUB_MODE_ANNOTATION = f"{GROUP}/hub-mode"

AUX_KINDS = {
    "HAProxyMapFile": "map",
    "HAProxyGeneralFile": "general",
    "HAProxyCRTListFile": "crt-list",
}
AUX_REF_KEYS = {
    "mapFiles": "map",
    "generalFiles": "general",
    "crtListFiles": "crt-list",
}


def parse_time(value: Any) -> datetime | None:
    """A Kubernetes timestamp (RFC 3339, "Z" or offset, optional fraction) or None."""
    if not value or not isinstance(value, str):
        return None
    try:
        return parse_datetime(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def decode_content(content: str, compressed: bool) -> str:
    """spec.content as text: base64 gzip when compressed, plain otherwise.

    Undecodable compressed content is returned as stored, so a damaged object is still
    visible in the history instead of vanishing from it.
    """
    if not compressed:
        return content
    try:
        return unpack(content).decode("utf-8")
    except (OSError, UnicodeDecodeError, ValueError):
        return content


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("metadata") or {}


def _owner_template(meta: dict[str, Any]) -> tuple[str, str]:
    for ref in meta.get("ownerReferences") or []:
        if ref.get("kind") == "HAProxyTemplateConfig":
            return ref.get("name", ""), ref.get("uid", "")
    return "", ""


def haproxycfg_role(obj: dict[str, Any]) -> str:
    """ "checkpoint" or "published" (the ordinary output); unlabeled objects count as published."""
    labels = _meta(obj).get("labels") or {}
    return labels.get(ROLE_LABEL) or "published"


def _identity(meta: dict[str, Any]) -> dict[str, Any]:
    """The row fields every mirrored object has: who it is and which version was read."""
    return {
        "uid": meta.get("uid", ""),
        "name": meta.get("name", ""),
        "namespace": meta.get("namespace", ""),
        "resource_version": str(meta.get("resourceVersion", "")),
        "created_at": parse_time(meta.get("creationTimestamp")),
    }


def checkpoint_row(obj: dict[str, Any]) -> dict[str, Any]:
    """Field values of a Checkpoint row from a checkpoint HAProxyCfg."""
    meta = _meta(obj)
    spec = obj.get("spec") or {}
    template_name, owner_uid = _owner_template(meta)
    labels = meta.get("labels") or {}
    template_uid = spec.get("templateUID") or labels.get(TEMPLATE_UID_LABEL) or owner_uid
    retained = spec.get("retainedPlan") or {}
    receipt = retained.get("workerReceipt") or {}
    return {
        **_identity(meta),
        "template_name": template_name,
        "template_uid": template_uid or "",
        "checksum": spec.get("checksum", ""),
        "plan_id": spec.get("planID", ""),
        "path": spec.get("path", ""),
        "content": spec.get("content", ""),
        "compressed": bool(spec.get("compressed", False)),
        "retained_plan_encoding": retained.get("encoding", ""),
        "retained_plan_data": retained.get("data", ""),
        "receipt_pod_name": receipt.get("podName", ""),
        "receipt_pod_uid": receipt.get("podUID", ""),
        "receipt_runtime_id": receipt.get("runtimeID", ""),
        "receipt_checksum": receipt.get("checksum", ""),
        "receipt_applied_plan_id": receipt.get("appliedPlanID", ""),
        "receipt_running_plan_id": receipt.get("runningPlanID", ""),
        "receipt_worker_ops_plan_id": receipt.get("workerOpsPlanID", ""),
        "receipt_mode": receipt.get("mode", ""),
        "receipt_acknowledged_at": parse_time(receipt.get("acknowledgedAt")),
        "receipt_term_holder": term_of(receipt)[0],
        "receipt_term_epoch": term_of(receipt)[1],
        "auxiliary_refs": spec.get("auxiliaryFiles") or {},
    }


def checkpoint_files(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """The file rows of a checkpoint: its main config (decoded) and every auxiliary reference.

    Auxiliary content is left None here; it comes from the mirrored child objects. For
    certificates only the checksum is ever kept.
    """
    spec = obj.get("spec") or {}
    files = [
        {
            "kind": "config",
            "path": spec.get("path") or "haproxy.cfg",
            "checksum": spec.get("checksum", ""),
            "object_name": _meta(obj).get("name", ""),
            "object_uid": _meta(obj).get("uid", ""),
            "content": decode_content(spec.get("content", ""), bool(spec.get("compressed"))),
        }
    ]
    aux = spec.get("auxiliaryFiles") or {}
    for key, kind in AUX_REF_KEYS.items():
        for ref in aux.get(key) or []:
            files.append(
                {
                    "kind": kind,
                    "path": ref.get("path", ""),
                    "checksum": ref.get("checksum", ""),
                    "object_name": ref.get("name", ""),
                    "object_uid": ref.get("uid", ""),
                    "content": None,
                }
            )
    for ref in aux.get("certificates") or []:
        files.append(
            {
                "kind": "certificate",
                "path": ref.get("path", ""),
                "checksum": ref.get("checksum", ""),
                "object_name": ref.get("secretName", ""),
                "object_uid": ref.get("uid", ""),
                "content": None,
            }
        )
    # One row per path: a repeated path keeps its first reference.
    seen: set[str] = set()
    unique = []
    for f in files:
        if f["path"] in seen:
            continue
        seen.add(f["path"])
        unique.append(f)
    return unique


def auxiliary_row(obj: dict[str, Any]) -> dict[str, Any]:
    """Field values of an AuxiliaryObject row from a map, general or crt-list child."""
    meta = _meta(obj)
    spec = obj.get("spec") or {}
    return {
        **_identity(meta),
        "kind": AUX_KINDS.get(obj.get("kind", ""), obj.get("kind", "")),
        "path": spec.get("path", ""),
        "checksum": spec.get("checksum", ""),
        "content": decode_content(spec.get("content", ""), bool(spec.get("compressed"))),
        "owner_uids": [r.get("uid", "") for r in meta.get("ownerReferences") or []],
    }


def fingerprint(values: dict[str, Any]) -> str:
    """Stable hex digest of a row's identifying values (keys sorted, datetimes ISO)."""
    encoded = json.dumps(values, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(encoded.encode()).hexdigest()


def receipt_rows(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """Pod receipt rows from status.deployedToPods of any HAProxyCfg."""
    meta = _meta(obj)
    rows = []
    for entry in (obj.get("status") or {}).get("deployedToPods") or []:
        row = {
            "pod_name": entry.get("podName", ""),
            "pod_uid": entry.get("podUID", ""),
            "runtime_id": entry.get("runtimeID", ""),
            "checksum": entry.get("checksum", ""),
            "applied_plan_id": entry.get("appliedPlanID", ""),
            "running_plan_id": entry.get("runningPlanID", ""),
            "worker_ops_plan_id": entry.get("workerOpsPlanID", ""),
            "mode": entry.get("mode", ""),
            "last_error": entry.get("lastError", ""),
            "consecutive_errors": int(entry.get("consecutiveErrors") or 0),
            "deployed_at": parse_time(entry.get("deployedAt")),
            "source_name": meta.get("name", ""),
            "source_uid": meta.get("uid", ""),
            "source_namespace": meta.get("namespace", ""),
        }
        holder, epoch = term_of(entry)
        if holder:
            # Only when known: a receipt from before terms were recorded keeps the
            # fingerprint (and so the row) it always had.
            row.update(term_holder=holder, term_epoch=epoch)
        if entry.get("podIP") and entry.get("agentPort"):
            # Likewise only when known, so older receipts keep their fingerprints.
            row.update(pod_ip=str(entry["podIP"]), agent_port=int(entry["agentPort"]))
        row["fingerprint"] = fingerprint(row)
        rows.append(row)
    return rows


def retained_pointers(obj: dict[str, Any]) -> list[str]:
    """UIDs the ordinary HAProxyCfg's status.retainedConfigs names."""
    return [
        p.get("uid", "")
        for p in (obj.get("status") or {}).get("retainedConfigs") or []
        if p.get("uid")
    ]


def _json_annotation(annotations: dict[str, str], key: str) -> dict[str, Any] | None:
    raw = annotations.get(key)
    if not raw:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _int_or_none(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def intent_row(lease: dict[str, Any], source: str) -> dict[str, Any] | None:
    """The deployment intent a Lease carries, or None when it has no readable one.

    `source` says which Lease it is: "retained-state" (current releases) or
    "leader-election" (where an earlier release kept the intent).
    """
    meta = _meta(lease)
    annotations = meta.get("annotations") or {}
    intent = _json_annotation(annotations, INTENT_ANNOTATION)
    if not intent or not intent.get("planID"):
        return None
    identity = {
        "lease_name": meta.get("name", ""),
        "lease_namespace": meta.get("namespace", ""),
        "source": source,
        "plan_id": str(intent.get("planID", "")),
        "checksum": str(intent.get("checksum", "")),
        "holder": str(intent.get("holder", "")),
        "epoch": _int_or_none(intent.get("epoch")),
        "template_uid": str(intent.get("templateUID", "")),
        "recorded_at": parse_time(intent.get("recordedAt")),
    }
    row = dict(identity)
    row["fingerprint"] = fingerprint(identity)
    row["claim"] = _json_annotation(annotations, CLAIM_ANNOTATION) or {}
    row["lease_resource_version"] = str(meta.get("resourceVersion", ""))
    return row


def is_retained_state_lease(lease: dict[str, Any]) -> bool:
    meta = _meta(lease)
    if meta.get("name", "").endswith("-retained-state"):
        return True
    return any(r.get("kind") == "HAProxyTemplateConfig" for r in meta.get("ownerReferences") or [])


def term_row(lease: dict[str, Any]) -> dict[str, Any] | None:
    """The current leadership term of a leader-election Lease, or None when nobody holds it."""
    meta = _meta(lease)
    spec = lease.get("spec") or {}
    holder = spec.get("holderIdentity") or ""
    if not holder:
        return None
    annotations = meta.get("annotations") or {}
    return {
        "lease_name": meta.get("name", ""),
        "lease_namespace": meta.get("namespace", ""),
        "lease_uid": meta.get("uid", ""),
        "holder": holder,
        "epoch": _int_or_none(annotations.get(EPOCH_ANNOTATION)),
        "acquired_at": parse_time(spec.get("acquireTime")),
        "last_renew_at": parse_time(spec.get("renewTime")),
    }


def event_row(event: dict[str, Any]) -> dict[str, Any]:
    """Field values of a KubeEvent row from a core/v1 Event."""
    meta = _meta(event)
    involved = event.get("involvedObject") or event.get("regarding") or {}
    series = event.get("series") or {}
    first = parse_time(event.get("firstTimestamp")) or parse_time(event.get("eventTime"))
    last = (
        parse_time(event.get("lastTimestamp"))
        or parse_time(series.get("lastObservedTime"))
        or first
        or parse_time(meta.get("creationTimestamp"))
    )
    return {
        "uid": meta.get("uid", ""),
        "name": meta.get("name", ""),
        "namespace": meta.get("namespace", ""),
        "resource_version": str(meta.get("resourceVersion", "")),
        "involved_kind": involved.get("kind", ""),
        "involved_name": involved.get("name", ""),
        "involved_uid": involved.get("uid", ""),
        "reason": event.get("reason", "") or "",
        "type": event.get("type", "") or "",
        "message": event.get("message", "") or event.get("note", "") or "",
        "count": int(event.get("count") or series.get("count") or 1),
        "first_timestamp": first,
        "last_timestamp": last,
    }


def hub_row(template_config: dict[str, Any]) -> dict[str, Any]:
    """Hub status from a HAProxyTemplateConfig: status.activeController and the mode annotation.

    The hub's own mode is process configuration, not stored in Kubernetes; without the
    annotation a config carrying status.activeController is in cross-cluster HA ("ha": a
    Standby's copy names the Active, so this side may be either) and one without it is
    "standalone" (the default, inert mode of seed 004).
    """
    meta = _meta(template_config)
    status = template_config.get("status") or {}
    active = status.get("activeController") or {}
    mode = (meta.get("annotations") or {}).get(HUB_MODE_ANNOTATION) or (
        "ha" if active.get("activeIdentity") else "standalone"
    )
    return {
        "template_uid": meta.get("uid", ""),
        "template_name": meta.get("name", ""),
        "namespace": meta.get("namespace", ""),
        "mode": mode,
        "active_identity": active.get("activeIdentity", ""),
        "endpoint": active.get("endpoint", ""),
        "last_updated": parse_time(active.get("lastUpdated")),
        "render_warnings": status.get("renderWarnings") or {},
    }


def rv_newer(incoming: str, stored: str) -> bool:
    """Whether resourceVersion `incoming` supersedes `stored`.

    resourceVersions are opaque; when both are decimal (etcd and the local cluster) order them
    numerically so a replayed older event never overwrites newer state, else any change counts.
    """
    if not stored:
        return True
    if incoming.isdigit() and stored.isdigit():
        return int(incoming) > int(stored)
    return incoming != stored

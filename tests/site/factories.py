"""Kubernetes objects shaped as the controller writes them (docs/contracts.md, the CRDs)."""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import uuid
from typing import Any

NS = "haptic"
TEMPLATE_UID = "11111111-2222-3333-4444-555555555555"
GROUP = "haproxy-haptic.org"


def sha(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def checksum_of(files: dict[str, str]) -> str:
    digest = hashlib.sha256()
    for path in sorted(files):
        digest.update(path.encode() + b"\0" + files[path].encode() + b"\0")
    return "sha256:" + digest.hexdigest()


def owner(template_uid: str = TEMPLATE_UID) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": f"{GROUP}/v1alpha1",
            "kind": "HAProxyTemplateConfig",
            "name": "haptic",
            "uid": template_uid,
        }
    ]


def map_file(path: str, content: str, uid: str | None = None, rv: str = "1") -> dict[str, Any]:
    name = "map-" + sha(content)[7:23]
    return {
        "apiVersion": f"{GROUP}/v1alpha1",
        "kind": "HAProxyMapFile",
        "metadata": {
            "name": name,
            "namespace": NS,
            "uid": uid or str(uuid.uuid4()),
            "resourceVersion": rv,
            "creationTimestamp": "2026-11-30T08:00:00Z",
            "labels": {f"{GROUP}/role": "shared-child"},
            "ownerReferences": owner(),
        },
        "spec": {"path": path, "content": content, "checksum": sha(content)},
    }


def checkpoint(
    config: str,
    maps: list[dict[str, Any]] | None = None,
    *,
    plan_id: str = "",
    uid: str | None = None,
    rv: str = "1",
    created: str = "2026-11-30T08:00:00Z",
    compressed: bool = False,
    certificates: list[dict[str, Any]] | None = None,
    receipt_pod: str = "haproxy-0",
) -> dict[str, Any]:
    """A checkpoint HAProxyCfg referencing `maps` (objects from map_file)."""
    maps = maps or []
    files = {"haproxy.cfg": config} | {m["spec"]["path"]: m["spec"]["content"] for m in maps}
    checksum = checksum_of(files)
    plan_id = plan_id or hashlib.sha256(checksum.encode()).hexdigest()
    content = config
    if compressed:
        content = base64.b64encode(gzip.compress(config.encode())).decode()
    return {
        "apiVersion": f"{GROUP}/v1alpha1",
        "kind": "HAProxyCfg",
        "metadata": {
            "name": "checkpoint-" + checksum[7:23],
            "namespace": NS,
            "uid": uid or str(uuid.uuid4()),
            "resourceVersion": rv,
            "creationTimestamp": created,
            "labels": {f"{GROUP}/role": "checkpoint", f"{GROUP}/template-uid": TEMPLATE_UID},
            "ownerReferences": owner(),
        },
        "spec": {
            "path": "haproxy.cfg",
            "content": content,
            "compressed": compressed,
            "checksum": checksum,
            "planID": plan_id,
            "templateUID": TEMPLATE_UID,
            "auxiliaryFiles": {
                "mapFiles": [
                    {
                        "name": m["metadata"]["name"],
                        "uid": m["metadata"].get("uid", ""),
                        "path": m["spec"]["path"],
                        "checksum": m["spec"]["checksum"],
                    }
                    for m in maps
                ],
                "certificates": certificates or [],
            },
            "retainedPlan": {
                "encoding": "gzip+base64",
                "data": base64.b64encode(
                    gzip.compress(json.dumps({"plan": plan_id}).encode())
                ).decode(),
                "workerReceipt": {
                    "podName": receipt_pod,
                    "podUID": "pod-uid-" + receipt_pod,
                    "runtimeID": "rt-1",
                    "checksum": checksum,
                    "appliedPlanID": plan_id,
                    "runningPlanID": plan_id,
                    "workerOpsPlanID": plan_id,
                    "mode": "reload",
                    "acknowledgedAt": created,
                },
            },
        },
    }


def published(
    receipts: list[dict[str, Any]],
    retained: list[dict[str, Any]] | None = None,
    uid: str = "published-uid",
    rv: str = "1",
) -> dict[str, Any]:
    """The ordinary HAProxyCfg with status.deployedToPods and status.retainedConfigs."""
    return {
        "apiVersion": f"{GROUP}/v1alpha1",
        "kind": "HAProxyCfg",
        "metadata": {
            "name": "haptic",
            "namespace": NS,
            "uid": uid,
            "resourceVersion": rv,
            "labels": {f"{GROUP}/role": "published"},
            "ownerReferences": owner(),
        },
        "spec": {
            "path": "haproxy.cfg",
            "content": "global\n",
            "checksum": sha("x"),
            "templateUID": TEMPLATE_UID,
        },
        "status": {
            "deployedToPods": receipts,
            "retainedConfigs": [
                {"name": c["metadata"]["name"], "uid": c["metadata"]["uid"], "checksum": "x"}
                for c in retained or []
            ],
        },
    }


def receipt(pod: str, plan: str, checksum: str, at: str, mode: str = "reload") -> dict[str, Any]:
    return {
        "podName": pod,
        "podUID": "pod-uid-" + pod,
        "runtimeID": "rt-" + pod,
        "checksum": checksum,
        "appliedPlanID": plan,
        "runningPlanID": plan,
        "workerOpsPlanID": plan,
        "mode": mode,
        "consecutiveErrors": 0,
        "deployedAt": at,
    }


def retained_lease(
    plan: str, checksum: str, epoch: int, holder: str = "controller-a", rv: str = "1"
) -> dict[str, Any]:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": "haptic-retained-state",
            "namespace": NS,
            "uid": "retained-lease-uid",
            "resourceVersion": rv,
            "ownerReferences": owner(),
            "annotations": {
                f"{GROUP}/claim": json.dumps(
                    {"holder": holder, "epoch": epoch, "claimedAt": "2026-11-30T08:00:00Z"}
                ),
                f"{GROUP}/deployment-intent": json.dumps(
                    {
                        "planID": plan,
                        "checksum": checksum,
                        "holder": holder,
                        "epoch": epoch,
                        "templateUID": TEMPLATE_UID,
                        "recordedAt": f"2026-11-30T08:{epoch:02d}:00Z",
                    }
                ),
            },
        },
        "spec": {},
    }


def leader_lease(
    holder: str, epoch: int, acquired: str, renewed: str, rv: str = "1", uid: str = "leader-uid"
) -> dict[str, Any]:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": "haptic-leader",
            "namespace": NS,
            "uid": uid,
            "resourceVersion": rv,
            "annotations": {f"{GROUP}/epoch": str(epoch)},
        },
        "spec": {
            "holderIdentity": holder,
            "leaseDurationSeconds": 30,
            "acquireTime": acquired,
            "renewTime": renewed,
            "leaseTransitions": epoch,
        },
    }


def event(
    reason: str, message: str, count: int = 1, uid: str | None = None, rv: str = "1"
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": f"haptic.{uuid.uuid4().hex[:10]}",
            "namespace": NS,
            "uid": uid or str(uuid.uuid4()),
            "resourceVersion": rv,
        },
        "involvedObject": {
            "kind": "HAProxyTemplateConfig",
            "name": "haptic",
            "uid": TEMPLATE_UID,
            "namespace": NS,
        },
        "reason": reason,
        "message": message,
        "type": "Warning",
        "count": count,
        "firstTimestamp": "2026-11-30T08:00:00Z",
        "lastTimestamp": f"2026-11-30T08:{count:02d}:00Z",
    }

"""Kubernetes objects shaped as the controller writes them (docs/contracts.md, the CRDs)."""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import uuid
from typing import Any

from checkpoints import store
from controller.render.model import RenderWarning
from controller.render.warnings import event_body, warnings_summary

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


def receipt(
    pod: str,
    plan: str,
    checksum: str,
    at: str,
    mode: str = "reload",
    term: tuple[str, int] | None = None,
) -> dict[str, Any]:
    """A status.deployedToPods entry; `term` (holder, epoch) the applying term, omitted as
    a receipt published before receipts carried it."""
    extra = {"term": {"holder": term[0], "epoch": term[1]}} if term else {}
    return extra | {
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


def warning_event(warning: RenderWarning, at: str, identity: str = "haptic-0") -> dict[str, Any]:
    """The Event the leader writes for a RenderWarning (controller/render/warnings.py), as the
    API server returns it (uid, resourceVersion, timestamps of `at`)."""
    body = event_body(warning, identity)
    body["metadata"] |= {"uid": str(uuid.uuid4()), "resourceVersion": "1"}
    body |= {"apiVersion": "v1", "kind": "Event", "firstTimestamp": at, "lastTimestamp": at}
    return body


def template_config(status: dict[str, Any]) -> dict[str, Any]:
    """The HAProxyTemplateConfig with a status (renderWarnings, activeController...)."""
    return {
        "apiVersion": f"{GROUP}/v1alpha1",
        "kind": "HAProxyTemplateConfig",
        "metadata": {"name": "haptic", "namespace": NS, "uid": TEMPLATE_UID},
        "status": status,
    }


def render_warnings() -> dict[str, Any]:
    """Mirror a render's warnings: two current (the summary names them) and one stale (an
    Event from an earlier render that the last summary no longer names). Returns them."""
    missing = RenderWarning(
        "Ingress", "shop", "web", "ServiceNotFound", "service shop/web-svc not found"
    )
    conflict = RenderWarning(
        "Ingress", "blog", "www", "RouteConflict", "host www.example/ already routed by blog/old"
    )
    stale = RenderWarning("Secret", "shop", "tls", "InvalidSecret", "tls.key is not a PEM key")
    store.apply_event(warning_event(stale, "2026-11-30T07:00:00Z"))
    for warning in (missing, conflict):
        store.apply_event(warning_event(warning, "2026-11-30T08:00:00Z"))
    summary = warnings_summary([missing, conflict])
    store.apply_template_config(template_config({"renderWarnings": summary}))
    return {"missing": missing, "conflict": conflict, "stale": stale, "summary": summary}

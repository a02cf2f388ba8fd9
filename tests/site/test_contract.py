"""The mirror reads exactly what the controller writes.

Objects here come from the controller's own encoders (controller.retained), not from the
site's test factories, so a drift between publisher and mirror fails this test.
"""

from __future__ import annotations

import uuid

import pytest

from checkpoints import queries, store
from checkpoints.models import Checkpoint, DeploymentIntent
from controller.render.model import RenderedFile
from controller.retained.checkpoint import TemplateRef, encode_checkpoint, with_child_uids
from controller.retained.intent import (
    CLAIM_ANNOTATION,
    INTENT_ANNOTATION,
    Claim,
    claim_annotation,
    intent_annotation,
)
from controller.retained.intent import DeploymentIntent as ControllerIntent
from controller.retained.receipts import PodReceipt as ControllerReceipt

pytestmark = pytest.mark.django_db

TEMPLATE = TemplateRef(name="haptic", namespace="haptic", uid="tmpl-uid-1")


def _as_stored(obj: dict, rv: str = "1") -> dict:
    """What the API server returns: the object with uid and resourceVersion."""
    obj = dict(obj)
    obj["metadata"] = dict(obj["metadata"], uid=str(uuid.uuid4()), resourceVersion=rv)
    obj["metadata"].setdefault("creationTimestamp", "2026-11-30T08:00:00Z")
    return obj


def test_controller_checkpoint_objects_mirror_completely() -> None:
    files = [
        RenderedFile("haproxy.cfg", "config", b"global\n  maxconn 64\n"),
        RenderedFile("maps/hosts.map", "map", b"a.example be_a\n"),
        RenderedFile("general/503.http", "general", b"HTTP/1.0 503\r\n\r\n"),
        RenderedFile("crt-lists/list.txt", "crt-list", b"certs/a.pem\n"),
        RenderedFile("certs/a.pem", "certificate", b"-----BEGIN PRIVATE KEY-----\nsecret\n"),
    ]
    receipt = ControllerReceipt(
        "haproxy-0", "pod-uid", "rt-1", "sum", "plan", "plan", "plan", "reload"
    )
    encoded = encode_checkpoint(TEMPLATE, files, receipt, "2026-11-30T08:00:00Z")
    children = [_as_stored(c) for c in encoded.children]
    uids = {c["metadata"]["name"]: c["metadata"]["uid"] for c in children}
    uids |= {s["metadata"]["name"]: str(uuid.uuid4()) for s in encoded.secrets}
    config = _as_stored(with_child_uids(encoded.config, uids))

    store.apply_haproxycfg(config)  # before its children, as a watch may deliver it
    for child in children:
        store.apply_auxiliary(child)

    checkpoint = Checkpoint.objects.get()
    assert checkpoint.template_uid == TEMPLATE.uid and checkpoint.template_name == "haptic"
    assert checkpoint.plan_id == config["spec"]["planID"]
    assert checkpoint.receipt_pod_name == "haproxy-0" and checkpoint.receipt_mode == "reload"
    stored = {f.path: f for f in checkpoint.files.all()}
    for f in files:
        row = stored[f.path]
        assert row.kind == f.kind
        if f.kind == "certificate":
            assert row.content is None  # never the key material
            assert row.checksum == "sha256:" + f.sha256
        else:
            assert row.content == f.content.decode(), f.path


def test_controller_intent_and_claim_annotations_mirror() -> None:
    intent = ControllerIntent("plan-x", "sha256:x", "ctrl-a", 7, TEMPLATE.uid)
    lease = {
        "metadata": {
            "name": "haptic-retained-state",
            "namespace": "haptic",
            "uid": "lease-uid",
            "resourceVersion": "5",
            "annotations": {
                CLAIM_ANNOTATION: claim_annotation(Claim("ctrl-a", 7)),
                INTENT_ANNOTATION: intent_annotation(intent, "2026-11-30T08:00:00Z"),
            },
        },
        "spec": {},
    }
    store.apply_lease(lease)
    row = DeploymentIntent.objects.get()
    assert (row.plan_id, row.checksum, row.holder, row.epoch, row.template_uid) == (
        "plan-x",
        "sha256:x",
        "ctrl-a",
        7,
        TEMPLATE.uid,
    )
    assert row.claim == {"holder": "ctrl-a", "epoch": 7}
    assert queries.latest_intent() == row

"""Checkpoint encode/decode: complete reconstruction and refusal of every tampering."""

from __future__ import annotations

import base64
import copy
import gzip
import json

import pytest

from controller.render import RenderedFile, checksum
from controller.retained.checkpoint import (
    CHILD_KINDS,
    TemplateRef,
    checkpoint_name,
    decode_checkpoint,
    encode_checkpoint,
    shared_children_of,
    with_child_uids,
)
from controller.retained.receipts import PodReceipt
from controller.retained.selection import CheckpointPointer

TEMPLATE = TemplateRef("haptic", "haptic", "template-uid")
CONFIG = b"""global
    default-path config
defaults
    mode http
backend be_a
    server SRV_1 127.0.1.5:8080 weight 1
    server SRV_2 127.0.0.1:1 weight 1 disabled
"""
FILES = (
    RenderedFile("haproxy.cfg", "config", CONFIG),
    RenderedFile("maps/hosts.map", "map", b"a.example be_a\n"),
    RenderedFile("certs/default_tls.pem", "certificate", b"-----BEGIN CERT-----\nxyz\n"),
    RenderedFile("crt-lists/certs.txt", "crt-list", b"certs/default_tls.pem\n"),
    RenderedFile("general/errors.http", "general", b"HTTP/1.0 503\r\n\r\n"),
)


def _receipt(files=FILES) -> PodReceipt:
    from controller.render import build_plan, plan_id

    pid = plan_id(build_plan(list(files)))
    return PodReceipt("haproxy-0", "pod-uid", "rt-1", checksum(files), pid, pid, pid, "reload")


def _published(files=FILES):
    """Encode, then 'write' like the API server would: assign uids, fill references."""
    objects = encode_checkpoint(TEMPLATE, files, _receipt(files), "2026-11-30T00:00:00Z")
    uids = {}
    children, secrets = {}, {}
    for i, child in enumerate(objects.children):
        child = copy.deepcopy(child)
        child["metadata"]["uid"] = f"child-uid-{i}"
        uids[child["metadata"]["name"]] = child["metadata"]["uid"]
        children[(child["kind"], child["metadata"]["name"])] = child
    for i, secret in enumerate(objects.secrets):
        secret = copy.deepcopy(secret)
        secret["metadata"]["uid"] = f"secret-uid-{i}"
        uids[secret["metadata"]["name"]] = secret["metadata"]["uid"]
        secrets[secret["metadata"]["name"]] = secret
    config = with_child_uids(objects.config, uids)
    config["metadata"]["uid"] = "cp-uid"
    pointer = CheckpointPointer(objects.name, "cp-uid", config["spec"]["checksum"])
    return pointer, config, children, secrets


def test_complete_artifact_reconstruction() -> None:
    pointer, config, children, secrets = _published()
    decoded = decode_checkpoint(TEMPLATE, pointer, config, children, secrets)
    assert decoded.snapshot.integrity_error is None
    assert {f.path: f.content for f in decoded.files} == {f.path: f.content for f in FILES}
    assert {f.path: f.kind for f in decoded.files} == {f.path: f.kind for f in FILES}
    assert decoded.snapshot.receipt == _receipt()
    assert pointer.name == checkpoint_name("haptic", checksum(FILES))
    assert len(shared_children_of(config)) == 4


def test_identical_output_reuses_its_address_and_children_are_shared() -> None:
    a = encode_checkpoint(TEMPLATE, FILES, _receipt(), "t1")
    b = encode_checkpoint(TEMPLATE, FILES, _receipt(), "t2")
    assert a.name == b.name
    changed = (RenderedFile("haproxy.cfg", "config", CONFIG + b"# more\n"), *FILES[1:])
    c = encode_checkpoint(TEMPLATE, changed, _receipt(changed), "t3")
    assert c.name != a.name
    # The auxiliary bytes did not change: the same shared children serve both checkpoints.
    assert [x["metadata"]["name"] for x in c.children] == [
        x["metadata"]["name"] for x in a.children
    ]


def _decode(pointer, config, children, secrets):
    return decode_checkpoint(TEMPLATE, pointer, config, children, secrets).snapshot


def test_tampered_bytes_without_changing_the_checksum_are_refused() -> None:
    pointer, config, children, secrets = _published()
    key = next(k for k in children if k[0] == "HAProxyMapFile")
    spec = children[key]["spec"]
    spec["content"] = base64.b64encode(gzip.compress(b"evil.example be_a\n")).decode()
    error = _decode(pointer, config, children, secrets).integrity_error
    assert error and "digest mismatch" in error


def test_tampered_main_config_is_refused() -> None:
    pointer, config, children, secrets = _published()
    config["spec"]["content"] = base64.b64encode(gzip.compress(CONFIG + b"#x\n")).decode()
    assert _decode(pointer, config, children, secrets).integrity_error


def test_tampered_certificate_bytes_are_refused() -> None:
    pointer, config, children, secrets = _published()
    (secret,) = secrets.values()
    secret["data"]["tls.pem"] = base64.b64encode(b"other").decode()
    assert "certificate digest" in _decode(pointer, config, children, secrets).integrity_error


def test_incomplete_publication_is_refused() -> None:
    pointer, config, children, secrets = _published()
    missing = dict(children)
    missing.pop(next(iter(missing)))
    assert "missing" in _decode(pointer, config, missing, secrets).integrity_error
    dropped_ref = copy.deepcopy(config)
    dropped_ref["spec"]["auxiliaryFiles"]["mapFiles"] = []
    assert "incomplete" in _decode(pointer, dropped_ref, children, secrets).integrity_error


@pytest.mark.parametrize(
    "forge",
    [
        lambda cfg, ch, s: cfg["metadata"].update(ownerReferences=[]),
        lambda cfg, ch, s: cfg["metadata"].update(namespace="other"),
        lambda cfg, ch, s: cfg["metadata"].update(uid="another-uid"),
        lambda cfg, ch, s: cfg["metadata"].update(deletionTimestamp="2026-01-01T00:00:00Z"),
        lambda cfg, ch, s: cfg["metadata"]["labels"].update({"haproxy-haptic.org/role": "x"}),
        lambda cfg, ch, s: next(iter(ch.values()))["metadata"].update(ownerReferences=[]),
        lambda cfg, ch, s: next(iter(ch.values()))["metadata"].update(uid="swapped"),
        lambda cfg, ch, s: next(iter(s.values()))["metadata"].update(ownerReferences=[]),
        lambda cfg, ch, s: cfg["spec"]["retainedPlan"]["workerReceipt"].pop("runtimeID"),
        lambda cfg, ch, s: cfg["spec"].update(planID="forged"),
    ],
)
def test_forged_ownership_identity_or_receipt_is_refused(forge) -> None:
    pointer, config, children, secrets = _published()
    forge(config, children, secrets)
    assert _decode(pointer, config, children, secrets).integrity_error


def test_unsafe_artifact_paths_are_refused() -> None:
    pointer, config, children, secrets = _published()
    retained = config["spec"]["retainedPlan"]
    data = json.loads(gzip.decompress(base64.b64decode(retained["data"])))
    data["files"][0]["path"] = "../etc/passwd"
    retained["data"] = base64.b64encode(gzip.compress(json.dumps(data).encode())).decode()
    assert _decode(pointer, config, children, secrets).integrity_error


def test_pointer_naming_another_checksum_is_refused() -> None:
    pointer, config, children, secrets = _published()
    other = CheckpointPointer(pointer.name, pointer.uid, "sha256:" + "0" * 64)
    assert _decode(other, config, children, secrets).integrity_error


def test_child_kinds_cover_every_auxiliary_file_kind() -> None:
    assert set(CHILD_KINDS) | {"certificate", "config"} == {
        "config",
        "map",
        "general",
        "certificate",
        "crt-list",
    }

"""The apply manifest as the deployer sends it (controller/deploy/diff.py): a render's files
are encoded once for every pod, and what the agent reads is the manifest all the same."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from controller.deploy.diff import BOOTSTRAP, Apply, encode_manifest, manifest
from controller.render import RenderInput, render
from tests.render.builders import scale_set, template_config

OUTPUT = render(RenderInput(template_config(), **scale_set(3)))


@given(
    holder=st.text(max_size=20),
    epoch=st.integers(0, 2**40),
    sequence=st.integers(0, 2**40),
    previous=st.one_of(st.none(), st.text(max_size=64)),
    mode=st.sampled_from(["auto", "reload"]),
    bootstrap=st.booleans(),
)
def test_the_encoded_manifest_reads_as_the_manifest(
    holder: str, epoch: int, sequence: int, previous: str | None, mode: str, bootstrap: bool
) -> None:
    ops = ({"op": "set_server", "backend": "b", "server": "SRV_1", "state": "ready"},)
    decision = Apply(mode, ops, previous, "test")
    body = manifest(OUTPUT, decision, holder, epoch, sequence, expect_bootstrap=bootstrap)
    assert json.loads(encode_manifest(body, OUTPUT)) == json.loads(json.dumps(body))


def test_every_pods_manifest_shares_one_encoding_of_the_files() -> None:
    first = manifest(OUTPUT, BOOTSTRAP, "a", 1, 1)
    second = manifest(OUTPUT, BOOTSTRAP, "a", 1, 2)
    assert first["files"] is second["files"] is OUTPUT.manifest_files
    assert OUTPUT.manifest_files_json in encode_manifest(first, OUTPUT)
    # Files that are not the output's own are encoded with the rest.
    other = dict(first, files=[])
    assert json.loads(encode_manifest(other, OUTPUT))["files"] == []

"""The apply manifest as the deployer sends it (controller/deploy/diff.py, deployer.py): a
render's files are encoded once per deployment for every pod, and what the agent reads is
the manifest all the same."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from controller.deploy import deployer
from controller.deploy.diff import (
    BOOTSTRAP,
    Apply,
    encode_manifest,
    encoded_files,
    manifest,
    manifest_head,
)
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
    head = manifest_head(OUTPUT, decision, holder, epoch, sequence, bootstrap)
    body = encode_manifest(head, encoded_files(OUTPUT))
    assert json.loads(body) == manifest(head, OUTPUT)


def test_one_deployment_encodes_the_files_once_for_every_pod(monkeypatch: Any) -> None:
    made: list[int] = []

    def counted(output: Any, from_base: bool = False) -> bytes:
        made.append(1)
        return encoded_files(output, from_base)

    monkeypatch.setattr(deployer, "encoded_files", counted)
    one = deployer._Deployment(OUTPUT, "a", 1, 7, {})
    bodies = [one.body(BOOTSTRAP), one.body(Apply("auto", (), "p0", "test"))]
    assert len(made) == 1
    assert [json.loads(b)["expected_previous_plan_id"] for b in bodies] == [None, "p0"]
    assert all(json.loads(b)["files"] == OUTPUT.manifest_files() for b in bodies)

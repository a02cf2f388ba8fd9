"""An endpoint change reaches a pod that runs the basis plan as edits of its own files, not
as their bytes (controller.render.model.RuntimeDelta, agents.manifest.resolve_base;
docs/contracts.md "Files from the base plan"): what the agent makes of the edits is the
full render's file set, byte for byte, and the manifest stays small."""

from __future__ import annotations

import copy
import json

from hypothesis import HealthCheck, given, settings

from agents.manifest import ManifestError, parse_manifest, resolve_base
from controller.deploy.diff import Apply, decide_pod, encode_manifest, encoded_files, manifest_head
from controller.render import RenderInput, render
from controller.render import incremental as inc
from controller.render.engine import render_with_basis
from controller.render.model import RenderOutput
from tests.render import builders as b
from tests.render.test_incremental import SLOTS, _apply_event, _objects, events

# A backend snippet with characters of more than one byte before the server lines: the
# edits' offsets are bytes, not characters.
SNIPPET = "# café, naïve, 日本\nhttp-response set-header X-Route édition"


def _template() -> dict:
    config = b.template_config(slots=SLOTS)
    config["spec"]["templateLibraries"]["ingress"]["allowSnippets"] = True
    return config


def _with_snippet() -> dict[str, list]:
    objects = _objects()
    annotated = copy.deepcopy(objects["ingresses"][-1])
    annotated["metadata"]["name"] = "web-snippet"
    annotated["metadata"]["annotations"] = {"haproxy.org/backend-config-snippet": SNIPPET}
    annotated["spec"]["rules"][0]["host"] = "snippet.example.test"
    return {**objects, "ingresses": [*objects["ingresses"], annotated]}


def _input(objects: dict[str, list], previous: RenderOutput | None) -> RenderInput:
    return RenderInput(
        _template(),
        **{k: tuple(v) for k, v in objects.items()},
        previous_plan=previous.plan if previous else None,
    )


def _agent_files(base: RenderOutput, output: RenderOutput) -> dict[str, bytes]:
    """What an agent running `base` makes of the manifest the deployer sends it."""
    decision = decide_pod(base.plan_id, base.checksum, None, output, {base.plan_id: base.plan})
    assert isinstance(decision, Apply) and decision.from_base
    head = manifest_head(output, decision, "leader", 1, 1)
    body = encode_manifest(head, encoded_files(output, from_base=True))
    assert len(body) < 4096 + len(json.dumps(list(decision.runtime_operations)))
    manifest = parse_manifest(json.loads(body))
    assert manifest.files == () and len(manifest.based) == len(output.files)
    resolved = resolve_base(manifest, {f.path: f.content for f in base.files})
    return {f.path: f.content for f in resolved.files}


def test_the_snippet_puts_multibyte_text_before_the_server_lines() -> None:
    output, basis = render_with_basis(_input(_with_snippet(), None))
    assert basis is not None  # snippets keep the incremental path
    config = output.config.decode()
    assert "日本" in config
    assert config.index("日本") < config.index("server SRV_1", config.index("日本"))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events)
def test_the_agent_makes_the_full_render_from_the_edits_of_its_own_files(sequence) -> None:
    objects = _with_snippet()
    output, basis = render_with_basis(_input(objects, None))
    for event in sequence:
        objects = _apply_event(objects, event)
        inp = _input(objects, output)
        step = inc.update(basis, inp) if basis is not None else None
        if step is None:
            output, basis = render_with_basis(inp)
            continue
        if step.output.plan_id != output.plan_id:  # (not a change of warnings alone)
            full = render(inp)
            assert _agent_files(output, step.output) == {f.path: f.content for f in full.files}
        output, basis = step.output, step.basis


def test_edits_of_a_file_that_is_not_the_base_are_refused() -> None:
    objects = _objects()
    output, basis = render_with_basis(_input(objects, None))
    assert basis is not None
    changed = copy.deepcopy(objects["endpointslices"][0])
    changed["endpoints"][0]["conditions"]["ready"] = False
    step = inc.update(
        basis,
        _input({**objects, "endpointslices": [changed, *objects["endpointslices"][1:]]}, output),
    )
    assert step is not None and step.output is not output
    decision = decide_pod(output.plan_id, output.checksum, None, step.output, {})
    assert isinstance(decision, Apply) and decision.from_base
    head = manifest_head(step.output, decision, "leader", 1, 1)
    manifest = parse_manifest(json.loads(encode_manifest(head, encoded_files(step.output, True))))
    drifted = {f.path: f.content for f in output.files}
    drifted["haproxy.cfg"] = drifted["haproxy.cfg"].replace(b"\n", b"\n ", 1)
    try:
        resolve_base(manifest, drifted)
    except ManifestError as exc:
        assert exc.reason in ("digest_mismatch", "size_mismatch", "bad_patch")
    else:
        raise AssertionError("edits of another file were accepted")
    del drifted["haproxy.cfg"]
    try:
        resolve_base(manifest, drifted)
    except ManifestError as exc:
        assert exc.reason == "base_unavailable"
    else:
        raise AssertionError("a file missing from the base was accepted")

"""The render gate: the real haproxy -c -dr, and the optimistic/pessimistic state machine."""

from __future__ import annotations

import dataclasses
import os
import tempfile
import time
from pathlib import Path

import pytest

from controller.render import RenderedFile, render
from controller.rendergate import (
    GateState,
    GateVerdict,
    RenderGate,
    check_output,
    haproxy_binary,
    write_tree,
)
from tests.render import builders as b
from tests.render.cases import simple_host, tls

NBPROC_TEMPLATE = (
    "global\n    nbproc 2\n"
    "defaults\n    mode http\n    timeout connect 1s\n    timeout client 1s\n"
    "    timeout server 1s\n"
    'frontend f\n    bind "${POD_IP}:8080"\n'
)


def _refused_render():
    inp = dataclasses.replace(
        simple_host(),
        template_config=b.template_config(haproxyConfig={"template": NBPROC_TEMPLATE}),
    )
    return render(inp)


def _verdict(accepted: bool) -> GateVerdict:
    return GateVerdict(accepted, "", "p", "sha256:x", 0.0)


def test_check_output_accepts_a_valid_render_with_certificates() -> None:
    out = render(tls())
    verdict = check_output(out)
    assert verdict.accepted, verdict.output
    assert verdict.plan_id == out.plan_id and verdict.checksum == out.checksum


def test_check_output_refuses_nbproc_with_haproxys_reason() -> None:
    verdict = check_output(_refused_render())
    assert not verdict.accepted
    assert "nbproc" in verdict.output


def test_check_output_refuses_a_config_naming_a_missing_file() -> None:
    out = render(simple_host())
    files = tuple(f for f in out.files if f.path != "maps/path-prefix.map")
    verdict = check_output(dataclasses.replace(out, files=files))
    assert not verdict.accepted and "path-prefix.map" in verdict.output


def test_check_leaves_no_temporary_tree_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A temporary directory of this test's own: other workers' checks run at the same time.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    check_output(render(simple_host()))
    assert not list(tmp_path.glob("haptic-gate-*"))


def test_write_tree_refuses_paths_outside_the_tree(tmp_path: Path) -> None:
    out = render(simple_host())
    for bad in ("../escape.cfg", "/etc/passwd"):
        evil = dataclasses.replace(out, files=(*out.files, RenderedFile(bad, "general", b"x")))
        with pytest.raises(ValueError, match="unsafe path"):
            write_tree(evil, tmp_path)


def test_haproxy_binary_honours_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HAPTIC_HAPROXY_BIN", "/nonexistent/haproxy")
    assert haproxy_binary() == "/nonexistent/haproxy"
    verdict = check_output(render(simple_host()))
    assert not verdict.accepted and "could not run" in verdict.output
    monkeypatch.delenv("HAPTIC_HAPROXY_BIN")
    assert os.access(haproxy_binary(), os.X_OK)


def test_gate_state_is_optimistic_then_pessimistic_after_a_refusal() -> None:
    state = GateState()
    assert not state.must_wait(term_first_render=False)  # optimistic: dispatch at once
    assert state.must_wait(term_first_render=True)  # ADR-0033: first render of a term waits
    assert state.record(1, _verdict(False))
    assert state.pessimistic and state.must_wait(term_first_render=False)
    assert state.record(2, _verdict(False)) and state.must_wait(False)  # still holding
    assert state.record(3, _verdict(True))
    assert not state.pessimistic and not state.must_wait(False)


def test_gate_state_ignores_verdicts_older_than_the_last_one() -> None:
    state = GateState()
    assert state.record(5, _verdict(True))
    assert not state.record(4, _verdict(False))  # finished late: a newer render was judged
    assert not state.pessimistic
    assert state.last_verdict is not None and state.last_verdict.accepted


def test_new_term_starts_optimistic_and_ignores_the_previous_terms_verdicts() -> None:
    state = GateState()
    state.record(1, _verdict(False))
    state.new_term(sequence_floor=3)
    assert not state.pessimistic and state.must_wait(True) and not state.must_wait(False)
    assert not state.record(2, _verdict(False))  # a render of the old term
    assert not state.pessimistic
    assert state.record(4, _verdict(False)) and state.pessimistic


def test_render_gate_runs_checks_off_the_caller_thread_with_the_real_binary() -> None:
    gate = RenderGate()
    try:
        assert not gate.must_wait(term_first_render=False)
        refused = gate.submit(_refused_render()).result(timeout=60)
        assert not refused.accepted and "nbproc" in refused.output
        assert gate.pessimistic and gate.must_wait(term_first_render=False)
        accepted = gate.submit(render(simple_host())).result(timeout=60)
        assert accepted.accepted, accepted.output
        assert not gate.pessimistic and not gate.must_wait(False)
        gate.submit(_refused_render()).result(timeout=60)
        gate.new_term()
        assert not gate.pessimistic and gate.must_wait(term_first_render=True)
    finally:
        gate.close()


def test_check_before_dispatch_waits_only_when_it_must() -> None:
    seen: list[tuple[str, bool]] = []
    gate = RenderGate(on_verdict=lambda out, v: seen.append((out.plan_id, v.accepted)))
    try:
        good, bad = render(simple_host()), _refused_render()
        # First render of a term: waits, even though the gate is optimistic.
        verdict = gate.check_before_dispatch(good, term_first_render=True)
        assert verdict is not None and verdict.accepted
        # Optimistic: no waiting; the refusal arrives later and turns the gate pessimistic.
        assert gate.check_before_dispatch(bad, term_first_render=False) is None
        deadline = time.monotonic() + 60
        while not gate.pessimistic and time.monotonic() < deadline:
            time.sleep(0.01)
        assert gate.pessimistic
        # Pessimistic: the next render waits for its verdict, and a pass reopens the gate.
        verdict = gate.check_before_dispatch(good, term_first_render=False)
        assert verdict is not None and verdict.accepted and not gate.pessimistic
        assert seen == [(good.plan_id, True), (bad.plan_id, False), (good.plan_id, True)]
    finally:
        gate.close()


def test_a_terms_listener_never_replaces_the_replicas_own() -> None:
    """Found merging the HTTP store with the term split: the term set `gate.on_verdict` for
    its lifetime and so replaced the replica's listener (the HTTP store never settled a
    pending body while a term ran). Both hear every verdict; the term's goes with the term."""
    replica: list[bool] = []
    term: list[bool] = []
    gate = RenderGate(on_verdict=lambda out, v: replica.append(v.accepted))
    try:
        gate.on_term_verdict = lambda out, v: term.append(v.accepted)
        gate.submit(render(simple_host())).result(timeout=60)
        gate.submit(_refused_render()).result(timeout=60)
        assert replica == [True, False] and term == [True, False]
        gate.on_term_verdict = None
        gate.submit(render(simple_host())).result(timeout=60)
        assert replica == [True, False, True] and term == [True, False]
    finally:
        gate.close()

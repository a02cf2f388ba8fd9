"""Unit tests of the pure decisions and of the HAProxy text parsers."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.decide import (
    Current,
    choose_action,
    expected_servers,
    fence,
    map_problems,
    runtime_commands,
    server_problems,
)
from agents.haproxy_text import (
    parse_map_file,
    parse_reload_response,
    parse_servers_state,
    parse_show_map,
    parse_show_proc,
)
from agents.manifest import ManifestError, MapOp, SetServer, build_manifest, parse_manifest

CFG = b"global\n"
DIGEST = "cd" * 32


def manifest(plan="p2", previous="p1", epoch=2, sequence=5, mode="auto", maps=b"a b\n", **kw):
    """`ops`: the manifest's runtime operations (none by default)."""
    return parse_manifest(
        build_manifest(
            plan_id=plan,
            files={"haproxy.cfg": ("config", kw.get("cfg", CFG)), "maps/h.map": ("map", maps)},
            structure_digest=kw.get("structure", DIGEST),
            token={"holder": "c", "epoch": epoch, "sequence": sequence},
            expected_previous_plan_id=previous,
            mode=mode,
            runtime_operations=kw.get("ops"),
        )
    )


def current(**overrides) -> Current:
    m = manifest(plan="p1")
    values = dict(
        applied_plan_id="p1",
        applied_checksum=m.checksum,
        applied_token=m.token,
        files={f.path: (f.kind, f.sha256) for f in m.files},
        running_structure_digest=DIGEST,
        worker_alive=True,
        pending_reload=False,
        violation=False,
    )
    values.update(overrides)
    return Current(**values)


def test_fence_refuses_older_epochs_older_sequences_and_wrong_previous_plan():
    cur = current()
    assert fence(cur, manifest(epoch=1, sequence=99)) == "stale_epoch"
    assert fence(cur, manifest(epoch=2, sequence=4)) == "stale_sequence"
    assert fence(cur, manifest(previous="p0")) == "unexpected_previous_plan"
    assert fence(cur, manifest(previous=None)) == "unexpected_previous_plan"
    assert fence(cur, manifest()) is None
    assert fence(cur, manifest(epoch=3, sequence=0)) is None  # a new term restarts sequences


def test_a_bootstrap_pod_accepts_only_a_null_previous_plan():
    boot = current(applied_plan_id=None, applied_checksum=None, applied_token=None, files={})
    assert fence(boot, manifest(previous=None)) is None
    assert fence(boot, manifest(previous="p1")) == "unexpected_previous_plan"


def expecting_bootstrap(**kw):
    raw = build_manifest(
        plan_id=kw.get("plan", "p-recovered"),
        files={"haproxy.cfg": ("config", CFG), "maps/h.map": ("map", b"a b\n")},
        structure_digest=DIGEST,
        token={"holder": "c", "epoch": kw.get("epoch", 3), "sequence": 1},
        expected_previous_plan_id=None,
    )
    raw["expect_bootstrap"] = True
    return parse_manifest(raw)


def bootstrap_pod(**overrides) -> Current:
    values = dict(
        applied_plan_id=None,
        applied_checksum=None,
        applied_token=None,
        files={},
        running_structure_digest=None,
        bootstrap=True,
    )
    values.update(overrides)
    return current(**values)


def test_a_bootstrap_expectation_is_refused_by_every_pod_that_is_not_bootstrap():
    wanted = expecting_bootstrap()
    assert fence(bootstrap_pod(), wanted) is None
    assert fence(current(), wanted) == "not_bootstrap"
    # No applied plan, yet not bootstrap: a violation dropped the plan at start and the
    # last-known-good is kept. The previous-plan fence alone lets such a pod through.
    dropped = bootstrap_pod(violation=True, bootstrap=False)
    assert fence(dropped, manifest(previous=None, epoch=3)) is None
    assert fence(dropped, wanted) == "not_bootstrap"
    # A retry of the recovery apply that configured the pod is still a retry.
    done = current(
        applied_plan_id=wanted.plan_id, applied_checksum=wanted.checksum, applied_token=wanted.token
    )
    assert fence(done, wanted) is None


@given(
    st.booleans(),
    st.sampled_from([None, "p1", "p-recovered"]),
    st.one_of(st.none(), st.integers(0, 5)),
    st.booleans(),
)
@settings(deadline=None)
def test_a_bootstrap_expectation_only_passes_a_bootstrap_pod_or_its_own_retry(
    bootstrap, applied, epoch, violation
):
    wanted = expecting_bootstrap()
    token = None if epoch is None else manifest(epoch=epoch, sequence=1).token
    if epoch == 3 and applied == wanted.plan_id:
        token = wanted.token  # the very apply, retried
    pod = current(
        applied_plan_id=applied,
        applied_checksum=wanted.checksum if applied == wanted.plan_id else None,
        applied_token=token,
        violation=violation,
        bootstrap=bootstrap,
    )
    verdict = fence(pod, wanted)
    retry = token == wanted.token and applied == wanted.plan_id
    if verdict is None:
        assert bootstrap or retry
    if bootstrap and applied is None and token is None:
        assert verdict is None  # a real bootstrap pod is never refused


def test_a_bootstrap_expectation_must_be_a_boolean_without_a_previous_plan():
    raw = build_manifest(
        plan_id="p",
        files={"haproxy.cfg": ("config", CFG)},
        structure_digest=DIGEST,
        token={"holder": "c", "epoch": 1, "sequence": 1},
        expected_previous_plan_id="p0",
    )
    assert parse_manifest(raw).expect_bootstrap is False
    for value in ("yes", 1):
        with pytest.raises(ManifestError, match="expect_bootstrap"):
            parse_manifest({**raw, "expected_previous_plan_id": None, "expect_bootstrap": value})
    with pytest.raises(ManifestError, match="expect_bootstrap"):
        parse_manifest({**raw, "expect_bootstrap": True})


@given(st.integers(0, 50), st.integers(0, 50), st.integers(0, 50), st.integers(0, 50))
@settings(deadline=None)
def test_fence_never_accepts_a_token_older_than_the_applied_one(e1, s1, e2, s2):
    cur = current(applied_token=manifest(epoch=e1, sequence=s1).token)
    verdict = fence(cur, manifest(epoch=e2, sequence=s2))
    if (e2, s2) < (e1, s1):
        assert verdict in ("stale_epoch", "stale_sequence")
    else:
        assert verdict is None


def test_runtime_only_when_structure_equal_and_only_config_or_map_changed():
    ops = [{"op": "map_set", "map": "maps/h.map", "key": "a", "value": "c"}]
    assert choose_action(current(), manifest(maps=b"a c\n", ops=ops)).action == "runtime"
    assert choose_action(current(), manifest(cfg=b"global\n#x\n", ops=ops)).action == "runtime"
    assert choose_action(current(), manifest(structure="ef" * 32)).action == "reload"
    assert choose_action(current(), manifest(mode="reload")).action == "reload"
    assert choose_action(current(violation=True), manifest()).action == "reload"
    assert choose_action(current(worker_alive=False), manifest()).action == "reload"
    assert choose_action(current(running_structure_digest=None), manifest()).action == "reload"
    assert choose_action(current(pending_reload=True), manifest()).action == "reload"
    assert choose_action(current(), manifest(mode="revert_lkg")).action == "revert"
    same = manifest(plan="p1")
    assert choose_action(current(), same).action == "noop"


def test_changed_bytes_with_no_runtime_operation_are_a_file_only_apply():
    """Nothing to tell the worker (its runtime state already matches the new bytes, e.g. a
    map file's comment): the files are written and read back, no command, no reload."""
    assert choose_action(current(), manifest(maps=b"# generated\na b\n")).action == "file-only"
    assert choose_action(current(), manifest(cfg=b"global\n#x\n")).action == "file-only"
    # Anything that forces a reload still does.
    assert choose_action(current(), manifest(maps=b"a c\n", structure="ef" * 32)).action == (
        "reload"
    )
    assert choose_action(current(pending_reload=True), manifest(maps=b"#\na b\n")).action == (
        "reload"
    )


def test_a_changed_file_set_or_a_non_runtime_kind_reloads():
    cur = current(files={**current().files, "general/x": ("general", "00" * 32)})
    assert choose_action(cur, manifest()).action == "reload"


def test_runtime_commands_pick_set_or_add_for_maps_and_cover_every_server_attribute():
    ops = (
        SetServer("be", "s1", "10.0.0.2", 8080, 50, "drain"),
        MapOp("map_set", "maps/h.map", "a", "x"),
        MapOp("map_set", "maps/h.map", "new", "y"),
        MapOp("map_del", "maps/h.map", "gone", None),
        MapOp("map_del", "maps/h.map", "absent", None),
    )
    maps = {"maps/h.map": {"a": "b", "gone": "z"}}
    assert runtime_commands(ops, maps) == [
        "set server be/s1 addr 10.0.0.2 port 8080",
        "set server be/s1 weight 50",
        "set server be/s1 state drain",
        "set map maps/h.map a x",
        "add map maps/h.map new y",
        "del map maps/h.map gone",
    ]
    assert maps == {"maps/h.map": {"a": "x", "new": "y"}}


SERVERS_STATE = """1
# be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state srv_uweight srv_iweight \
srv_time_since_last_change srv_check_status srv_check_result srv_check_health srv_check_state \
srv_agent_state bk_f_forced_id srv_f_forced_id srv_fqdn srv_port srvrecord srv_use_ssl \
srv_check_port srv_check_addr srv_agent_addr srv_agent_port
4 be 1 s1 10.0.0.2 2 8 50 100 3 1 0 2 0 0 0 0 - 8080 - 0 0 - - 0
4 be 2 s2 127.0.0.1 0 5 10 10 3 1 0 0 8 0 0 0 - 19002 - 0 0 - - 0
4 be 3 s3 127.0.0.1 2 4 10 10 3 1 0 0 8 0 0 0 - 19003 - 0 0 - - 0
"""


def test_servers_state_is_parsed_and_compared_with_the_operations():
    seen = parse_servers_state(SERVERS_STATE)
    assert seen[("be", "s1")].state == "drain"
    assert seen[("be", "s2")].state == "maint"
    assert seen[("be", "s3")].state == "ready"  # configured-disabled flag alone is not maint
    want = expected_servers((SetServer("be", "s1", "10.0.0.2", 8080, 50, "drain"),))
    assert server_problems(want, seen) == []
    wrong = expected_servers((SetServer("be", "s1", "10.0.0.3", 8080, 50, "ready"),))
    problems = server_problems(wrong, seen)
    assert any("address" in p for p in problems) and any("state" in p for p in problems)
    assert server_problems(expected_servers((SetServer("be", "s9", None, None, 1, None),)), seen)


def test_maps_show_proc_and_reload_answers_are_parsed():
    expected = {"a.example": "be_a", "b": "be b"}
    assert parse_show_map("0x55 a.example be_a\n0x56 b be b\n") == expected
    assert parse_map_file(b"# c\n\na.example be_a\nb  be b\n") == expected
    assert map_problems({"m": {"a": "1"}}, {"m": {"a": "1"}}) == []
    assert map_problems({"m": {"a": "1"}}, {"m": {"a": "2", "z": "3"}})
    proc = parse_show_proc(
        "#<PID> <type> <reloads> <uptime> <version>\n10 master 1 [failed: 0] 0d 2.8\n"
        "# workers\n12 worker 0 0d 2.8\n# old workers\n11 worker 1 0d 2.8\n# programs\n"
    )
    assert (proc.master_pid, proc.workers, proc.old_workers) == (10, (12,), (11,))
    ok, text = parse_reload_response("Success=0\n--\n[ALERT] (1) : config : nbproc bad\n")
    assert not ok and "nbproc" in text
    assert parse_reload_response("Success=1\n--\n[NOTICE] ok\n")[0]


MAP_OPS = st.lists(
    st.tuples(
        st.sampled_from(["map_set", "map_del"]),
        st.sampled_from("abcde"),
        st.text("xyz", min_size=1, max_size=3),
    ),
    max_size=25,
)


@given(st.dictionaries(st.sampled_from("abcde"), st.text("xyz", min_size=1, max_size=3)), MAP_OPS)
@settings(deadline=None)
def test_map_commands_replayed_like_haproxy_give_the_operations_result(start, raw_ops):
    """`set map` only updates an existing key and `add map` only adds one, as in HAProxy:
    replaying the generated commands on the runtime map yields the intended entries."""
    ops = tuple(
        MapOp(op, "maps/m.map", key, value if op == "map_set" else None)
        for op, key, value in raw_ops
    )
    commands = runtime_commands(ops, {"maps/m.map": dict(start)})
    runtime = dict(start)
    for command in commands:
        verb, _, _, key, *value = command.split(" ")
        if verb == "set":
            assert key in runtime
            runtime[key] = value[0]
        elif verb == "add":
            assert key not in runtime
            runtime[key] = value[0]
        else:
            assert verb == "del" and key in runtime
            del runtime[key]
    intended = dict(start)
    for op in ops:
        if op.op == "map_set":
            intended[op.key] = op.value
        else:
            intended.pop(op.key, None)
    assert runtime == intended

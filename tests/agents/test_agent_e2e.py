"""The agent through its real HTTP API, with the real haproxy binary and real backends."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from agents.client import (
    AgentClient,
    AgentConflict,
    AgentError,
    AgentRejected,
    AgentUnauthorized,
)
from agents.filetree import hash_tree
from agents.manifest import build_manifest
from devstack.stack import wait_for
from localcluster.ports import free_port
from tests.agents.helpers import (
    TOKEN,
    AgentProcess,
    Backend,
    Site,
    haproxy_processes_for,
    manifest_for,
    structure_digest,
)

pytestmark = pytest.mark.e2e


def set_server(backend: str, target: Backend) -> dict:
    return {
        "op": "set_server",
        "backend": backend,
        "server": "s1",
        "address": target.ip,
        "port": target.port,
        "weight": 100,
        "state": "ready",
    }


def first_apply(agent: AgentProcess, backends: list[Backend]) -> Site:
    alpha, beta, _ = backends
    site = Site(
        agent.frontend_port,
        {"be_a": (alpha.ip, alpha.port), "be_b": (beta.ip, beta.port)},
        {"a.example": "be_a", "b.example": "be_b"},
    )
    result = agent.client.apply(manifest_for(site, "p1"))
    assert result.result == "reload"
    return site


def tree(agent: AgentProcess) -> dict:
    return {p: (f.sha256, f.size) for p, f in hash_tree(agent.data_dir / "config").items()}


def test_bootstrap_reports_nothing_and_readiness_is_503(agent: AgentProcess):
    state = agent.client.state(verify=True)
    assert state.bootstrap is True
    for value in (
        state.applied_plan_id,
        state.running_plan_id,
        state.worker_operation_plan_id,
        state.last_known_good_plan_id,
        state.applied_token,
        state.invariant_violation,
        state.pending_reload,
    ):
        assert value is None
    assert state.files == {}
    assert state.pod_name == "pod-a" and state.pod_uid == "uid-a"
    assert state.haproxy_version.startswith("2.8")
    assert state.worker and state.worker["pid"] > 0
    response = agent.readiness()
    assert response.status_code == 503
    assert response.text == "waiting for controller config"
    assert httpx.get(f"{agent.url}/healthz").status_code == 200
    assert httpx.get(f"{agent.url}/readyz").status_code == 200


def test_first_apply_serves_traffic_and_a_server_move_is_runtime_only(agent, backends):
    _, _, gamma = backends
    boot_worker = agent.client.state().worker
    site = first_apply(agent, backends)
    state = agent.client.state()
    assert state.worker["pid"] != boot_worker["pid"]
    assert (state.applied_plan_id, state.running_plan_id, state.worker_operation_plan_id) == (
        "p1",
        "p1",
        "p1",
    )
    assert state.last_known_good_plan_id == "p1"
    assert state.applied_token == {"holder": "controller-a", "epoch": 1, "sequence": 1}
    assert set(state.files) == {"haproxy.cfg", "maps/hosts.map"}
    assert agent.readiness().status_code == 200
    assert agent.get("a.example").text == "alpha"
    assert agent.get("b.example").text == "beta"

    site.servers["be_a"] = (gamma.ip, gamma.port)
    result = agent.client.apply(
        manifest_for(site, "p2", previous="p1", sequence=2, ops=[set_server("be_a", gamma)])
    )
    assert result.result == "runtime"
    after = agent.client.state(verify=True)
    assert after.worker == state.worker  # no reload: same worker pid and start time
    assert after.reload_count == state.reload_count
    assert after.applied_plan_id == "p2" and after.worker_operation_plan_id == "p2"
    assert after.running_plan_id == "p1"  # the worker's reload plan stays old (ADR-0033)
    assert after.verification["files_ok"] and after.invariant_violation is None
    assert agent.get("a.example").text == "gamma"
    assert after.files["haproxy.cfg"]["sha256"] != state.files["haproxy.cfg"]["sha256"]


def test_map_entries_change_at_runtime_and_are_read_back(agent, backends):
    alpha, beta, _ = backends
    site = Site(
        agent.frontend_port,
        {"be_a": (alpha.ip, alpha.port), "be_b": (beta.ip, beta.port)},
        {"a.example": "be_a"},
        notes={"old": "x"},
    )
    assert agent.client.apply(manifest_for(site, "p1")).result == "reload"
    pid = agent.client.state().worker["pid"]
    site.hosts["c.example"] = "be_b"
    site.hosts["a.example"] = "be_b"
    # Printable values with spaces, `;` and backslashes survive the runtime API escaping.
    site.notes = {"*.wild/x?y=1": "a b;c\\d", "old": "y"}
    ops = [
        {"op": "map_set", "map": "maps/hosts.map", "key": "c.example", "value": "be_b"},
        {"op": "map_set", "map": "maps/hosts.map", "key": "a.example", "value": "be_b"},
        {"op": "map_set", "map": "maps/notes.map", "key": "*.wild/x?y=1", "value": "a b;c\\d"},
        {"op": "map_set", "map": "maps/notes.map", "key": "old", "value": "y"},
    ]
    result = agent.client.apply(manifest_for(site, "p2", previous="p1", sequence=2, ops=ops))
    assert result.result == "runtime", result.why
    assert agent.client.state().worker["pid"] == pid
    assert agent.get("c.example").text == "beta"
    assert agent.get("a.example").text == "beta"
    del site.notes["old"]
    site.hosts.pop("c.example")
    ops = [
        {"op": "map_del", "map": "maps/notes.map", "key": "old"},
        {"op": "map_del", "map": "maps/hosts.map", "key": "c.example"},
    ]
    result = agent.client.apply(manifest_for(site, "p3", previous="p2", sequence=3, ops=ops))
    assert result.result == "runtime", result.why
    assert agent.get("c.example").text == "nohost"


def test_a_change_the_worker_already_matches_is_file_only_and_the_state_says_so(agent, backends):
    """A map file's bytes change (a comment) while its entries stay: the agent writes the
    file, reads the worker's map back, and needs neither a command nor a reload. Its state
    names how the worker came to match each plan: file-only, runtime, then reload."""
    _, _, gamma = backends
    site = first_apply(agent, backends)
    state = agent.client.state()
    assert state.raw["worker_operation_mode"] == "reload"
    files = site.files()
    files["maps/hosts.map"] = ("map", b"# entries sorted by host\n" + site.host_map())
    body = build_manifest(
        plan_id="p2",
        files=files,
        structure_digest=structure_digest(files["haproxy.cfg"][1]),
        token={"holder": "controller-a", "epoch": 1, "sequence": 2},
        expected_previous_plan_id="p1",
    )
    result = agent.client.apply(body)
    assert result.result == "file-only", result.why
    after = agent.client.state(verify=True)
    assert after.worker == state.worker and after.reload_count == state.reload_count
    assert (after.applied_plan_id, after.worker_operation_plan_id) == ("p2", "p2")
    assert after.running_plan_id == "p1"
    assert after.raw["worker_operation_mode"] == "file-only"
    assert after.verification["files_ok"] and after.invariant_violation is None
    assert agent.get("a.example").text == "alpha"

    site.servers["be_a"] = (gamma.ip, gamma.port)
    moved = manifest_for(site, "p3", previous="p2", sequence=3, ops=[set_server("be_a", gamma)])
    assert agent.client.apply(moved).result == "runtime"
    assert agent.client.state().raw["worker_operation_mode"] == "runtime"
    again = manifest_for(site, "p4", previous="p3", sequence=4, mode="reload")
    assert agent.client.apply(again).result == "reload"
    assert agent.client.state().raw["worker_operation_mode"] == "reload"


def test_runtime_change_without_its_operations_falls_back_to_a_reload(agent, backends):
    """The read-back catches a map file change the operations did not carry."""
    site = first_apply(agent, backends)
    pid = agent.client.state().worker["pid"]
    site.hosts["d.example"] = "be_a"
    result = agent.client.apply(manifest_for(site, "p2", previous="p1", sequence=2))
    assert result.result == "reload"
    assert "runtime verification failed" in result.why
    assert agent.client.state().worker["pid"] != pid
    assert agent.get("d.example").text == "alpha"


def test_nbproc_is_refused_with_haproxys_text_and_the_previous_config_keeps_serving(
    agent, backends
):
    site = first_apply(agent, backends)
    before_state = agent.client.state()
    before_tree = tree(agent)
    site.extra_global = "    nbproc 2"
    with pytest.raises(AgentRejected) as err:
        agent.client.apply(manifest_for(site, "p-bad", previous="p1", sequence=2))
    assert err.value.status == 422
    assert err.value.reason == "config_refused"
    assert "nbproc" in err.value.error_text and "not supported" in err.value.error_text
    after = agent.client.state(verify=True)
    assert after.applied_plan_id == "p1" and after.running_plan_id == "p1"
    assert after.worker == before_state.worker
    assert after.last_apply["result"] == "config_refused"
    assert after.invariant_violation is None
    assert tree(agent) == before_tree
    assert agent.get("a.example").text == "alpha"


def test_a_reload_haproxy_refuses_after_the_check_restores_the_journal(agent, backends):
    """`haproxy -c` accepts a bind on a port already taken; the reload itself fails, the
    journal is restored and the old worker keeps serving."""
    site = first_apply(agent, backends)
    before_tree = tree(agent)
    blocker = Backend("blocker", agent.ip)  # holds a port on the pod address
    try:
        files = site.files()
        cfg = files["haproxy.cfg"][1]
        cfg += f'frontend taken\n    bind "${{POD_IP}}:{blocker.port}"\n'.encode()
        manifest = build_manifest(
            plan_id="p2",
            files={"haproxy.cfg": ("config", cfg), "maps/hosts.map": files["maps/hosts.map"]},
            structure_digest=structure_digest(cfg),
            token={"holder": "controller-a", "epoch": 1, "sequence": 2},
            expected_previous_plan_id="p1",
        )
        with pytest.raises(AgentRejected) as err:
            agent.client.apply(manifest)
        assert err.value.reason == "config_refused"
        assert "bind" in err.value.error_text or "taken" in err.value.error_text
        assert tree(agent) == before_tree
        state = agent.client.state(verify=True)
        assert state.applied_plan_id == "p1" and state.invariant_violation is None
        assert agent.get("a.example").text == "alpha"
    finally:
        blocker.close()


def test_fencing_refuses_stale_epoch_and_wrong_previous_plan_writing_nothing(agent, backends):
    site = first_apply(agent, backends)
    agent.client.apply(manifest_for(site, "p2", previous="p1", epoch=5, sequence=1))
    before_tree = tree(agent)
    before_bytes = (agent.data_dir / "config" / "haproxy.cfg").read_bytes()
    site.hosts["x.example"] = "be_a"
    with pytest.raises(AgentConflict) as err:
        agent.client.apply(manifest_for(site, "p3", previous="p2", epoch=4, sequence=9))
    assert err.value.status == 409 and err.value.reason == "stale_epoch"
    with pytest.raises(AgentConflict) as err:
        agent.client.apply(manifest_for(site, "p3", previous="p1", epoch=5, sequence=2))
    assert err.value.reason == "unexpected_previous_plan"
    with pytest.raises(AgentConflict) as err:
        agent.client.apply(manifest_for(site, "p3", previous=None, epoch=6, sequence=0))
    assert err.value.reason == "unexpected_previous_plan"
    assert tree(agent) == before_tree
    assert (agent.data_dir / "config" / "haproxy.cfg").read_bytes() == before_bytes
    state = agent.client.state()
    assert state.applied_plan_id == "p2" and state.applied_token["epoch"] == 5


def expecting_bootstrap(site: Site, plan_id: str, epoch: int) -> dict:
    """A recovery apply: it carries the bootstrap expectation itself (ADR-0033)."""
    manifest = manifest_for(site, plan_id, epoch=epoch)
    manifest["expect_bootstrap"] = True
    return manifest


def test_a_bootstrap_expectation_is_refused_by_a_pod_that_is_not_bootstrap(tmp_path, backends):
    data = tmp_path / "data"
    agent = AgentProcess(data, extra_args=["--min-reload-interval", "0"]).start()
    try:
        site = first_apply(agent, backends)
        before, before_tree = agent.client.state(), tree(agent)
        with pytest.raises(AgentConflict) as err:
            agent.client.apply(expecting_bootstrap(site, "p-recovered", epoch=2))
        assert err.value.status == 409 and err.value.reason == "not_bootstrap"
        after = agent.client.state()
        assert (after.applied_plan_id, after.apply_count, after.worker) == (
            "p1",
            before.apply_count,
            before.worker,
        )
        assert tree(agent) == before_tree
    finally:
        assert agent.stop() == 0
    # Files changed while the agent was down: it drops the applied plan at start, so the
    # pod has no applied plan, yet it is not bootstrap (a violation, a last-known-good).
    hosts = data / "config" / "maps" / "hosts.map"
    hosts.write_bytes(hosts.read_bytes() + b"evil.example be_a\n")
    agent = AgentProcess(data, extra_args=["--min-reload-interval", "0"]).start()
    try:
        dropped = agent.client.state()
        assert dropped.applied_plan_id is None and not dropped.bootstrap
        with pytest.raises(AgentConflict) as err:
            agent.client.apply(expecting_bootstrap(site, "p-recovered", epoch=2))
        assert err.value.reason == "not_bootstrap"
        assert agent.client.state().apply_count == dropped.apply_count
    finally:
        assert agent.stop() == 0


def test_a_bootstrap_pod_takes_an_apply_that_expects_bootstrap(agent, backends):
    alpha = backends[0]
    site = Site(agent.frontend_port, {"be_a": (alpha.ip, alpha.port)}, {"a.example": "be_a"})
    assert agent.client.state().bootstrap
    manifest = expecting_bootstrap(site, "p-recovered", epoch=2)
    assert agent.client.apply(manifest).result == "reload"
    assert agent.get("a.example").text == "alpha"
    # Its retry is answered as the apply that already succeeded, not refused.
    assert agent.client.apply(manifest).result == "noop"


def test_verify_detects_a_file_changed_behind_the_agents_back(agent, backends):
    first_apply(agent, backends)
    assert agent.client.state(verify=True).invariant_violation is None
    path = agent.data_dir / "config" / "maps" / "hosts.map"
    path.write_bytes(path.read_bytes() + b"evil.example be_a\n")
    state = agent.client.state(verify=True)
    assert state.verification["files_ok"] is False
    assert "maps/hosts.map" in state.invariant_violation
    assert state.bootstrap is False


def test_auth_traversal_symlink_and_body_limits(agent, backends):
    with httpx.Client(base_url=agent.url) as http:
        assert http.get("/v1/state").status_code == 401
        assert http.get("/v1/state", headers={"Authorization": "Bearer nope"}).status_code == 401
        assert http.post("/v1/apply", json={}).status_code == 401
        auth = {"Authorization": f"Bearer {TOKEN}"}
        big = http.post("/v1/apply", content=b"x" * (2 * 1024 * 1024), headers=auth)
        assert big.status_code == 413
        assert http.post("/v1/apply", content=b"{nope", headers=auth).status_code == 400
    with pytest.raises(AgentUnauthorized):
        AgentClient(agent.url, "wrong").state()

    site = Site(agent.frontend_port, {"be_a": (backends[0].ip, backends[0].port)})
    for bad in ("../escape.map", "maps/../../etc/passwd", "/etc/passwd"):
        manifest = manifest_for(site, "p1")
        manifest["files"][1]["path"] = bad
        with pytest.raises(AgentRejected) as err:
            agent.client.apply(manifest)
        assert err.value.status == 400 and err.value.reason == "bad_path"
    outside = agent.data_dir.parent / "outside"
    outside.mkdir()
    os.symlink(outside, agent.data_dir / "config" / "maps")
    with pytest.raises(AgentRejected) as err:
        agent.client.apply(manifest_for(site, "p1"))
    assert err.value.reason == "symlink_refused"
    assert list(outside.iterdir()) == []
    assert agent.client.state().bootstrap is True


def test_sigkill_of_the_worker_is_detected_reported_and_repaired_by_a_reload(agent, backends):
    site = first_apply(agent, backends)
    pid = agent.client.state().worker["pid"]
    os.kill(pid, signal.SIGKILL)
    state = wait_for(
        lambda: (s := agent.client.state()).invariant_violation and s, 10, what="violation"
    )
    assert str(pid) in state.invariant_violation
    assert state.worker is None and state.running_plan_id is None
    assert state.bootstrap is False
    assert httpx.get(f"{agent.url}/readyz").status_code == 503
    result = agent.client.apply(manifest_for(site, "p2", previous="p1", sequence=2))
    assert result.result == "reload"
    state = agent.client.state(verify=True)
    assert state.invariant_violation is None and state.running_plan_id == "p2"
    assert state.worker["pid"] != pid
    assert agent.get("a.example").text == "alpha"


def test_revert_lkg_restores_the_last_known_good_set(agent, backends):
    site = first_apply(agent, backends)
    lkg_tree = tree(agent)
    # Files changed behind the agent's back; revert puts last-known-good back and reloads.
    (agent.data_dir / "config" / "maps" / "hosts.map").write_bytes(b"a.example be_b\n")
    state = agent.client.state(verify=True)
    assert state.invariant_violation
    manifest = manifest_for(site, "p1", previous="p1", sequence=2, mode="revert_lkg")
    manifest["files"] = []
    result = agent.client.apply(manifest)
    assert result.result == "reload"
    assert tree(agent) == lkg_tree
    state = agent.client.state(verify=True)
    assert state.invariant_violation is None and state.running_plan_id == "p1"
    assert agent.get("a.example").text == "alpha"
    wrong = dict(manifest, plan_id="p9", token={"holder": "c", "epoch": 1, "sequence": 3})
    with pytest.raises(AgentConflict) as err:
        agent.client.apply(wrong)
    assert err.value.reason == "lkg_mismatch"


def test_reloads_inside_the_minimum_interval_are_scheduled_and_confirmed(tmp_path, backends):
    agent = AgentProcess(tmp_path / "data", extra_args=["--min-reload-interval", "3"]).start()
    try:
        site = first_apply(agent, backends)
        site.hosts["late.example"] = "be_b"
        result = agent.client.apply(
            manifest_for(site, "p2", previous="p1", sequence=2, mode="reload")
        )
        assert result.result == "reload_scheduled"
        state = result.state
        assert state.pending_reload["plan_id"] == "p2"
        assert state.applied_plan_id == "p2" and state.running_plan_id == "p1"
        state = wait_for(
            lambda: (s := agent.client.state()).pending_reload is None and s, 10, what="follow-up"
        )
        assert state.running_plan_id == "p2" and state.worker_operation_plan_id == "p2"
        assert state.last_apply["reload_confirmed"] is True
        assert agent.get("late.example").text == "beta"
    finally:
        agent.stop()


def test_restart_keeps_the_applied_state_and_an_interrupted_apply_is_reported(tmp_path, backends):
    data = tmp_path / "data"
    agent = AgentProcess(data, extra_args=["--min-reload-interval", "0"]).start()
    site = first_apply(agent, backends)
    first_runtime = agent.client.state().runtime_id
    assert agent.stop() == 0

    agent = AgentProcess(data).start()
    try:
        state = agent.client.state(verify=True)
        assert state.runtime_id != first_runtime
        assert state.applied_plan_id == "p1" and state.running_plan_id == "p1"
        assert state.invariant_violation is None and state.applied_token["sequence"] == 1
        assert agent.readiness().status_code == 200
        # The frontend port is in the applied config, so traffic uses the old port.
        assert (
            httpx.get(
                f"http://{agent.ip}:{site.frontend_port}/", headers={"Host": "a.example"}
            ).text
            == "alpha"
        )
    finally:
        assert agent.stop() == 0

    # Simulate a crash in the middle of an apply: journal written, one file replaced.
    journal = data / "journal"
    os.link(data / "config" / "maps" / "hosts.map", journal / "saved-0")
    record = {
        "plan_id": "p2",
        "previous_plan_id": "p1",
        "entries": {"maps/hosts.map": "saved-0"},
        "complete": True,
    }
    (journal / "journal.json").write_text(json.dumps(record))
    tmp = data / "config" / "maps" / ".new"
    tmp.write_bytes(b"half.example be_a\n")
    os.replace(tmp, data / "config" / "maps" / "hosts.map")

    agent = AgentProcess(data).start()
    try:
        state = agent.client.state(verify=True)
        assert "interrupted" in state.invariant_violation and "p2" in state.invariant_violation
        assert state.applied_plan_id == "p1"  # restored and verified, never the half plan
        assert state.verification["files_ok"] is True
        assert not (journal / "journal.json").exists()
    finally:
        agent.stop()


def test_sigterm_drains_readiness_then_stops_haproxy(tmp_path, backends):
    agent = AgentProcess(tmp_path / "data", extra_args=["--drain-seconds", "3"]).start()
    first_apply(agent, backends)
    assert agent.readiness().status_code == 200
    assert agent.proc is not None
    started = time.monotonic()
    agent.proc.send_signal(signal.SIGTERM)
    response = wait_for(
        lambda: (r := agent.readiness()).status_code == 503 and r, 5, what="draining readiness"
    )
    assert response.text == "draining"
    assert httpx.get(f"{agent.url}/readyz").status_code == 503
    assert agent.stop() == 0  # waits for exit and checks that no haproxy survived
    assert time.monotonic() - started < 15


def _master_pid(agent: AgentProcess) -> int:
    assert agent.proc is not None
    for pid in haproxy_processes_for(str(agent.data_dir)):
        stat = Path(f"/proc/{pid}/stat").read_text()
        if int(stat[stat.rindex(")") + 2 :].split()[1]) == agent.proc.pid:
            return pid
    raise AssertionError("no haproxy master under the agent")


def test_a_worker_replaced_outside_the_agent_is_reported(agent, backends):
    first_apply(agent, backends)
    pid = agent.client.state().worker["pid"]
    os.kill(_master_pid(agent), signal.SIGUSR2)  # someone else reloads haproxy
    state = wait_for(
        lambda: (s := agent.client.state(verify=True)).invariant_violation and s,
        10,
        what="violation",
    )
    assert "outside an agent reload" in state.invariant_violation
    assert str(pid) in state.invariant_violation
    assert state.running_plan_id is None and state.worker is None


def test_sigkill_of_the_agent_leaves_no_haproxy_behind(tmp_path, backends):
    agent = AgentProcess(tmp_path / "data").start()
    first_apply(agent, backends)
    assert haproxy_processes_for(str(agent.data_dir))
    agent.stop(signal.SIGKILL)  # asserts that every haproxy of this agent exits


def test_tls_serves_the_api_over_https(tmp_path):
    cert, key = _self_signed(tmp_path)
    agent = AgentProcess(
        tmp_path / "data", extra_args=["--tls-cert", str(cert), "--tls-key", str(key)]
    )
    agent.url = f"https://{agent.ip}:{agent.port}"
    agent.client = AgentClient(agent.url, TOKEN, verify=False)
    agent.start()
    try:
        assert agent.client.state().bootstrap is True
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"http://{agent.ip}:{agent.port}/healthz", timeout=2)
    finally:
        agent.stop()


def test_a_rotated_token_file_takes_effect_without_a_restart(agent):
    assert agent.client.state().bootstrap
    agent.token_file.write_text("rotated-token-value\n")
    with pytest.raises(AgentUnauthorized):
        agent.client.state()
    with AgentClient(agent.url, "rotated-token-value") as rotated:
        assert rotated.state().bootstrap


def test_a_thousand_backends_move_in_one_runtime_apply(agent, backends):
    """All 1,000 server moves go over one runtime-API connection and are read back."""
    alpha, beta, _ = backends
    servers = {f"be_{i:04d}": (alpha.ip, alpha.port) for i in range(1000)}
    hosts = {f"h{i:04d}.example": f"be_{i:04d}" for i in range(1000)}
    site = Site(agent.frontend_port, servers, hosts)
    assert agent.client.apply(manifest_for(site, "big-1")).result == "reload"
    pid = agent.client.state().worker["pid"]
    ops = []
    for backend in servers:
        site.servers[backend] = (beta.ip, beta.port)
        ops.append(set_server(backend, beta))
    result = agent.client.apply(manifest_for(site, "big-2", previous="big-1", sequence=2, ops=ops))
    assert result.result == "runtime", result.why
    assert agent.client.state().worker["pid"] == pid
    for host in ("h0000.example", "h0500.example", "h0999.example"):
        assert agent.get(host).text == "beta"


def _self_signed(tmp_path: Path) -> tuple[Path, Path]:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-subj", "/CN=agent", "-keyout", str(key), "-out", str(cert)),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def test_a_certificate_file_is_written_private_and_served_by_an_https_frontend(
    agent, backends, tmp_path
):
    cert, key = _self_signed(tmp_path)
    alpha = backends[0]
    site = Site(agent.frontend_port, {"be_a": (alpha.ip, alpha.port)}, {"a.example": "be_a"})
    tls_port = free_port(agent.ip)
    cfg = (
        site.config()
        + (
            f'frontend https\n    bind "${{POD_IP}}:{tls_port}" ssl crt certs/site.pem\n'
            "    default_backend be_a\n"
        ).encode()
    )
    manifest = build_manifest(
        plan_id="tls-1",
        files={
            "haproxy.cfg": ("config", cfg),
            "maps/hosts.map": ("map", site.host_map()),
            "certs/site.pem": ("certificate", cert.read_bytes() + key.read_bytes()),
        },
        structure_digest=structure_digest(cfg),
        token={"holder": "controller-a", "epoch": 1, "sequence": 1},
        expected_previous_plan_id=None,
    )
    assert agent.client.apply(manifest).result == "reload"
    pem = agent.data_dir / "config" / "certs" / "site.pem"
    assert pem.stat().st_mode & 0o777 == 0o600
    response = httpx.get(f"https://{agent.ip}:{tls_port}/", verify=False, timeout=5)
    assert response.text == "alpha"


def test_an_agent_killed_mid_apply_reports_the_interruption_not_the_half_plan(tmp_path, backends):
    data = tmp_path / "data"
    agent = AgentProcess(
        data,
        extra_args=["--min-reload-interval", "0"],
        entry=["tests.agents.crashing_agent", "p2"],
    ).start()
    site = first_apply(agent, backends)
    site.hosts["new.example"] = "be_b"
    with pytest.raises(AgentError):  # the agent dies after renaming p2's files into place
        agent.client.apply(manifest_for(site, "p2", previous="p1", sequence=2, mode="reload"))
    assert agent.proc is not None and agent.proc.wait(10) == 70
    agent.stop()  # no haproxy survived the agent

    agent = AgentProcess(data).start()
    try:
        state = agent.client.state(verify=True)
        assert "p2" in state.invariant_violation and "interrupted" in state.invariant_violation
        assert state.applied_plan_id == "p1" and state.running_plan_id == "p1"
        assert state.verification["files_ok"] is True
        assert b"new.example" not in (data / "config" / "maps" / "hosts.map").read_bytes()
        frontend = f"http://{agent.ip}:{site.frontend_port}/"
        assert httpx.get(frontend, headers={"Host": "a.example"}).text == "alpha"
        # The controller repairs it with a full apply; the violation clears.
        result = agent.client.apply(manifest_for(site, "p2", previous="p1", sequence=3))
        assert result.result == "reload"
        assert agent.client.state(verify=True).invariant_violation is None
    finally:
        agent.stop()

"""python -m soak [--minutes N] [--seed S | --seeds S1,S2,...] [--report PATH]

Runs the whole system (local cluster, 3 HAProxy pods, 2 controller replicas, two backends
behind two hosts, the Django mirror) with its own Redis and PostgreSQL, sends HTTP through
every HAProxy pod while injecting random faults one at a time, checks the invariants and
writes a JSON and a markdown report. Exits 1 on any violation, 2 when the run broke down.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import shutil
import signal
import statistics
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from bench.harness import RESULTS_DIR, machine
from config.env import child_environ, export
from controller.election.timing import DEFAULT_LEASE_NAME
from devstack import stack
from soak import invariants as inv
from soak.faults import FaultLog, Faults
from soak.load import LoadGenerator, Sampler
from soak.services import Postgres, Redis

HOSTS = {"x.example": "alpha-", "y.example": "beta-"}  # host -> body prefix of its backend
REPLICAS = 3
FAILURE_GRACE = 3.0  # ADR-0034: fast failures within one 3 s single-change budget
LEADER_GRACE = 8.0  # short timings: lease 4 s + retry 0.5 s, plus the sampler's period
AUDIT_LOG = "audit.jsonl"
STEADY_SECONDS = 3.0  # converged = healthy for this long (several sampler rounds)
START_TIMEOUT = 120.0  # an API server took 50 s to start on the loaded, shared machine


def log(message: str) -> None:
    print(f"[soak {time.strftime('%H:%M:%S')}] {message}", flush=True)


# -- the mirror ------------------------------------------------------------------------------


def mirror_env(database_url: str) -> dict[str, str]:
    return {"DATABASE_URL": database_url, "DJANGO_SETTINGS_MODULE": "haptic_site.settings"}


def migrate(database_url: str, log_dir: Path) -> None:
    import subprocess

    done = subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput"],
        cwd=stack.REPO_ROOT,
        env=child_environ(mirror_env(database_url)),
        capture_output=True,
        timeout=300,
        check=False,
    )
    (log_dir / "migrate.log").write_bytes(done.stdout + done.stderr)
    if done.returncode != 0:
        raise RuntimeError(f"migrate failed; see {log_dir / 'migrate.log'}")


def start_mirror(kubeconfig: Path, database_url: str, log_dir: Path) -> stack.Process:
    argv = [sys.executable, "manage.py", "run_mirror", "--kubeconfig", str(kubeconfig)]
    argv += ["--namespace", stack.NAMESPACE]
    return stack.Process("mirror", argv, mirror_env(database_url), log_dir / "mirror.log").start()


def wait_mirror_listed(mirror: stack.Process, timeout: float = 120.0) -> None:
    """Until the mirror has listed the HAProxyCfgs and the Events (its log says so)."""

    def listed() -> bool:
        text = Path(mirror.log_path).read_text(errors="replace")
        return all(f"{stack.NAMESPACE}/{kind} listed" in text for kind in ("haproxycfgs", "events"))

    stack.wait_for(listed, timeout, interval=0.5, what="the mirror's first list")


def mirrored(database_url: str) -> dict[str, set[str]]:
    import psycopg

    with psycopg.connect(database_url, connect_timeout=5) as conn:
        checkpoints = {r[0] for r in conn.execute("SELECT uid FROM checkpoints_checkpoint")}
        events = {r[0] for r in conn.execute("SELECT uid FROM checkpoints_kubeevent")}
        receipts = {
            f"{r[0]} {r[1]}"
            for r in conn.execute("SELECT pod_name, checksum FROM checkpoints_podreceipt")
        }
    return {"checkpoints": checkpoints, "receipts": receipts, "events": events}


def check_mirror(sampler: Sampler, database_url: str, wait: float = 30.0) -> inv.Result:
    """Compare what the sampler saw with the mirror's tables, giving the mirror up to
    `wait` seconds to catch up with the last objects."""
    sampler.sample_objects()
    observed = sampler.observed()
    deadline = time.monotonic() + wait
    while True:
        try:
            have = mirrored(database_url)
        except Exception as exc:
            have, error = {}, str(exc)
        else:
            error = ""
        result = inv.check_mirror(observed, have)
        if error:
            result.violations.append(f"cannot read the mirror database: {error}")
        if result.ok or time.monotonic() > deadline:
            return result
        time.sleep(2)


# -- the API server's audit log --------------------------------------------------------------


def audited_api() -> Any:
    """The local API server, logging every mutating request with its User-Agent (each
    replica's names it: controller.election.identity). Its state directory is as short as
    start_system's own: pods keep their haproxy sockets under it, and a socket path may
    not exceed 97 bytes (a longer one had every haproxy refuse its configuration)."""
    from localcluster.testing import ApiServer

    state_dir = Path(tempfile.mkdtemp(prefix="haptic-e2e-"))  # removed by System.stop()
    audit = ["--audit-log", str(state_dir / AUDIT_LOG)]
    return ApiServer.start(state_dir, extra_args=audit, timeout=START_TIMEOUT)


def keep_samples(samples: list[inv.Sample], path: Path) -> None:
    """Every sample, one JSON line each, to read a violation in its context."""
    with path.open("w") as out:
        for sample in samples:
            out.write(json.dumps(dataclasses.asdict(sample), default=str) + "\n")


def keep_pod_logs(system: Any) -> None:
    """Copy the pods' container logs beside the controllers' (the cluster's state goes)."""
    for log_file in Path(system.api.state_dir).glob("**/pods/*/*/*.log"):
        target = system.log_dir / "pods" / log_file.parent.name / log_file.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(log_file, target)


def audit_path(api: Any) -> Path:
    return Path(api.state_dir) / AUDIT_LOG


# -- controller logs -----------------------------------------------------------------------


def lease_log_entries(log_dir: Path) -> list[tuple[float, str, str, str]]:
    entries = []
    for path in sorted(log_dir.glob("controller-*.log")):
        lines = path.read_text(errors="replace").splitlines()
        for t, kind, line in inv.parse_lease_log(lines):
            entries.append((t, path.stem, kind, line))
    return entries


# -- the run -------------------------------------------------------------------------------


def start_services(redis: Redis, postgres: Postgres, skipped: dict[str, str]) -> Postgres | None:
    """The soak's own Redis and, when it can start, PostgreSQL (None otherwise, said in
    `skipped`), exported so the controllers it starts use them."""
    redis.start()
    log(f"own redis at {redis.url}")
    started: Postgres | None = postgres
    try:
        postgres.start()
        log(f"own postgresql at {postgres.url}")
    except Exception as exc:
        skipped["postgres_restart"] = f"no private PostgreSQL: {exc}"
        started = None
    # Controllers inherit the environment: they must use the soak's own services.
    export("REDIS_URL", redis.url)
    if started:
        export("DATABASE_URL", started.url)
    return started


def workload() -> list[list[dict[str, Any]]]:
    """The backends and Ingresses the load runs against (HOSTS)."""
    return [
        stack.backend("alpha", replicas=1),
        stack.backend("beta", replicas=1),
        [stack.ingress("alpha", "x.example", "alpha")],
        [stack.ingress("beta", "y.example", "beta")],
    ]


@dataclasses.dataclass
class SoakProcesses:
    """What one soak run started, filled in as each part starts, so that whatever happens
    (an exception, Ctrl-C or SIGTERM) `stop_all` stops exactly what did start."""

    redis: Redis
    postgres: Postgres | None
    system: Any = None
    mirror: stack.Process | None = None
    sampler: Sampler | None = None
    load: LoadGenerator | None = None
    faults: Faults | None = None
    judged_from: int = 0


def drive(
    p: SoakProcesses,
    seed: int,
    rng: random.Random,
    minutes: float,
    windows: list[inv.Window],
    skipped: dict[str, str],
    started: float,
) -> None:
    """Bring the stack up, wait for a steady converged fleet, then load and faults."""
    from tests.e2e.harness import start_system

    p.postgres = start_services(p.redis, p.postgres, skipped)
    p.system = system = start_system(
        f"soak-seed{seed}", haproxy_replicas=REPLICAS, controllers=2, api=audited_api()
    )
    log(f"stack up; logs in {system.log_dir}")
    if p.postgres:
        migrate(p.postgres.url, system.log_dir)
        p.mirror = start_mirror(system.api.kubeconfig, p.postgres.url, system.log_dir)
        # Sample only what the mirror can see: a receipt the sampler read before the
        # mirror's first list may already be replaced (it cost 3 "lost" receipts).
        wait_mirror_listed(p.mirror)
    else:
        skipped["mirror"] = "no private database for the mirror"
    for objects in workload():
        system.apply(objects)
    p.sampler = sampler = Sampler(str(system.api.kubeconfig), system.token)
    sampler.start()
    p.faults = faults = Faults(system, sampler, rng, HOSTS, REPLICAS, p.redis, p.postgres)
    try:
        stack.wait_for(faults.healthy, 240, interval=1, what="initial convergence")
    except TimeoutError as exc:
        raise TimeoutError(f"{exc} ({faults.unhealthy})") from None
    # Judge from the converged fleet on: the first deployments come in a burst
    # (backends turning Ready) faster than the sampler reads the intent, and the
    # fleet can look converged for one sample in the middle of it (seed 1: healthy
    # on one plan, then two more plans within a second), so it must stay so.
    p.judged_from = wait_steady(faults, sampler, STEADY_SECONDS)
    log(f"converged in {time.time() - started:.1f}s; load on, faults for {minutes} min")
    p.load = LoadGenerator(sampler, HOSTS)
    p.load.start()
    time.sleep(5)  # steady state first
    run_faults(faults, rng, minutes, windows)


def stop_traffic(p: SoakProcesses) -> None:
    if p.load is not None:
        p.load.stop()
    if p.sampler is not None:
        p.sampler.stop()
        p.sampler.join(timeout=10)


def stop_all(
    p: SoakProcesses, workdir: Path, broke_down: str, hub_rounds: int, results: list[inv.Result]
) -> str:
    """Stop everything the run started; the hub rounds run in between (appending to
    results) when the run did not break down. Returns what broke down in the hub rounds."""
    log("stopping")
    hub_broke = ""
    if p.mirror is not None:
        p.mirror.stop(grace=10)
    if p.system is not None:
        if broke_down:
            keep_pod_logs(p.system)
        p.system.stop()
    # The hub's controllers use the soak's own Redis (os.environ), so before it stops.
    if hub_rounds and not broke_down:
        hub_log: list[FaultLog] = p.faults.log if p.faults is not None else []
        hub_results, hub_broke = run_hub_rounds(hub_rounds, hub_log)
        results += hub_results
    if p.postgres is not None:
        p.postgres.stop()
    p.redis.stop()
    shutil.rmtree(workdir, ignore_errors=True)
    return hub_broke


def run(minutes: float, seed: int, report_path: Path, hub_rounds: int = 1) -> int:
    rng = random.Random(seed)
    workdir = Path(tempfile.mkdtemp(prefix="haptic-soak-"))
    os.chmod(workdir, 0o755)
    p = SoakProcesses(Redis(workdir / "redis"), Postgres(workdir / "postgres"))
    skipped: dict[str, str] = {}
    windows: list[inv.Window] = []
    results: list[inv.Result] = []
    started = ended = time.time()
    machine_info = machine()  # the revision the processes start from, not the one at the end
    load_at_start = os.getloadavg()  # the machine is shared: its load explains the timings
    broke_down = ""
    # Everything started below is stopped in the outer finally, whatever happens (an
    # exception, Ctrl-C or SIGTERM): no process of the soak outlives it.
    try:
        try:
            drive(p, seed, rng, minutes, windows, skipped, started)
        except Exception:
            broke_down = traceback.format_exc()
            log("run broke down:\n" + broke_down)
        except KeyboardInterrupt:  # Ctrl-C or SIGTERM: still check and report what ran
            broke_down = "interrupted (SIGINT/SIGTERM) before the requested duration\n"
            log("interrupted; checking what ran")
        finally:
            ended = time.time()
            stop_traffic(p)
        try:
            results = check_all(
                p.system,
                p.sampler,
                p.load,
                p.mirror,
                p.postgres,
                windows,
                skipped,
                ended,
                p.judged_from,
            )
            if p.faults is not None:
                results.append(inv.check_gauge_after_convergence(p.faults.gauge_readings))
                results.append(inv.check_incremental_agrees(p.faults.mismatch_readings))
                results.append(inv.check_gate_refusals(p.faults.gate_refusals))
        except Exception:
            broke_down += traceback.format_exc()
    finally:
        broke_down += stop_all(p, workdir, broke_down, hub_rounds, results)
    report = build_report(
        minutes,
        seed,
        started,
        ended,
        p.faults,
        windows,
        results,
        p.load,
        p.sampler,
        skipped,
        broke_down,
    )
    report["machine"] = machine_info
    report["load_average"] = {"start": load_at_start, "end": os.getloadavg()}
    return finish(report, report_path, p.system, broke_down)


def finish(report: dict[str, Any], report_path: Path, system: Any, broke_down: str) -> int:
    """Write the report; the exit code: 2 when the run broke down, 1 on a violation."""
    if system is not None:
        report["logs"] = str(system.log_dir)
    report["benchmark"] = report_path.stem  # the summary's row name (soak unless --report)
    write_report(report, report_path)
    log(f"report: {report_path} and {report_path.with_suffix('.md')}")
    if broke_down:
        return 2
    return 1 if report["violations"] else 0


def wait_steady(faults: Faults, sampler: Sampler, seconds: float, timeout: float = 120) -> int:
    """Until the fleet has stayed healthy, and the same (inv.steady_start), for `seconds`;
    the index of the first sample of that steady stretch (judged from there on)."""
    deadline = time.monotonic() + timeout
    since = time.monotonic()
    while True:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the fleet never stayed healthy for {seconds}s")
        time.sleep(0.5)
        if not faults.healthy():
            since = time.monotonic()
            continue
        start = inv.steady_start(sampler.samples, seconds)
        if time.monotonic() - since >= seconds and start is not None:
            return start


def run_hub_rounds(rounds: int, fault_log: list[FaultLog]) -> tuple[list[inv.Result], str]:
    """The hub fault (soak/hub.py), after the main phase: results and a breakdown, if any."""
    from soak import hub

    done: list[inv.PromotionRound] = []
    skipped: list[str] = []
    broke_down = ""
    for i in range(2 * rounds):  # a skipped round (nothing injected) is tried again once
        if len(done) == rounds:
            break
        log(f"hub round {i + 1}: {hub.KIND}")
        try:
            promotion, entry = hub.promotion_round(f"soak-hub-{i + 1}", log)
        except hub.RoundSkipped as exc:
            log(f"  skipped: {exc}")
            skipped.append(str(exc))
            continue
        except Exception:
            broke_down += traceback.format_exc()
            log("hub round broke down:\n" + broke_down)
            break
        done.append(promotion)
        fault_log.append(entry)
    results = inv.check_promoted_recovery(done)
    for result in results:
        result.ran = bool(done)
        result.notes = {"rounds": len(done), **({"skipped": skipped} if skipped else {})}
    return results, broke_down


def run_faults(faults: Faults, rng: random.Random, minutes: float, windows: list) -> None:
    """One fault at a time from a shuffled deck of every kind (so a run covers them all
    before repeating), with a steady-state pause between faults."""
    kinds = faults.kinds()
    deck: list[str] = []
    deadline = time.time() + minutes * 60
    while time.time() < deadline - 15:
        if not deck:
            deck = list(kinds)
            rng.shuffle(deck)
        kind = deck.pop()
        entry = FaultLog(kind, time.time())
        faults.log.append(entry)
        log(f"fault {len(faults.log)}: {kind}")
        try:
            windows += kinds[kind](entry)
        except Exception as exc:  # a fault that could not run is a finding (healthy=False)
            entry.healthy, entry.error = False, f"{type(exc).__name__}: {exc}"
            windows.append(inv.Window(kind, entry.started, time.time(), None, True))
            faults.wait_healthy(entry, entry.started)
        log(
            f"  -> healthy={entry.healthy} after {entry.healed_after_s}s {entry.detail}"
            + (f" ERROR {entry.error}" if entry.error else "")
        )
        time.sleep(rng.uniform(3, 6))  # steady state between faults: no failure allowed


def check_all(
    system: Any,
    sampler: Sampler | None,
    load: LoadGenerator | None,
    mirror: stack.Process | None,
    postgres: Postgres | None,
    windows: list[inv.Window],
    skipped: dict[str, str],
    ended: float,
    judged_from: int = 0,
) -> list[inv.Result]:
    results: list[inv.Result] = []
    if load is not None and sampler is not None:
        samples = sampler.samples[judged_from:]
        if system is not None:
            keep_samples(sampler.samples, system.log_dir / "samples.jsonl")
        results.append(inv.check_request_failures(load.records, windows, FAILURE_GRACE))
        results.append(inv.check_intent_order(samples))
        results.append(inv.check_no_recovery_apply(samples, windows))
        results.append(inv.check_leader_changes(samples, windows, LEADER_GRACE))
        results.append(inv.check_intent_at_rest(samples, windows, FAILURE_GRACE))
    if system is not None:
        # From the steady fleet on, as the samples: at start-up both replicas race to
        # create the Lease, and the loser's 409 is no failed renewal (seed 3).
        since = sampler.samples[judged_from].t if sampler is not None and sampler.samples else 0
        entries = [e for e in lease_log_entries(system.log_dir) if since <= e[0] <= ended]
        results.append(inv.check_lease_renewals(entries, windows, LEADER_GRACE))
        audit = audit_path(system.api)
        shutil.copy(audit, system.log_dir / AUDIT_LOG)  # the temp dir goes at the end
        writes = inv.parse_audit(audit.read_text().splitlines())
        results.append(inv.check_no_write_after_release(writes, DEFAULT_LEASE_NAME))
    if mirror is not None and sampler is not None and postgres is not None:
        results.append(check_mirror(sampler, postgres.url))
    else:
        missing = inv.Result("no mirrored checkpoint, receipt or event lost", ran=False)
        missing.notes = {"why": skipped.get("mirror", "the run broke down first")}
        results.append(missing)
    return results


def build_report(
    minutes: float,
    seed: int,
    started: float,
    ended: float,
    faults: Faults | None,
    windows: list[inv.Window],
    results: list[inv.Result],
    load: LoadGenerator | None,
    sampler: Sampler | None,
    skipped: dict[str, str],
    broke_down: str,
) -> dict[str, Any]:
    fault_log = faults.log if faults else []
    by_kind: dict[str, int] = {}
    for entry in fault_log:
        by_kind[entry.kind] = by_kind.get(entry.kind, 0) + 1
    heal: dict[str, list[float]] = {}
    for entry in fault_log:
        if entry.healed_after_s is not None:
            heal.setdefault(entry.kind, []).append(entry.healed_after_s)
    heal_stats = {
        kind: {"n": len(v), "median_s": round(statistics.median(v), 2), "max_s": max(v)}
        for kind, v in sorted(heal.items())
    }
    unhealed = [f"{e.kind}: {e.error}" for e in fault_log if not e.healthy]
    healed = inv.Result("system healthy again after every fault", checked=len(fault_log))
    healed.violations = unhealed
    checks = [r.as_dict() for r in [*results, healed]]
    return {
        "benchmark": "soak",
        "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "machine": machine(),
        "minutes_requested": minutes,
        "seconds_run": round(ended - started, 1),
        "seed": seed,
        "stack": {
            "haproxy_pods": REPLICAS,
            "controllers": 2,
            "hosts": list(HOSTS),
            "timings": "short (lease 4 s, renew 3 s, retry 0.5 s)",
        },
        "faults_by_kind": by_kind,
        "heal_seconds_by_kind": heal_stats,
        "faults": [
            {
                "kind": e.kind,
                "at_s": round(e.started - started, 1),
                "healed_after_s": e.healed_after_s,
                "healthy": e.healthy,
                **({"error": e.error} if e.error else {}),
                **e.detail,
            }
            for e in fault_log
        ],
        "skipped_faults": skipped,
        "load": load.summary() if load else None,
        "samples": len(sampler.samples) if sampler else 0,
        "sampler_read_errors": sampler.read_errors if sampler else 0,
        "windows": len(windows),
        "checks": checks,
        "violations": sum(c["violation_count"] for c in checks) + (1 if broke_down else 0),
        **({"broke_down": broke_down[-4000:]} if broke_down else {}),
    }


def write_report(report: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    m = report["machine"]
    lines = [
        f"# Soak report ({report['recorded_at']})",
        "",
        f"{report['seconds_run']} s run ({report['minutes_requested']} min requested), "
        f"seed {report['seed']}; machine: {m['cpu']}, {m['cores']} cores, "
        f"{m['memory_gib']} GiB, Python {m['python']}, git {m['git_revision']}.",
        "",
        _load_line(report.get("load_average")),
        "",
        f"**Violations: {report['violations']}**",
        "",
        "| invariant | status | checked | violations |",
        "| --- | --- | --- | --- |",
    ]
    for check in report["checks"]:
        lines.append(
            f"| {check['name']} | {check['status']} | {check['checked']} | "
            f"{check['violation_count']} |"
        )
    load = report.get("load") or {}
    if load:
        lat = load["latency_ms"]
        lines += [
            "",
            f"Load: {load['requests']} requests, {load['ok']} ok, {load['failed']} failed "
            f"(all inside allowed windows unless listed below); latency median "
            f"{lat['median']} ms, p95 {lat['p95']} ms, p99 {lat['p99']} ms.",
        ]
    lines += [
        "",
        "Seconds from each fault until every pod was Ready on the intended plan and serving:",
        "",
        "| fault | count | median s | max s |",
        "| --- | --- | --- | --- |",
    ]
    heal = report["heal_seconds_by_kind"]
    for kind, count in sorted(report["faults_by_kind"].items()):
        h = heal.get(kind, {})
        lines.append(f"| {kind} | {count} | {h.get('median_s', '-')} | {h.get('max_s', '-')} |")
    for kind, why in report["skipped_faults"].items():
        lines.append(f"| {kind} | skipped: {why} | | |")
    details = [c for c in report["checks"] if c["violations"] or c.get("notes")]
    if details:
        lines += ["", "## Details", ""]
        for check in details:
            lines.append(f"- {check['name']}: {json.dumps(check.get('notes', {}))}")
            lines += [f"  - {v}" for v in check["violations"][:20]]
    if report.get("broke_down"):
        lines += ["", "## The run broke down", "", "```", report["broke_down"], "```"]
    path.with_suffix(".md").write_text("\n".join(lines) + "\n")


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def seed_report_path(report: Path, seed: int, several: bool) -> Path:
    """One seed writes `report`; several write one report per seed beside it."""
    return report.with_name(f"{report.stem}-seed{seed}{report.suffix}") if several else report


def _load_line(load: dict | None) -> str:
    if not load:
        return "Load average: not recorded."
    start, end = (" / ".join(f"{x:.1f}" for x in load[k]) for k in ("start", "end"))
    return f"Load average (1 / 5 / 15 min) on the shared 2 cores: {start} at start, {end} at end."


def write_combined(paths: list[Path], path: Path) -> None:
    """`--report`'s JSON for several seeds: violations and load per seed (the checks are in
    each seed's own report, which the bench summary reads)."""
    reports = [json.loads(p.read_text()) for p in paths if p.exists()]
    combined = {
        "benchmark": "soak-seeds",
        "violations": sum(r["violations"] for r in reports),
        "seeds": [
            {
                "seed": r["seed"],
                "report": p.name,
                "violations": r["violations"],
                "seconds_run": r.get("seconds_run"),
                "faults": len(r.get("faults") or []),
                "load_average": r.get("load_average"),
            }
            for r, p in zip(reports, [p for p in paths if p.exists()], strict=True)
        ],
    }
    path.write_text(json.dumps(combined, indent=2, sort_keys=True) + "\n")


def write_summary(paths: list[Path], path: Path) -> None:
    """The runs of several seeds side by side: violations per check and seed."""
    runs = [(json.loads(p.read_text()), p) for p in paths if p.exists()]
    reports = [r for r, _ in runs]
    seeds = [str(r["seed"]) for r in reports]
    names = list(dict.fromkeys(c["name"] for r in reports for c in r["checks"]))
    lines = [
        f"# Soak summary ({len(reports)} seeds)",
        "",
        "Violations per check and seed; each seed's own report is linked below.",
        "",
        "| check | " + " | ".join(f"seed {s}" for s in seeds) + " |",
        "| --- |" + " --- |" * len(seeds),
    ]
    for name in names:
        cells = []
        for r in reports:
            check = next((c for c in r["checks"] if c["name"] == name), None)
            if check is None or check["status"] == "not run":
                cells.append("-")
            else:
                cells.append(f"{check['violation_count']} of {check['checked']}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines.append("| **total** | " + " | ".join(str(r["violations"]) for r in reports) + " |")
    lines += ["", *[f"- seed {r['seed']}: {_load_line(r.get('load_average'))}" for r in reports]]
    lines += ["", *[f"- seed {r['seed']}: {p.with_suffix('.md').name}" for r, p in runs]]
    path.write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m soak", description=__doc__)
    parser.add_argument("--minutes", type=float, default=3.0, help="fault loop length per seed")
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: time)")
    parser.add_argument(
        "--seeds", default=None, help="comma-separated seeds, one run each (e.g. 1,2,3)"
    )
    parser.add_argument("--report", type=Path, default=RESULTS_DIR / "soak.json")
    parser.add_argument(
        "--hub-rounds",
        type=int,
        default=1,
        help="rounds of 'promote the Standby while rendering is broken' per seed, each on a "
        "fresh hub topology after the main phase (0: none)",
    )
    args = parser.parse_args(argv)
    if not 0 < args.minutes <= 120:
        parser.error("--minutes must be in (0, 120]")
    if args.seeds is not None and args.seed is not None:
        parser.error("give --seed or --seeds, not both")
    try:
        seeds = [int(s) for s in args.seeds.split(",")] if args.seeds else []
    except ValueError:
        parser.error("--seeds takes integers separated by commas")
    seeds = seeds or [args.seed if args.seed is not None else int(time.time())]
    # SIGTERM unwinds like Ctrl-C, through run()'s cleanup.
    signal.signal(signal.SIGTERM, _interrupt)
    several = len(seeds) > 1
    status, paths = 0, []
    for seed in seeds:
        log(f"seed {seed}")
        path = seed_report_path(args.report, seed, several)
        paths.append(path)
        status = max(status, run(args.minutes, seed, path, args.hub_rounds))
    if several:
        write_combined(paths, args.report)
        write_summary(paths, args.report.with_suffix(".md"))
        log(f"summary: {args.report.with_suffix('.md')}")
    return status


if __name__ == "__main__":
    sys.exit(main())

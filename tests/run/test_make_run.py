"""`make run` end to end: the whole stack starts, serves, shows itself and stops cleanly.

The stack runs on make run's embedded defaults (SQLite and kombu's filesystem broker in a
temporary HAPTIC_VAR_DIR), not on the suite's PostgreSQL and Redis: that zero-setup path is
what `make run` gives a new user, and it keeps this test isolated from the other tests that
share those servers (make run's database name and Celery queue names are not per test, unlike
the e2e harness's suffixed queues).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import httpx
import kubernetes
import pytest

from devstack import stack
from localcluster.ports import free_port

pytestmark = pytest.mark.e2e

REPO = stack.REPO_ROOT
ARTIFACTS = Path(os.environ.get("HAPTIC_TEST_ARTIFACTS", REPO / "test-artifacts")) / "make-run"
COMMANDS = ["localcluster", "fleet", "checkpoints", "intent", "request_review"]


def _stat(pid: int) -> tuple[str, str] | None:
    """(state, start time) of a live process, None when gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return fields[0], fields[19]


def _descendants(root: int) -> dict[int, str]:
    """Every live descendant of `root` (pid -> start time), from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found: dict[int, str] = {}
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            st = _stat(child)
            if st and st[0] not in ("Z", "X"):
                found[child] = st[1]
                todo.append(child)
    return found


def _alive(pids: dict[int, str]) -> list[int]:
    """The recorded processes that still run (same pid and start time: not a reused pid)."""
    out = []
    for pid, start in pids.items():
        st = _stat(pid)
        if st is not None and st[1] == start and st[0] not in ("Z", "X"):
            out.append(pid)
    return out


class MakeRun:
    """`python -m devstack.run` in its own session, its output followed line by line."""

    def __init__(self, var_dir: Path, web_port: int) -> None:
        self.var_dir = var_dir
        self.web_port = web_port
        self.lines: list[str] = []
        self.proc: subprocess.Popen[str] | None = None
        self.seen: dict[int, str] = {}  # every process it started, as observed
        self.started = 0.0

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
        env.pop("HAPTIC_ADMIN_PASSWORD", None)
        env.pop("HAPTIC_KUBECONFIG", None)
        env.update(
            HAPTIC_VAR_DIR=str(self.var_dir),
            HAPTIC_WEB_PORT=str(self.web_port),
            HAPTIC_CLUSTER_PORT="0",
            HAPTIC_HEALTH_PORT_BASE="0",
            PYTHONUNBUFFERED="1",
        )
        return env

    def start(self) -> None:
        self.lines = []
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "devstack.run"],
            cwd=REPO,
            env=self.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.reader = threading.Thread(target=self._read, args=(self.proc,), daemon=True)
        self.reader.start()

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        with open(ARTIFACTS / "make-run-output.txt", "a") as copy:
            for line in proc.stdout:
                self.lines.append(line.rstrip("\n"))
                copy.write(line)
                copy.flush()

    def wait_line(self, prefix: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if line.strip().startswith(prefix):
                    return line.strip()
            assert self.proc is not None
            if self.proc.poll() is not None:
                time.sleep(0.5)  # let the reader catch the last lines
                break
            time.sleep(0.2)
        raise AssertionError(f"no line {prefix!r}; output so far:\n" + "\n".join(self.lines))

    def record(self) -> None:
        assert self.proc is not None
        self.seen.update(_descendants(self.proc.pid))

    def interrupt(self, timeout: float = 120) -> int:
        """Ctrl-C as a terminal sends it (to make run only: children have own sessions)."""
        assert self.proc is not None
        self.record()
        self.proc.send_signal(signal.SIGINT)
        code = self.proc.wait(timeout=timeout)
        self.reader.join(timeout=10)  # the last lines (what was stopped) are read
        return code

    def kill_everything(self) -> None:
        """Teardown safety net after a failure: nothing may outlive the test."""
        if self.proc is not None and self.proc.poll() is None:
            self.record()
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=90)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for pid in _alive(self.seen):
            for kill in (os.killpg, os.kill):
                with contextlib.suppress(OSError):
                    kill(pid, signal.SIGKILL)
        stack.sweep_pods(self.var_dir / "cluster")


@pytest.fixture(scope="module")
def make_run() -> Iterator[MakeRun]:
    # Short path: HAProxy's unix sockets live under the pod directories (108-byte limit).
    var_dir = Path(tempfile.mkdtemp(prefix="haptic-run-")) / "var"
    shutil.rmtree(ARTIFACTS, ignore_errors=True)
    run = MakeRun(var_dir, free_port())
    run.start()
    try:
        yield run
    finally:
        run.kill_everything()
        if (var_dir / "log").exists():
            shutil.copytree(var_dir / "log", ARTIFACTS / "log", dirs_exist_ok=True)
        shutil.rmtree(var_dir.parent, ignore_errors=True)


def _value_after(lines: list[str], label: str) -> str:
    for line in lines:
        if label in line:
            return line.split(label, 1)[1].split()[0]
    raise AssertionError(f"{label!r} not printed")


def _pod_ips(lines: list[str]) -> list[str]:
    ips, inside = [], False
    for line in lines:
        if line.strip() == "HAProxy pods:":
            inside = True
        elif inside and line.startswith("    "):
            ips.append(line.split()[1])
        elif inside:
            break
    return ips


def _curl(argv: list[str]) -> tuple[int, str]:
    """Run the printed curl command line (status, body); httpx when curl is missing."""
    if shutil.which(argv[0]) is None:
        header, url = argv[2], argv[3]
        name, _, value = header.partition(": ")
        try:
            response = httpx.get(url, headers={name: value}, timeout=5)
        except httpx.HTTPError:
            return 0, ""
        return response.status_code, response.text
    out = subprocess.run(
        [*argv, "-s", "-m", "5", "-w", "\n%{http_code}"],
        capture_output=True,
        text=True,
        timeout=15,
    )
    body, _, code = out.stdout.rpartition("\n")
    return int(code or 0), body


def test_make_run_prints_a_working_curl_line_for_every_pod(make_run: MakeRun) -> None:
    line = make_run.wait_line("Try:        curl -H 'Host: echo.local'", timeout=240)
    elapsed = time.monotonic() - make_run.started
    print(f"make run (fresh var/) reached the curl line in {elapsed:.1f}s")
    argv = shlex.split(line.removeprefix("Try:").strip())
    assert argv[:3] == ["curl", "-H", "Host: echo.local"]
    printed_url = argv[3]
    ips = _pod_ips(make_run.lines)
    assert len(ips) == 3 and len(set(ips)) == 3, make_run.lines
    assert any(ip in printed_url for ip in ips)
    # The printed request, sent to every HAProxy pod, until each answers 200 from echo.
    for ip in ips:
        url = printed_url.replace(printed_url.split("//")[1].split(":")[0], ip)
        deadline = time.monotonic() + 30
        while True:
            code, body = _curl([*argv[:3], url])
            if code == 200 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert code == 200, (ip, code, body)
        assert json.loads(body)["host"] == "echo.local"
        assert json.loads(body)["pod"].startswith("echo-")
    # The second sample host routes to its own backend; an unknown host does not route.
    hello = _curl(["curl", "-H", "Host: hello.local", f"http://{ips[0]}:8080/"])
    assert hello[0] == 200 and json.loads(hello[1])["pod"].startswith("hello-")
    assert _curl(["curl", "-H", "Host: nope.local", f"http://{ips[0]}:8080/"])[0] == 404


def test_dashboard_login_page_and_api_token(make_run: MakeRun) -> None:
    make_run.wait_line("Try:", timeout=240)
    web = f"http://127.0.0.1:{make_run.web_port}"
    page = httpx.get(f"{web}/accounts/login/", timeout=10)
    assert page.status_code == 200
    assert "<form" in page.text and 'name="username"' in page.text
    assert 'name="password"' in page.text
    # Nothing is readable anonymously; the printed token opens the API.
    assert httpx.get(f"{web}/api/v1/fleet/", timeout=10).status_code in (401, 403)
    token = _value_after(make_run.lines, "token: ")
    api = httpx.get(
        f"{web}/api/v1/checkpoints/", headers={"Authorization": f"Token {token}"}, timeout=10
    )
    assert api.status_code == 200 and "results" in api.json()
    # The printed password logs in (the generated one, printed on this first run).
    password = _value_after(make_run.lines, "login: admin / ")
    assert (make_run.var_dir / "admin-password").read_text().strip() == password
    with httpx.Client(base_url=web, timeout=10) as client:
        form = client.get("/accounts/login/")
        csrf = client.cookies["csrftoken"]
        assert form.status_code == 200
        done = client.post(
            "/accounts/login/",
            data={"username": "admin", "password": password, "csrfmiddlewaretoken": csrf},
            headers={"Referer": f"{web}/accounts/login/"},
        )
        assert done.status_code == 302 and done.headers["location"] == "/"
        assert client.get("/").status_code == 200


def _manage(make_run: MakeRun, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO,
        env=make_run.env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _eventually(check: Callable[[], object], timeout: float = 45) -> object:
    """check()'s value once it stops raising AssertionError (publication is throttled, so
    the checkpoint pointer may trail the deployment by a publish interval)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return check()
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


def test_operator_commands_show_the_running_fleet(make_run: MakeRun) -> None:
    make_run.wait_line("Try:", timeout=240)
    ips = _pod_ips(make_run.lines)

    def fleet() -> tuple[str, list[dict]]:
        # The default kubeconfig is var/cluster/kubeconfig of the running make run.
        table = _manage(make_run, "fleet")
        assert table.returncode == 0, table.stderr
        for ip in ips:
            row = next(line for line in table.stdout.splitlines() if ip in line)
            assert row.split()[2] == "yes", row  # READY
        assert "all 3 pods run plan " in table.stdout
        rows = json.loads(_manage(make_run, "fleet", "--json").stdout)
        assert sorted(r["ip"] for r in rows) == sorted(ips)
        plans = {r["running_plan_id"] for r in rows}
        assert len(plans) == 1 and None not in plans
        return plans.pop(), rows

    plan, rows = _eventually(fleet)  # type: ignore[misc]
    assert all(isinstance(r["worker_pid"], int) and r["worker_pid"] > 0 for r in rows)
    assert all("pending_reload" in r and r["applied_plan_id"] == plan for r in rows)

    def intent_and_checkpoint() -> tuple[dict, dict]:
        intent = json.loads(_manage(make_run, "intent", "--json").stdout)
        assert intent["leader"]["holder"] in ("controller-0", "controller-1")
        assert int(intent["leader"]["epoch"]) >= 1
        # The fleet runs what the durable intent promised.
        assert intent["intent"]["planID"] == plan
        assert intent["claim"]["holder"] == intent["leader"]["holder"]
        cps = json.loads(_manage(make_run, "checkpoints", "--json").stdout)
        checksum = intent["intent"]["checksum"]
        pointed = [p for p in cps["retainedConfigs"] if p["checksum"] == checksum]
        assert pointed, cps
        assert any(c["uid"] == pointed[0]["uid"] and c["retained"] for c in cps["checkpoints"])
        return intent, pointed[0]

    intent, pointer = _eventually(intent_and_checkpoint)  # type: ignore[misc]
    text = _manage(make_run, "intent").stdout
    assert f"holder      {intent['leader']['holder']}" in text
    assert f"checkpoint  {pointer['name']} (retained" in text
    assert pointer["name"] in _manage(make_run, "checkpoints").stdout

    status = _manage(make_run, "localcluster", "status")
    assert "running" in status.stdout and "started by make run" in status.stdout


def test_request_review_records_the_leaders_verdicts(make_run: MakeRun) -> None:
    make_run.wait_line("Try:", timeout=240)
    out = _manage(make_run, "request_review", "--reason", "test: dry run", "--wait", "60")
    assert out.returncode == 0, out.stderr
    assert "recovery review #" in out.stdout
    # A fully configured fleet: the leader evaluates every check and refuses, since
    # recovery only ever targets bootstrap pods (ADR-0033).
    assert "status: ineligible" in out.stdout, out.stdout
    failed = [line for line in out.stdout.splitlines() if line.strip().startswith("FAIL")]
    assert any("bootstrap" in line for line in failed), out.stdout
    assert sum(1 for line in out.stdout.splitlines() if line.strip().startswith("pass")) >= 3
    refused = _manage(make_run, "request_review", "--reason", "   ")
    assert refused.returncode != 0 and "reason" in refused.stderr


def _controller_group(make_run: MakeRun, name: str) -> int:
    """The process group of make run's controller replica `name` (a Celery worker)."""
    assert make_run.proc is not None
    for pid in _descendants(make_run.proc.pid):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"worker" in argv and any(a.startswith(f"{name}@".encode()) for a in argv):
            return os.getpgid(pid)
    raise AssertionError(f"no process of {name} under make run")


def _leader(api: Any) -> tuple[str, int]:
    lease = kubernetes.client.CoordinationV1Api(api).read_namespaced_lease(
        "haptic-leader", stack.NAMESPACE, _request_timeout=5
    )
    epoch = (lease.metadata.annotations or {}).get("haproxy-haptic.org/epoch") or 0
    return lease.spec.holder_identity or "", int(epoch)


def _serves_everywhere(ips: list[str], host: str) -> None:
    for ip in ips:
        code, _ = _curl(["curl", "-H", f"Host: {host}", f"http://{ip}:8080/"])
        assert code == 200, (ip, host, code)


def _published_plan(api: Any, pods: int, other_than: str = "") -> str:
    """The plan status.deployedToPods of the ordinary HAProxyCfg names for every pod, once
    every pod acknowledged one plan that is not `other_than`."""
    cfg = kubernetes.client.CustomObjectsApi(api).get_namespaced_custom_object(
        "haproxy-haptic.org", "v1alpha1", stack.NAMESPACE, "haproxycfgs", "haptic"
    )
    entries = (cfg.get("status") or {}).get("deployedToPods") or []
    assert len(entries) == pods and all(e.get("mode") for e in entries), entries
    plans = {e["appliedPlanID"] for e in entries}
    assert len(plans) == 1 and other_than not in plans, entries
    return plans.pop()


def _marks(page: Any, url: str, kind: str, depth: int = 3) -> list[dict]:
    """Every mark of `kind` the timeline at `url` draws; a cluster is followed into its zoom
    (a numbered cluster stands for marks that would touch)."""
    page.goto(url)
    found = page.eval_on_selector_all(
        f"svg.timeline a.mark[data-kind='{kind}'], svg.timeline a.mark.cluster",
        """els => els.map(a => ({kind: a.dataset.kind, at: a.dataset.at,
            href: a.getAttribute('href'), title: a.querySelector('title').textContent,
            x: a.getBoundingClientRect().x}))""",
    )
    out = [m for m in found if m["kind"] == kind]
    for cluster in (m for m in found if m["kind"] == "cluster"):
        if depth and f" {kind}" in cluster["title"]:
            # The zoom's href is relative to the page (the site's own path).
            out += _marks(page, urljoin(url, cluster["href"]), kind, depth - 1)
    return out


def test_the_timeline_shows_this_runs_deployments_and_leader_change(make_run: MakeRun) -> None:
    """Issue 20's "the timeline shows a real `make run` run with a leader change and
    deployments": deployments under the first term, the leader replica stopped (SIGSTOP, as a
    frozen node: make run stops everything when a replica exits), the other replica's term,
    a deployment under it; then the timeline page in Chromium draws the two terms with their
    epochs in order, every intent inside the term that recorded it, and each pod's
    deployments of the new term's plan after the hand-over."""
    from playwright.sync_api import expect, sync_playwright

    from tests.site.conftest import ARTIFACTS as SITE_ARTIFACTS
    from tests.site.conftest import CHROMIUM

    make_run.wait_line("Try:", timeout=240)
    api = kubernetes.config.new_client_from_config(
        config_file=str(make_run.var_dir / "cluster" / "kubeconfig")
    )
    ips = _pod_ips(make_run.lines)
    custom = kubernetes.client.CustomObjectsApi(api)
    # An operator's edit of the template config: hand-over in seconds, receipts each second.
    timings = stack.Timings.short()
    custom.patch_namespaced_custom_object(
        "haproxy-haptic.org", "v1alpha1", stack.NAMESPACE, "haproxytemplateconfigs", "haptic",
        {"spec": stack.template_config(timings)["spec"]},
    )  # fmt: skip
    began = datetime.now(UTC) - timedelta(seconds=2)
    first, first_epoch = _leader(api)
    plan = _eventually(lambda: _published_plan(api, len(ips)), 30)
    # A reload (a new Service behind a new Ingress: a new backend) and a runtime change (an
    # endpoint added), under the first term.
    service = stack.backend("hello")[1]
    service["metadata"]["name"] = "timeline"
    stack.apply_objects(api, [service, stack.ingress("timeline-a", "timeline-a.local", "timeline")])
    _eventually(lambda: _serves_everywhere(ips, "timeline-a.local"), 60)
    plan = _eventually(lambda: _published_plan(api, len(ips), plan), 30)
    time.sleep(2)  # apart on the picture
    stack.scale_deployment(api, "echo", 2)

    def both_echo_endpoints() -> str:
        assert _echo_endpoints(api) == 2
        return _published_plan(api, len(ips), plan)

    plan = _eventually(both_echo_endpoints, 60)
    time.sleep(2)

    group = _controller_group(make_run, first)
    os.killpg(group, signal.SIGSTOP)
    try:

        def taken_over() -> tuple[str, int]:
            holder, epoch = _leader(api)
            assert holder not in ("", first) and epoch > first_epoch, (holder, epoch)
            return holder, epoch

        second, second_epoch = _eventually(taken_over, 60)  # type: ignore[misc]
    finally:
        os.killpg(group, signal.SIGCONT)
    time.sleep(2)
    # Under the second term: a route to an existing backend (runtime, a map entry).
    stack.apply_objects(api, [stack.ingress("timeline-b", "timeline-b.local", "echo")])
    _eventually(lambda: _serves_everywhere(ips, "timeline-b.local"), 60)
    new_plan = _eventually(lambda: _published_plan(api, len(ips), plan), 30)

    web = f"http://127.0.0.1:{make_run.web_port}"
    token = _value_after(make_run.lines, "token: ")
    headers = {"Authorization": f"Token {token}"}

    def mirrored() -> None:
        terms = httpx.get(f"{web}/api/v1/terms/", headers=headers, timeout=10).json()["results"]
        assert {(t["holder"], t["epoch"]) for t in terms} >= {
            (first, first_epoch),
            (second, second_epoch),
        }, terms
        fleet = httpx.get(f"{web}/api/v1/fleet/", headers=headers, timeout=10).json()
        rows = fleet["results"] if isinstance(fleet, dict) else fleet
        assert len(rows) == len(ips) and {r["applied_plan_id"] for r in rows} == {new_plan}

    _eventually(mirrored, 60)
    ended = datetime.now(UTC) + timedelta(seconds=2)
    window = f"{web}/timeline/?start={began:%Y-%m-%dT%H:%M:%SZ}&end={ended:%Y-%m-%dT%H:%M:%SZ}"
    password = (make_run.var_dir / "admin-password").read_text().strip()
    SITE_ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"]
        )
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.set_default_timeout(30_000)
            page.goto(f"{web}/accounts/login/")
            page.fill("#id_username", "admin")
            page.fill("#id_password", password)
            page.click("button[type=submit]")
            expect(page.locator("nav")).to_contain_text("admin")
            handover = _check_timeline(
                page, window, ips, (first, first_epoch), (second, second_epoch)
            )
            page.screenshot(path=str(SITE_ARTIFACTS / "20-make-run-timeline.png"), full_page=True)
            receipts = _receipts(web, headers)
            (ARTIFACTS / "receipts.json").write_text(json.dumps(receipts, indent=1))
            _check_deployments(
                page, window, began + timedelta(seconds=2), handover, new_plan, receipts
            )
            # Issue 20's first defect, on make run's embedded SQLite: through all of this the
            # mirror, the workers and the site never locked each other out.
            page.goto(f"{web}/")
            errors = page.locator("td.mirror-error")
            assert errors.count() >= 5
            expect(errors.filter(has_not_text="none")).to_have_count(0)
        finally:
            browser.close()
    logs = make_run.var_dir / "log"
    locked = [p.name for p in logs.glob("*.log") if "database is locked" in p.read_text()]
    assert locked == [], locked


def _echo_endpoints(api: Any) -> int:
    slices = kubernetes.client.DiscoveryV1Api(api).list_namespaced_endpoint_slice(
        stack.NAMESPACE, label_selector="kubernetes.io/service-name=echo"
    )
    return sum(
        1
        for s in slices.items
        for e in s.endpoints or []
        if e.conditions is None or e.conditions.ready is not False
    )


def _span(title: str) -> tuple[datetime, datetime | None]:
    """(start, end or None when open) from a term mark's title."""
    found = re.search(r"from (\S+), (?:ended (\S+)|open)", title)
    assert found, title
    start, end = (datetime.fromisoformat(v.replace("Z", "+00:00")) if v else None
                  for v in found.groups())  # fmt: skip
    assert start is not None
    return start, end


def _at(mark: dict) -> datetime:
    return datetime.fromisoformat(mark["at"].replace("Z", "+00:00"))


def _check_timeline(
    page: Any, window: str, ips: list[str], first: tuple[str, int], second: tuple[str, int]
) -> datetime:
    """The two terms in order with their epochs, every intent inside the term that recorded
    it (by its holder and epoch), a lane per pod; returns the hand-over instant."""
    terms = {}
    for mark in _marks(page, window, "term"):
        holder_epoch = re.search(r"term of (\S+) at epoch (\d+)", mark["title"])
        assert holder_epoch, mark
        terms[(holder_epoch[1], int(holder_epoch[2]))] = (mark, *_span(mark["title"]))
    assert first in terms and second in terms, sorted(terms)
    old, _, old_end = terms[first]
    new, new_start, _ = terms[second]
    # The first term ended where the second began, and is drawn to its left.
    assert old_end is not None and old_end <= new_start + timedelta(seconds=1), (old, new)
    assert old["x"] < new["x"]
    assert "ended" in old["title"] and second[1] > first[1]
    intents = _marks(page, window, "intent")
    assert intents, "no intent drawn"
    by_term: dict[tuple[str, int], list[dict]] = {}
    for mark in intents:
        who = re.search(r"by (\S+) at epoch (\d+)", mark["title"])
        assert who, mark
        by_term.setdefault((who[1], int(who[2])), []).append(mark)
        _, start, end = terms[(who[1], int(who[2]))]
        # Every intent lies inside the term that recorded it (the mirror's clock may trail).
        assert start - timedelta(seconds=1) <= _at(mark), (mark, start)
        assert end is None or _at(mark) <= end + timedelta(seconds=1), (mark, end)
    assert len(by_term.get(first, [])) >= 2 and by_term.get(second), sorted(by_term)
    assert max(map(_at, by_term[first])) < min(map(_at, by_term[second]))
    page.goto(window)
    assert page.locator("svg.timeline g.lane[data-lane^='pod haproxy-']").count() == len(ips)
    return new_start


def _receipts(web: str, headers: dict[str, str]) -> list[dict]:
    """Every mirrored receipt, oldest first: what the timeline's pod lanes are drawn from
    (written to the artifacts and shown when a lane is wrong)."""
    url, out = f"{web}/api/v1/receipts/?limit=1000&ordering=first_seen_at", []
    while url:
        page = httpx.get(url, headers=headers, timeout=10).json()
        out += page["results"]
        url = page["next"]
    return out


def _lane_of(receipts: list[dict], pod: str) -> list[tuple]:
    keys = ("deployed_at", "mode", "last_error", "applied_plan_id", "first_seen_at")
    return [tuple(r[k] for k in keys) for r in receipts if r["pod_name"] == pod]


def _check_deployments(
    page: Any,
    window: str,
    since: datetime,
    handover: datetime,
    new_plan: str,
    receipts: list[dict],
) -> None:
    """Each pod's lane since the test's first change: the reload, then the runtime change,
    both before the hand-over; the second term's plan after it, last; drawn left to right
    in the order they happened."""
    marks = []
    # A mark's instant has whole seconds: a deployment in the second the test began (an
    # in-process deploy can land within it) must count.
    since = since.replace(microsecond=0)
    for kind in ("reload", "runtime", "file-only"):
        marks += [dict(m, kind=kind) for m in _marks(page, window, kind) if _at(m) >= since]
    pods: dict[str, list[dict]] = {}
    for mark in marks:
        pods.setdefault(mark["title"].split()[0], []).append(mark)
    assert len(pods) == 3, sorted(pods)
    for pod, deployments in pods.items():
        deployments.sort(key=_at)
        before = [d["kind"] for d in deployments if _at(d) < handover]
        assert before[:1] == ["reload"] and "runtime" in before[1:], (
            pod,
            deployments,
            _lane_of(receipts, pod),
        )
        after = [d for d in deployments if _at(d) >= handover]
        assert after, (pod, deployments)
        assert f"plan {new_plan[:16]}" in after[-1]["title"], (pod, after[-1])
        assert after[-1] is deployments[-1]
    page.goto(window)
    shown = page.eval_on_selector_all(
        "svg.timeline a.mark.deploy-reload, svg.timeline a.mark.deploy-runtime",
        "els => els.map(a => [a.dataset.at, a.getBoundingClientRect().x])",
    )
    xs = [x for _, x in sorted(shown)]
    assert xs == sorted(xs), shown  # later instants are drawn further right


def test_ctrl_c_stops_everything_then_a_second_run_resumes_and_survives_a_kill(
    make_run: MakeRun,
) -> None:
    make_run.wait_line("Try:", timeout=240)
    first_token = _value_after(make_run.lines, "token: ")
    first_password = _value_after(make_run.lines, "login: admin / ")
    make_run.record()
    assert len(make_run.seen) >= 8  # web, cluster, mirror, 2 controllers, pods, haproxy...
    began = time.monotonic()
    assert make_run.interrupt() == 0
    print(f"Ctrl-C to clean exit: {time.monotonic() - began:.1f}s")
    assert _alive(make_run.seen) == []
    from localcluster.node.processes import marked_pids

    assert marked_pids(str((make_run.var_dir / "cluster").resolve())) == []
    stopping = [line for line in make_run.lines if "stopped " in line]
    assert stopping[0].split(">> stopped ")[1].startswith("controller-")
    assert "nothing left running" in make_run.lines[-1]
    assert not (make_run.var_dir / "localcluster.pid").exists()

    # Resume from var/: same credentials, the cluster's objects kept, converged again.
    make_run.seen = {}
    make_run.start()
    make_run.wait_line("Try:", timeout=120)
    elapsed = time.monotonic() - make_run.started
    print(f"make run (already installed, resumed) reached the curl line in {elapsed:.1f}s")
    assert _value_after(make_run.lines, "token: ") == first_token
    # The generated password was shown once; it still works and is not printed again.
    assert first_password not in "\n".join(make_run.lines)
    assert any("password generated on the first run" in line for line in make_run.lines)
    web = f"http://127.0.0.1:{make_run.web_port}"
    again = httpx.post(
        f"{web}/api/auth/token/", data={"username": "admin", "password": first_password}
    )
    assert again.status_code == 200 and again.json()["token"] == first_token
    ip = _pod_ips(make_run.lines)[0]
    assert _curl(["curl", "-H", "Host: echo.local", f"http://{ip}:8080/"])[0] == 200

    # Even a supervisor killed outright leaves nothing: its children get SIGTERM from the
    # kernel (parent-death signal) and the cluster's node stops the pods.
    assert make_run.proc is not None
    make_run.record()
    make_run.proc.kill()
    make_run.proc.wait(timeout=10)
    deadline = time.monotonic() + 60
    while _alive(make_run.seen) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _alive(make_run.seen) == []


@pytest.mark.parametrize("command", COMMANDS)
def test_operator_command_help(command: str) -> None:
    # In process: the parser `manage.py COMMAND --help` prints, without a process per command.
    from django.core.management import get_commands, load_command_class

    assert get_commands()[command] == "controller"
    parser = load_command_class("controller", command).create_parser("manage.py", command)
    text = parser.format_help()
    expected = {
        "localcluster": ["up|down|status", "var/localcluster.pid"],
        "fleet": ["--kubeconfig", "--wide", "worker pid"],
        "checkpoints": ["retainedConfigs", "--json"],
        "intent": ["retained-state", "epoch"],
        "request_review": ["--reason", "--wait", "operator"],
    }[command]
    for word in expected:
        assert word in " ".join(text.split()), (word, text)


def test_fleet_without_a_cluster_says_how_to_start_one(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.pop("HAPTIC_KUBECONFIG", None)
    env["HAPTIC_VAR_DIR"] = str(tmp_path)
    out = subprocess.run(
        [sys.executable, "manage.py", "fleet"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode != 0
    assert "make run" in out.stderr and "localcluster up" in out.stderr


def test_localcluster_up_status_down(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.pop("HAPTIC_KUBECONFIG", None)
    var = Path(tempfile.mkdtemp(prefix="haptic-lc-"))
    env["HAPTIC_VAR_DIR"] = str(var)

    def manage(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "manage.py", "localcluster", *args],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    info: dict | None = None
    try:
        up = manage("up", "--port", "0")
        assert up.returncode == 0, up.stderr
        info = stack.read_cluster_pidfile(var)
        assert info is not None and info["started_by"] == "manage.py localcluster up"
        # It outlived the command, and its kubeconfig reaches it.
        import kubernetes

        api = kubernetes.config.new_client_from_config(
            config_file=str(var / "cluster" / "kubeconfig")
        )
        assert kubernetes.client.CoreV1Api(api).list_namespace(_request_timeout=10) is not None
        assert "already running" in manage("up", "--port", "0").stdout
        assert f"pid {info['pid']}" in manage("status").stdout
        down = manage("down")
        assert down.returncode == 0 and "stopped gracefully" in down.stdout, down.stdout
        assert not stack.process_alive(int(info["pid"]))
        assert not (var / "localcluster.pid").exists()
        assert "no local cluster running" in manage("down").stdout
        assert "not running" in manage("status").stdout
    finally:
        if info and stack.process_alive(int(info["pid"])):
            with contextlib.suppress(OSError):
                os.killpg(int(info["pid"]), signal.SIGKILL)
        stack.sweep_pods(var / "cluster")
        shutil.rmtree(var, ignore_errors=True)

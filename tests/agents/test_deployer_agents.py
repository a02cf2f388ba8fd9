"""Issue 19, "parallel agents, kept connections": the controller's `Deployer` and `AgentPool`
against real agents running real haproxy.

Each agent sits behind a `Tap`, a TCP relay on the address the pool connects to: it counts
the connections it accepts, the HTTP requests that cross it and the order in which
requests reach the agents and answers leave them, and can hold each request back (a slow
agent). The relay only observes; the agent, haproxy and the controller's client are real.

- kept connections: one connection per agent across deployments, state reads and a quiet
  spell longer than httpx's default keep-alive (5 s); a pod gone from the fleet takes its
  connection with it;
- parallel: every agent has its request before any agent answers, so N slow agents take
  about one agent's time (asserted on the order of events, not on durations);
- batched: many runtime operations for a pod travel in one request, and the agent runs them
  in one runtime-API session (HAProxy's own connection counter, `show info` CumConns).
"""

from __future__ import annotations

import contextlib
import itertools
import re
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agents.haproxy_text import parse_show_info
from agents.sockets import RuntimeAPI
from controller.deploy.deployer import AgentPool, Deployer, HAProxyPod
from controller.render import RenderInput, RenderOutput, incremental, render, runtime_operations
from controller.render.engine import render_with_basis
from controller.term.plans import PlanMemory
from devstack import stack
from devstack.stack import wait_for
from tests.agents.helpers import TOKEN, AgentProcess, free_ip, port_free_on
from tests.render import builders as b

NS = "haptic"
REQUEST_LINE = re.compile(rb"(GET|POST) (/\S*) HTTP/1\.1\r\n")


class Tap:
    """A TCP relay in front of one agent that counts and orders what crosses it."""

    order = itertools.count()  # shared by every tap: one order of events across agents

    def __init__(self, ip: str, port: int, upstream: tuple[str, int], delay: float = 0.0):
        self.ip, self.port, self.upstream, self.delay = ip, port, upstream, delay
        self.accepted = 0
        self.closed = 0  # connections the controller closed
        self.sent = bytearray()  # everything the controller sent, for the request lines
        self.events: list[tuple[int, str]] = []  # (order, "request" | "answer")
        self._lock = threading.Lock()
        self._server = socket.create_server((ip, port))
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def requests(self) -> list[str]:
        with self._lock:
            return [f"{m[0].decode()} {m[1].decode()}" for m in REQUEST_LINE.findall(self.sent)]

    def _event(self, kind: str) -> None:
        with self._lock:
            self.events.append((next(self.order), kind))

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            with self._lock:
                self.accepted += 1
            agent = socket.create_connection(self.upstream)
            threading.Thread(target=self._requests, args=(client, agent), daemon=True).start()
            threading.Thread(target=self._answers, args=(agent, client), daemon=True).start()

    def _requests(self, client: socket.socket, agent: socket.socket) -> None:
        try:
            while data := client.recv(65536):
                if REQUEST_LINE.match(data):  # a new request starts this chunk
                    self._event("request")
                    if self.delay:
                        time.sleep(self.delay)
                with self._lock:
                    self.sent += data
                agent.sendall(data)
        except OSError:
            pass
        finally:
            with self._lock:
                self.closed += 1
            with_suppressed_shutdown(agent)

    def _answers(self, agent: socket.socket, client: socket.socket) -> None:
        try:
            while data := agent.recv(65536):
                if data.startswith(b"HTTP/1.1 "):
                    self._event("answer")
                client.sendall(data)
        except OSError:
            pass
        finally:
            with_suppressed_shutdown(client)

    def close(self) -> None:
        self._closed = True
        self._server.close()


def with_suppressed_shutdown(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()


class Fleet:
    """Real agents, a tap in front of each on one common port, and the controller's
    deployer reaching them through its pool."""

    def __init__(self, tmp: Path, count: int, delay: float = 0.0) -> None:
        self.agents = [
            AgentProcess(
                tmp / f"agent-{i}",
                extra_args=[
                    *("--min-reload-interval", "0", "--monitor-interval", "3600"),
                    *("--socket-dir", str(short_dir(tmp, i))),
                ],
            ).start()
            for i in range(count)
        ]
        ips = [free_ip() for _ in self.agents]
        port = port_free_on(ips)
        self.taps = [
            Tap(ip, port, (agent.ip, agent.port), delay)
            for ip, agent in zip(ips, self.agents, strict=True)
        ]
        self.pods = [HAProxyPod(f"haproxy-{i}", f"uid-{i}", t.ip) for i, t in enumerate(self.taps)]
        self.pool = AgentPool(port=port, token=lambda: TOKEN)
        self.deployer = Deployer(self.pool)
        self.plans = PlanMemory()
        self.epoch = 1

    def deploy(self, output: RenderOutput) -> dict[str, str]:
        self.plans.remember(output)
        outcomes = self.deployer.deploy(output, self.pods, "c-0", self.epoch, self.plans.plans())
        return {o.pod.name: o.summary for o in outcomes}

    def close(self) -> None:
        self.deployer.close()
        self.pool.close()
        for tap in self.taps:
            tap.close()
        for agent in self.agents:
            agent.stop()


def short_dir(tmp: Path, index: int) -> Path:
    """A short socket directory (sun_path is 108 bytes; pytest's tmp paths are long)."""
    path = Path("/tmp") / f"hd-{tmp.name[-12:]}-{index}"
    path.mkdir(parents=True, exist_ok=True)
    return path


def rendered(endpoints: list[str], port: int = 8080) -> RenderOutput:
    """One Ingress whose Service has `endpoints` (addresses nothing listens on: only the
    runtime operations between two renders matter here). No health checks: HAProxy counts
    their connections in CumConns, which counts runtime-API sessions here."""
    config = stack.template_config(stack.Timings("4s", "3s", "500ms", "60s", "600s", "0s"))
    config["metadata"] = {"name": "t", "namespace": NS, "uid": "uid-t"}
    service = b.service(NS, "web", [(None, 80, port)])
    service["metadata"]["annotations"] = {"haproxy.org/check": "false"}
    return render(
        RenderInput(
            config,
            ingresses=[b.ingress(NS, "web", [("web.example", [b.path("/", "web")])])],
            services=[service],
            endpointslices=[
                b.endpointslice(NS, "web", [b.endpoint(ip) for ip in endpoints], [(None, port)])
            ],
        )
    )


@pytest.fixture
def fleet(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Fleet]:
    count, delay = getattr(request, "param", (1, 0.0))
    made = Fleet(tmp_path, count, delay)
    try:
        yield made
    finally:
        made.close()


def test_one_kept_connection_per_agent_across_deployments_and_a_quiet_spell(fleet: Fleet):
    """Deployments, state reads and a quiet spell longer than httpx's default keep-alive
    (5 s) all use the one connection the pool opened to each agent.

    Failed before the fix (agents/client.py used httpx's default limits): the connection
    expired after 5 s idle, so the next endpoint change paid a new connection."""
    first = rendered(["10.40.0.1", "10.40.0.2"])
    assert set(fleet.deploy(first).values()) == {"reload"}
    moved = rendered(["10.40.0.1", "10.40.0.3"])
    assert set(fleet.deploy(moved).values()) == {"runtime"}
    fleet.deployer.read_states(fleet.pods, verify=False)
    time.sleep(6.0)  # longer than httpx's default keepalive_expiry
    back = rendered(["10.40.0.1", "10.40.0.2"])
    assert set(fleet.deploy(back).values()) == {"runtime"}
    fleet.deployer.read_states(fleet.pods, verify=True)
    for tap in fleet.taps:
        assert len(tap.requests()) >= 5, f"premise: requests crossed the tap: {tap.requests()}"
        assert tap.accepted == 1, f"{tap.accepted} connections for {tap.requests()}"


@pytest.mark.parametrize("fleet", [(3, 1.0)], indirect=True)
def test_slow_agents_are_applied_to_in_parallel(fleet: Fleet):
    """Three agents that each hold every request for a second: every agent has its request
    before the first answer leaves any of them (a serial deployer would have one agent's
    answer before the next agent's request)."""
    outcome = fleet.deploy(rendered(["10.41.0.1"]))
    assert set(outcome.values()) == {"reload"}, outcome
    events = sorted((order, tap.ip, kind) for tap in fleet.taps for order, kind in tap.events)
    first_answer = next(order for order, _, kind in events if kind == "answer")
    reached = {ip for order, ip, kind in events if kind == "request" and order < first_answer}
    assert reached == {t.ip for t in fleet.taps}, f"only {reached} had a request: {events}"


@pytest.mark.parametrize("fleet", [(2, 0.0)], indirect=True)
def test_a_pod_gone_from_the_fleet_takes_its_kept_connection_with_it(fleet: Fleet):
    """`AgentPool.forget` (the dispatcher calls it whenever the pod set changes) closes the
    connection of a pod no longer in the fleet and keeps the others'."""
    assert set(fleet.deploy(rendered(["10.44.0.1"])).values()) == {"reload"}
    kept = fleet.pods[0]
    fleet.pool.forget([kept])
    tap_kept, tap_gone = fleet.taps
    wait_for(lambda: tap_gone.closed == 1, 10, what="the gone pod's connection closed")
    fleet.deployer.read_states([kept], verify=False)
    assert (tap_kept.accepted, tap_kept.closed) == (1, 0)


def test_a_pods_runtime_operations_travel_in_one_request_and_one_runtime_session(fleet: Fleet):
    """Moving forty endpoints is one POST /v1/apply for the pod, and the agent runs every
    runtime operation and their read-back in one runtime-API session (HAProxy counts the
    connections its runtime socket accepted: `show info` CumConns)."""
    first = rendered([f"10.42.0.{i}" for i in range(1, 41)])
    assert set(fleet.deploy(first).values()) == {"reload"}
    moving = rendered([f"10.43.0.{i}" for i in range(1, 41)])
    ops = runtime_operations(first.plan, moving.plan)
    assert ops is not None and len(ops) >= 40, f"premise: many runtime operations: {ops}"
    runtime = RuntimeAPI(str(socket_dir_of(fleet.agents[0]) / "runtime.sock"))
    sent_before = len(fleet.taps[0].requests())
    sessions_before = cum_conns(runtime)
    outcome = fleet.deploy(moving)
    sessions = cum_conns(runtime) - sessions_before - 1  # the second `show info` is ours
    assert outcome == {"haproxy-0": "runtime"}, outcome
    assert fleet.taps[0].requests()[sent_before:] == ["POST /v1/apply"]
    assert sessions == 1, f"{sessions} runtime-API sessions for one apply"


def socket_dir_of(agent: AgentProcess) -> Path:
    return Path(agent.extra_args[agent.extra_args.index("--socket-dir") + 1])


def cum_conns(runtime: RuntimeAPI) -> int:
    return int(parse_show_info(runtime.command("show info"))["CumConns"])


class Endpoints:
    """One Ingress and Service rendered in full once, then moved by the incremental path
    (controller.render.incremental), as the leader does on an EndpointSlice change."""

    def __init__(self, endpoints: list[str]) -> None:
        config = stack.template_config(stack.Timings("4s", "3s", "500ms", "60s", "600s", "0s"))
        config["metadata"] = {"name": "t", "namespace": NS, "uid": "uid-t"}
        # Forty more Ingresses, so that haproxy.cfg is many times an apply's edits.
        names = ["web", *(f"other-{i}" for i in range(40))]
        services = [b.service(NS, name, [(None, 80, 8080)]) for name in names]
        for service in services:
            service["metadata"]["annotations"] = {"haproxy.org/check": "false"}
        self.objects = {
            "ingresses": tuple(
                b.ingress(NS, name, [(f"{name}.example", [b.path("/", name)])]) for name in names
            ),
            "services": tuple(services),
        }
        self.config = config
        self.output, self.basis = render_with_basis(self._input(endpoints, None))
        assert self.basis is not None, "premise: the incremental path is on"

    def _input(self, endpoints: list[str], previous: RenderOutput | None) -> RenderInput:
        eps = [b.endpoint(ip) for ip in endpoints]
        return RenderInput(
            self.config,
            **self.objects,
            endpointslices=(b.endpointslice(NS, "web", eps, [(None, 8080)]),),
            previous_plan=previous.plan if previous else None,
        )

    def move(self, endpoints: list[str]) -> RenderOutput:
        assert self.basis is not None
        step = incremental.update(self.basis, self._input(endpoints, self.output))
        assert step is not None and step.output.runtime_delta is not None, "premise"
        self.output, self.basis = step.output, step.basis
        return step.output


def test_an_endpoint_change_reaches_a_pod_as_edits_of_its_files(fleet: Fleet):
    """Issue 19: a pod that runs the plan an incremental output was made from gets the
    runtime operations and the edits of its haproxy.cfg, not every file's bytes; its agent
    makes the very files of the new plan from its own (checked with verify=1).

    Before the change every endpoint change sent the whole file set (base64) to every pod."""
    agent = fleet.agents[0]
    change = Endpoints(["10.45.0.1", "10.45.0.2"])
    assert set(fleet.deploy(change.output).values()) == {"reload"}
    moved = change.move(["10.45.0.1", "10.45.0.3"])
    sent_before = len(fleet.taps[0].sent)
    assert fleet.deploy(moved) == {"haproxy-0": "runtime"}
    sent = len(fleet.taps[0].sent) - sent_before
    assert len(moved.config) > 20_000, "premise: a configuration of some size"
    assert sent < 4096, f"{sent} bytes sent for one endpoint change"
    state = fleet.pool.client(fleet.pods[0]).state(verify=True)
    assert state.applied_plan_id == moved.plan_id
    assert state.verification and state.verification["files_ok"], state.verification
    assert (agent.data_dir / "config" / "haproxy.cfg").read_bytes() == moved.config


def test_a_pod_whose_files_changed_behind_its_agent_gets_the_whole_files(fleet: Fleet):
    """The agent proves the base of the edits against its applied record: a haproxy.cfg
    edited on disk is no base (409 base_unavailable), and the deployer sends the same apply
    with every file's bytes, which puts the plan's bytes back."""
    agent = fleet.agents[0]
    change = Endpoints(["10.46.0.1"])
    assert set(fleet.deploy(change.output).values()) == {"reload"}
    on_disk = agent.data_dir / "config" / "haproxy.cfg"
    on_disk.write_bytes(on_disk.read_bytes() + b"# edited behind the agent\n")
    moved = change.move(["10.46.0.2"])
    requests_before = len(fleet.taps[0].requests())
    assert fleet.deploy(moved) == {"haproxy-0": "runtime"}
    assert fleet.taps[0].requests()[requests_before:] == ["POST /v1/apply", "POST /v1/apply"]
    assert on_disk.read_bytes() == moved.config

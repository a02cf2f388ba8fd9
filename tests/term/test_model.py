"""A stateful model of the term protocol (issue 15, section 3).

Hypothesis drives real `LeaderPipeline`s (their threads, the real `RetainedStateStore` and
publishers, the local API server over HTTP, the real deployer and agent client) through
renders, deployments, acknowledgements, publications and leader changes, against in-process
agents that fence and decide with agents/decide.py (tests/term/fake_agents.py). After every
step it checks the invariants in tests/term/invariants.py.

Deployments run in place on the term's threads; here the dispatcher's `run_deployment`
queues the output, and the `deploy` rule calls `pipeline.deploy(output, only)` later, so a
deployment can interleave with everything else (including a stale term's).

HAPTIC_MODEL_EXAMPLES sets the number of examples (make test: 300, the reproducible sequence,
which finds hole 1 and hole 2 of issue 15 when either is put back: see docs/term.md, "The
model test"; make soak: 2,000 random ones); HAPTIC_MODEL_STEPS the steps per example;
HAPTIC_MODEL_RANDOM=1 draws new examples each run instead of the reproducible sequence;
HAPTIC_MODEL_SHRINK=1 shrinks a failing example to the smallest one (slow; `make soak` does
it).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import kubernetes
import pytest
from hypothesis import HealthCheck, Phase, event, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from kubernetes.client.exceptions import ApiException

from controller.deploy.deployer import Deployer, PodOutcome
from controller.deploy.diff import Apply, manifest, manifest_head
from controller.election.term import FencingToken
from controller.fencing import StaleTerm, check_term
from controller.health import RECONCILIATION_COORDINATOR, ComponentHealth
from controller.leader import LeaderPipeline, LeaderSettings, PlanMemory
from controller.publish.checkpoints import CFG_PLURAL, pointers_from_status
from controller.publish.kube import Objects
from controller.render import RenderOutput
from controller.rendergate import RenderGate
from controller.retained.checkpoint import TemplateRef
from controller.retained.intent import EPOCH_ANNOTATION, INTENT_ANNOTATION, DeploymentIntent
from controller.retained.store import RetainedStateStore
from controller.term.publisher import PublicationStopped
from controller.watch.discovery import DiscoveredPod
from devstack import stack
from localcluster.testing import ApiServer
from tests.render import builders as b
from tests.term import invariants as inv
from tests.term.fake_agents import FakeAgent, FakeAgentPool

NS = "haptic-model"
EXAMPLES = int(os.environ.get("HAPTIC_MODEL_EXAMPLES", "300"))
STEPS = int(os.environ.get("HAPTIC_MODEL_STEPS", "25"))
RANDOM = os.environ.get("HAPTIC_MODEL_RANDOM") == "1"
# Shrinking a failing example can take minutes: off in `make test` (the first failing example
# fails the test), on with HAPTIC_MODEL_SHRINK=1 to read the smallest one.
SHRINK = os.environ.get("HAPTIC_MODEL_SHRINK") == "1"
WAIT = 30.0  # bound on every wait for a pipeline thread; a hang fails the example
BROKEN_TEMPLATE = "{% if %}"
WRITE_METHODS = {"POST", "PUT", "PATCH", "DELETE"}
TERM_WORK = 3  # dispatches a live term makes before a rule may end it
MAX_PODS = 4  # more pods add steps to every deployment, not new interleavings


# The request hook of each term's client, by its User-Agent (TermModel._recording_client).
RECORDERS: dict[str, Callable[[str, str], None]] = {}


@pytest.fixture(autouse=True, scope="module")
def record_by_user_agent() -> Iterator[None]:
    """Every request of a client whose User-Agent names a model term goes through that
    term's hook first, whichever copy of the client sends it."""
    original = kubernetes.client.ApiClient.call_api

    def call_api(self: Any, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        hook = RECORDERS.get(self.user_agent)
        if hook is not None:
            hook(method, url)
        return original(self, method, url, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(kubernetes.client.ApiClient, "call_api", call_api)
        yield
    RECORDERS.clear()


@pytest.fixture(scope="module")
def api() -> Iterator[ApiServer]:
    with ApiServer.start() as server:
        kubernetes.client.CoreV1Api(server.api_client()).create_namespace(
            {"metadata": {"name": NS}}
        )
        yield server


# -- the edges the model observes through ------------------------------------------------


class SignallingHealth(ComponentHealth):
    """Counts the coordinator's render failures (a render error, a gate refusal, a failed
    claim), so the model knows when a requested render has ended without a dispatch."""

    def __init__(self, changed: threading.Condition) -> None:
        super().__init__()
        self.changed = changed
        self.failures = 0
        self.last_error: str | None = None

    def set_error(self, component: str, error: str | None) -> None:
        super().set_error(component, error)
        if component == RECONCILIATION_COORDINATOR and error is not None:
            with self.changed:
                self.failures += 1
                self.last_error = error
                self.changed.notify_all()


class ObservedDeployer(Deployer):
    """The production deployer; notes when recovery (its own thread) reads the fleet."""

    def __init__(self, pool: FakeAgentPool, seen_recovery: threading.Event) -> None:
        super().__init__(pool, max_parallel=4)
        self.seen_recovery = seen_recovery

    def read_states(self, pods, verify):  # type: ignore[no-untyped-def]
        if threading.current_thread().name.startswith("recovery"):
            self.seen_recovery.set()
        return super().read_states(pods, verify)


@dataclass
class Dispatch:
    """A deployment the pipeline handed to `run_deployment`, not yet run."""

    term: Term
    output: RenderOutput
    only: frozenset[str] | None
    recovery: bool  # handed over by recovery (its own thread), not by the dispatcher


@dataclass
class Term:
    holder: str
    epoch: int
    pipeline: LeaderPipeline
    health: SignallingHealth
    deployer: ObservedDeployer
    seen_recovery: threading.Event
    dispatched: int = 0  # outputs handed to run_deployment
    good_render: bool = False  # a render of this term was accepted
    latched: bool = False  # the last render failed: publication holds
    stopped: bool = False
    ended_locally: bool = False  # the elector ended it; the Lease may still name it
    acknowledged: dict[str, str] = field(default_factory=dict)  # pod -> newest receipt checksum
    delivered: list[str] = field(default_factory=list)  # plan ids its deployments applied

    @property
    def key(self) -> tuple[str, int]:
        return (self.holder, self.epoch)


def world_snapshot(template_obj: dict[str, Any], hosts: tuple[str, ...], broken: bool) -> dict:
    """What the watch caches would hand the renderer for these Ingress hosts."""
    config = json.loads(json.dumps(template_obj))
    if broken:
        config["spec"]["haproxyConfig"] = {"template": BROKEN_TEMPLATE}
    return {
        "template_config": config,
        "ingresses": [
            b.ingress(NS, f"ing-{h}", [(f"{h}.example", [b.path("/", f"svc-{h}")])]) for h in hosts
        ],
        "services": [b.service(NS, f"svc-{h}", [(None, 80, 8080)]) for h in hosts],
        "endpointslices": [
            b.endpointslice(NS, f"svc-{h}", [b.endpoint("10.9.0.1")], [(None, 8080)]) for h in hosts
        ],
    }


def world_hosts(index: int) -> tuple[str, ...]:
    """World 0 serves host a; world i adds host h<i>: each a new plan."""
    return ("a",) if index == 0 else ("a", f"h{index}")


class TermModel(RuleBasedStateMachine):
    server: ApiServer  # set by the test

    def __init__(self) -> None:
        super().__init__()
        self.client = self.server.api_client()
        self.leases = kubernetes.client.CoordinationV1Api(self.client)
        custom = kubernetes.client.CustomObjectsApi(self.client)
        self.name = f"m{uuid.uuid4().hex[:10]}"
        body = stack.template_config(stack.Timings("4s", "3s", "500ms", "600s", "600s", "0s"))
        body["metadata"] = {"name": self.name, "namespace": NS}
        self.template_obj = custom.create_namespaced_custom_object(
            "haproxy-haptic.org", "v1alpha1", NS, "haproxytemplateconfigs", body
        )
        self.template = TemplateRef(self.name, NS, self.template_obj["metadata"]["uid"])
        self.lease_name = f"{self.name}-leader"
        self.leases.create_namespaced_lease(NS, {"metadata": {"name": self.lease_name}, "spec": {}})
        self.objects = Objects(self.client, NS)
        self.store = RetainedStateStore(self.client, self.template, self.lease_name, NS)
        self.agents: dict[str, FakeAgent] = {}  # by pod IP
        self.pods: list[DiscoveredPod] = []
        self.world = 0
        self.worlds_rendered: list[int] = []
        self.broken = False
        self.outputs: list[RenderOutput] = []  # every output dispatched, for old releases
        self.terms: list[Term] = []
        self.current: Term | None = None
        self.queue: list[Dispatch] = []
        self.changed = threading.Condition()
        self.clock = itertools.count(1)
        self.clock_lock = threading.Lock()
        self.now = 0
        self.writes: list[inv.Write] = []
        self.gone_at: dict[tuple[str, int], int] = {}
        self.replicas = itertools.count(1)
        self.interleave: Callable[[], None] | None = None
        # Violations by invariant; each invariant asserts on its own line, so hypothesis
        # reports (and shrinks) a failing example for each one it breaks.
        self.violations: dict[str, list[str]] = {}
        for _ in range(2):
            self._add_agent()

    # -- plumbing ----------------------------------------------------------------------

    def _tick(self) -> int:
        with self.clock_lock:
            self.now = next(self.clock)
            return self.now

    def _add_agent(self) -> FakeAgent:
        index = len(self.pods)
        agent = FakeAgent(f"haproxy-{index}", f"uid-{index}-{self.name}", f"10.8.0.{index + 1}")
        self.agents[agent.ip] = agent
        self.pods.append(DiscoveredPod(NS, agent.pod_name, agent.pod_uid, agent.ip, True, None))
        return agent

    def _recording_client(self, key: tuple[str, int]) -> Any:
        """An API client of its own for one term: every write it sends is recorded, and the
        first request touching a checkpoint may run an interleaved step first.

        Recorded by the client's User-Agent (record_by_user_agent), not by wrapping this
        client object: the term's components make bounded copies of it (the publisher's,
        the elector's), which keep the User-Agent as a replica's keep its identity."""
        api_client = self.server.api_client()
        api_client.user_agent = f"haptic-model/{self.name}/{key[0]}/{key[1]}"

        def request(method: str, url: str) -> None:
            if "-cp-" in url and self.interleave is not None:
                step, self.interleave = self.interleave, None
                step()
            if method in WRITE_METHODS:
                path = url.split("://", 1)[-1].split("/", 1)[-1]
                with self.clock_lock:
                    self.writes.append(inv.Write(key, self.now, method, path))

        RECORDERS[api_client.user_agent] = request
        return api_client

    def _set_leader(self, holder: str | None, epoch: int | None = None) -> None:
        """Write the leader Lease as an elector would (acquire with a bumped epoch, or
        release keeping the epoch)."""
        for _ in range(5):
            lease = self.leases.read_namespaced_lease(self.lease_name, NS)
            annotations = dict(lease.metadata.annotations or {})
            if epoch is not None:
                annotations[EPOCH_ANNOTATION] = str(epoch)
            lease.metadata.annotations = annotations
            lease.spec.holder_identity = holder or ""
            lease.spec.lease_duration_seconds = 30 if holder else 1
            lease.spec.renew_time = datetime.now(UTC)
            try:
                self.leases.replace_namespaced_lease(self.lease_name, NS, lease)
                return
            except ApiException as exc:
                if exc.status != 409:
                    raise

    def _leader_epoch(self) -> int:
        lease = self.leases.read_namespaced_lease(self.lease_name, NS)
        return int((lease.metadata.annotations or {}).get(EPOCH_ANNOTATION) or 0)

    def _lease_gone(self, term: Term | None) -> None:
        if term is not None and term.key not in self.gone_at:
            self.gone_at[term.key] = self._tick()

    def _snapshot(self) -> dict[str, Any]:
        return world_snapshot(self.template_obj, world_hosts(self.world), self.broken)

    def _start_term(self, holder: str, epoch: int) -> Term:
        token = FencingToken.of(holder, epoch, self.lease_name, NS)
        seen_recovery = threading.Event()
        deployer = ObservedDeployer(FakeAgentPool(self.agents), seen_recovery)
        health = SignallingHealth(self.changed)
        api_client = self._recording_client((holder, epoch))
        term_box: list[Term] = []

        def run_deployment(
            output: RenderOutput, only: set[str] | None, bootstrap_only: bool = False
        ) -> dict[str, str]:
            # Recovery hands its applies over with bootstrap_only.
            recovery = bootstrap_only or threading.current_thread().name.startswith("recovery")
            with self.changed:
                self.queue.append(
                    Dispatch(term_box[0], output, frozenset(only) if only else None, recovery)
                )
                term_box[0].dispatched += 1
                self.changed.notify_all()
            return {}  # the task's answer comes later; nothing scheduled to follow up

        pipeline = LeaderPipeline(
            api_client=api_client,
            token=token,
            template=self.template,
            health=health,
            gate=RenderGate(),
            plans=PlanMemory(),
            snapshot=self._snapshot,
            haproxy_pods=lambda: list(self.pods),
            deployer=deployer,
            settings=LeaderSettings(
                deployment_min_interval=0.0, publish_interval=3600.0, drift_interval=3600.0
            ),
            # The local term believes it leads until the elector ends it; the Lease decides
            # the rest.
            term_valid=lambda: not term_box[0].ended_locally,
            check_term=lambda: check_term(api_client, token),
            record_event=lambda *_: None,
            run_deployment=run_deployment,
            run_publication=lambda: None,  # publications are the model's `publish` rule
        )
        term = Term(holder, epoch, pipeline, health, deployer, seen_recovery)
        term_box.append(term)
        self.terms.append(term)
        self.current = term
        pipeline.start()
        self._render_and_wait(term)
        return term

    def _render_and_wait(self, term: Term) -> None:
        """Request a render and wait until it dispatched or failed (and, after a failure
        with nothing rendered in the term, until recovery has finished)."""
        with self.changed:
            failures, dispatched = term.health.failures, term.dispatched
        term.pipeline.request_render()
        deadline = time.monotonic() + WAIT
        with self.changed:
            while term.health.failures == failures and term.dispatched == dispatched:
                left = deadline - time.monotonic()
                assert left > 0, "the requested render neither dispatched nor failed"
                self.changed.wait(left)
            failed = term.health.failures > failures
        if failed:
            term.latched = True
            if not term.good_render:
                self._wait_recovery(term)
        else:
            term.good_render = True
            term.latched = False
            self.worlds_rendered.append(self.world)

    def _wait_recovery(self, term: Term) -> None:
        """Recovery runs on its own thread after a render failure while the term has no
        output: wait until it has looked at the fleet and ended."""
        appear_by = time.monotonic() + 1.0
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            alive = [t for t in threading.enumerate() if t.name.startswith("recovery")]
            if not alive and (term.seen_recovery.is_set() or time.monotonic() > appear_by):
                return
            time.sleep(0.005)
        raise AssertionError("recovery did not end")

    def _deliver(self, dispatch: Dispatch) -> None:
        """Run one queued deployment as the dispatcher would have, and judge it."""
        term = dispatch.term
        agents = list(self.agents.values())
        before = {a.pod_name: len(a.accepted) for a in agents}
        self._tick()
        try:
            outcomes = term.pipeline.deploy(
                dispatch.output, set(dispatch.only or ()) or None, bootstrap_only=dispatch.recovery
            )
        except StaleTerm:
            outcomes = []
        applies = [a for agent in agents for a in agent.accepted[before[agent.pod_name] :]]
        if term.ended_locally and applies:
            self._found("ended", [f"{term.key} ended, then gave {len(applies)} pods a plan"])
        if outcomes:
            delivered = term.delivered
            plan = dispatch.output.plan_id
            reverted = plan in delivered[:-1] and delivered[-1:] != [plan]
            if reverted and currently_in_test_context():  # fixed sequences run outside it
                event("a term delivered a reverted output")  # hole 1's shape
            delivered.append(plan)
        if applies or outcomes:
            self.outputs.append(dispatch.output)
        self._absorb(term, dispatch.output, outcomes)
        intent = self.store.read_intent()
        self._found("applies", inv.applies_not_named_by_intent(applies, intent))
        if dispatch.recovery:
            self._found("recovery", inv.recovery_to_configured_pods(applies))
        if term is self.current and term.key not in self.gone_at:
            self._found("fencing", inv.current_term_fenced_out(outcomes))
        took = applies or any(o.receipt(dispatch.output) for o in outcomes)
        if took and term is self.current and term.key not in self.gone_at:
            self._found(
                "dispatch",
                inv.intent_misses_dispatch(
                    intent, dispatch.output.plan_id, dispatch.output.checksum
                ),
            )

    def _found(self, kind: str, violations: list[str]) -> None:
        self.violations.setdefault(kind, []).extend(violations)

    def _published(self) -> tuple[str | None, str | None, list[str]]:
        """resourceVersion and checksum of the ordinary HAProxyCfg, and its pointers."""
        cfg = self.objects.get(CFG_PLURAL, self.name)
        if cfg is None:
            return None, None, []
        pointers = [p.checksum for p in pointers_from_status(cfg)]
        return cfg["metadata"]["resourceVersion"], cfg["spec"].get("checksum"), pointers

    def _absorb(self, term: Term, output: RenderOutput, outcomes: list[PodOutcome]) -> None:
        for outcome in outcomes:
            if outcome.receipt(output) is not None:
                term.acknowledged[outcome.pod.name] = output.checksum

    def _publish(self, term: Term, drain: bool = False) -> None:
        acknowledged = dict(term.acknowledged)
        intent = self.store.read_intent()
        version, _, _ = self._published()
        self._tick()
        try:
            if drain:
                term.pipeline.stop(drain=True)
            else:
                term.pipeline.publish()
        except StaleTerm:
            return
        if term.latched or term.key in self.gone_at:
            return  # publication holds while rendering is broken; a gone term publishes nothing
        after, checksum, pointers = self._published()
        if after == version:
            return  # nothing was unpublished
        named = inv.publication_not_named_by_intent(intent, checksum)
        self._found("publication", named)
        if named:
            return
        if intent is not None and not self._still_named(intent):
            # A deployment during the publication moved the intent on (its receipts replace
            # the pods' older ones): the promise is now the new output's checkpoint, due at
            # the next publication.
            return
        self._found("checkpoint", inv.intent_without_checkpoint(intent, acknowledged, pointers))

    def _still_named(self, intent: DeploymentIntent) -> bool:
        now = self.store.read_intent()
        return now is not None and now.names(intent.plan_id, intent.checksum)

    def _live(self) -> bool:
        return self.current is not None and not self.current.stopped

    def _may_end_term(self) -> bool:
        """A live term ends only after it rendered a few times: the search then spends its
        steps on what happens inside a term (where holes 1 and 2 live) as much as on term
        changes, instead of ending most terms before their second render."""
        term = self.current
        return term is None or term.stopped or term.dispatched >= TERM_WORK

    def _stop_current(self) -> None:
        term = self.current
        if term is not None and not term.stopped:
            term.pipeline.stop(drain=False)
            term.stopped = True

    # -- rules ---------------------------------------------------------------------------

    @initialize()
    def first_term(self) -> None:
        self.another_replica_takes_over()

    @precondition(lambda self: self._may_end_term())
    @rule()
    def another_replica_takes_over(self) -> None:
        """A new term (another holder, higher epoch): the old one's Lease is gone."""
        self._stop_current()
        self._lease_gone(self.current)
        epoch = self._leader_epoch() + 1
        holder = f"replica-{next(self.replicas)}"
        self._tick()
        self._set_leader(holder, epoch)
        self._start_term(holder, epoch)

    @precondition(lambda self: self._live())
    @rule()
    def render_new_plan(self) -> None:
        self.world = max([self.world, *self.worlds_rendered]) + 1
        self.broken = False
        assert self.current is not None
        self._render_and_wait(self.current)

    @precondition(lambda self: self._live() and len(set(self.worlds_rendered)) > 1)
    @rule(data=st.data())
    def render_previous_plan_again(self, data: st.DataObject) -> None:
        earlier = sorted(set(self.worlds_rendered) - {self.world}) or [self.world]
        self.world = data.draw(st.sampled_from(earlier), label="world")
        self.broken = False
        assert self.current is not None
        self._render_and_wait(self.current)

    @precondition(lambda self: self._live() and not self.current.latched)
    @rule()
    def render_broken(self) -> None:
        self.broken = True
        assert self.current is not None
        self._render_and_wait(self.current)

    @precondition(lambda self: bool(self.queue))
    @rule(data=st.data())
    def deploy(self, data: st.DataObject) -> None:
        """Run a queued deployment. One source's tasks run in order (a dispatcher waits for
        each), but recovery's and other terms' tasks may run before or after them."""
        heads: dict[tuple[tuple[str, int], bool], Dispatch] = {}
        for dispatch in self.queue:
            heads.setdefault((dispatch.term.key, dispatch.recovery), dispatch)
        choices = list(heads.values())
        chosen = choices[data.draw(st.integers(0, len(choices) - 1), label="task")]
        self.queue.remove(chosen)
        self._deliver(chosen)

    @precondition(lambda self: any(a.pending_reload for a in self.agents.values()))
    @rule()
    def acknowledge(self) -> None:
        """Every paced reload runs: the pods now run what they were given."""
        for agent in self.agents.values():
            agent.run_pending_reload()

    @precondition(lambda self: any(a.pending_reload for a in self.agents.values()))
    @rule(data=st.data())
    def partial_acknowledgement(self, data: st.DataObject) -> None:
        """One pod's paced reload runs; the others still wait."""
        pending = sorted(ip for ip, a in self.agents.items() if a.pending_reload)
        self.agents[data.draw(st.sampled_from(pending), label="pod ip")].run_pending_reload()

    @precondition(lambda self: self._live())
    @rule(data=st.data())
    def pace_reloads(self, data: st.DataObject) -> None:
        """A pod inside its minimum reload interval schedules its next reloads."""
        ip = data.draw(st.sampled_from(sorted(self.agents)), label="pod ip")
        self.agents[ip].pace = not self.agents[ip].pace

    @precondition(lambda self: self._live())
    @rule()
    def publish(self) -> None:
        assert self.current is not None
        self._publish(self.current)

    @precondition(lambda self: self._live() and bool(self.queue))
    @rule()
    def publish_while_a_deployment_runs(self) -> None:
        """The publisher and a deployment at once: the queued deployment runs while the
        publication is between its read of the receipts and its checkpoint write."""
        dispatch = self.queue.pop(0)

        def concurrent() -> None:
            worker = threading.Thread(target=self._deliver, args=(dispatch,), name="task")
            worker.start()
            worker.join(WAIT)

        self.interleave = concurrent
        assert self.current is not None
        self._publish(self.current)
        if self.interleave is not None:  # the publication wrote no checkpoint
            self.interleave = None
            self._deliver(dispatch)

    @precondition(lambda self: self._live() and self._may_end_term())
    @rule()
    def graceful_stop(self) -> None:
        """The drain (it waits for the deployment in flight: the queued ones run first),
        then the elector releases the Lease."""
        term = self.current
        assert term is not None
        mine = [d for d in self.queue if d.term is term]
        self.queue = [d for d in self.queue if d.term is not term]
        for dispatch in mine:
            self._deliver(dispatch)
        # The drain waits for paced reloads; a real agent runs them within its interval.
        for agent in self.agents.values():
            agent.reload_when_read = True
        self._publish(term, drain=True)
        for agent in self.agents.values():
            agent.reload_when_read = False
        term.stopped = True
        self._set_leader(None)
        self._lease_gone(term)

    @precondition(lambda self: self._live() and self._may_end_term())
    @rule()
    def sudden_stop(self) -> None:
        """SIGKILL: the term stops, its Lease stays until someone takes over; its queued
        deployments are a stale term's now."""
        self._stop_current()

    @precondition(lambda self: self._live() and self._may_end_term())
    @rule()
    def the_elector_ends_the_term(self) -> None:
        """The renew deadline passed: the elector ends the term before anyone takes the
        Lease, which still names it. Until stop_term the term's threads still run, and its
        queued deployments may run later: the term's own fence refuses them all, and
        nothing of the term is written from here on."""
        term = self.current
        assert term is not None
        term.ended_locally = True
        term.stopped = True
        self._lease_gone(term)

    @precondition(lambda self: self.current is not None and self._may_end_term())
    @rule()
    def recreate_the_leader_lease(self) -> None:
        """The leader Lease is deleted and re-created: its epoch counter starts again at 1,
        below the retained claim (Reclaim)."""
        self._stop_current()
        self._lease_gone(self.current)
        self._tick()
        self.leases.delete_namespaced_lease(self.lease_name, NS)
        holder = f"replica-{next(self.replicas)}"
        self.leases.create_namespaced_lease(
            NS,
            {
                "metadata": {"name": self.lease_name, "annotations": {EPOCH_ANNOTATION: "1"}},
                "spec": {
                    "holderIdentity": holder,
                    "leaseDurationSeconds": 30,
                    "renewTime": datetime.now(UTC).isoformat(),
                },
            },
        )
        self._start_term(holder, 1)

    @precondition(lambda self: bool(self.outputs) and self._may_end_term())
    @rule(data=st.data(), with_uid=st.booleans())
    def an_old_release_leads(self, data: st.DataObject, with_uid: bool) -> None:
        """A 0.5/0.6 replica leads for a while: it writes its intent copy on the leader Lease
        and applies that output to every pod. The next claim must adopt it."""
        index = data.draw(st.integers(0, len(self.outputs) - 1), label="output index")
        output = self.outputs[index]
        self._stop_current()
        self._lease_gone(self.current)
        self.current = None
        epoch = self._leader_epoch() + 1
        self._tick()
        self._set_leader("old-release", epoch)
        copy = {"planID": output.plan_id, "checksum": output.checksum}
        copy |= {"holder": "old-release", "epoch": epoch}
        if with_uid:
            copy["templateUID"] = self.template.uid
        lease = self.leases.read_namespaced_lease(self.lease_name, NS)
        lease.metadata.annotations = {
            **(lease.metadata.annotations or {}),
            INTENT_ANNOTATION: json.dumps(copy),
        }
        self.leases.replace_namespaced_lease(self.lease_name, NS, lease)
        for agent in self.agents.values():
            previous = agent.applied.plan_id if agent.applied else None
            decision = Apply("reload", (), previous, "old release")
            agent.apply(manifest(manifest_head(output, decision, "old-release", epoch, 1), output))

    @precondition(lambda self: len(self.pods) < MAX_PODS)
    @rule()
    def add_bootstrap_pod(self) -> None:
        self._add_agent()
        term = self.current
        if term is None or term.stopped:
            return
        if term.good_render:
            with self.changed:
                dispatched = term.dispatched
            term.pipeline.pods_changed()
            with self.changed:
                self.changed.wait_for(lambda: term.dispatched > dispatched, WAIT)
        else:  # with nothing rendered the pipeline asks for a render
            self._render_and_wait(term)

    @precondition(lambda self: bool(self.outputs) and self._may_end_term())
    @rule()
    def run_recovery(self) -> None:
        """A new term whose rendering is broken: recovery from the intent's checkpoint to
        the bootstrap pods (added by add_bootstrap_pod)."""
        self.broken = True
        self.another_replica_takes_over()

    @precondition(lambda self: any(t.stopped for t in self.terms))
    @rule(data=st.data())
    def a_stale_term_acts(self, data: st.DataObject) -> None:
        """A task of an ended term runs late: publication and a deployment."""
        ended = [t for t in self.terms if t.stopped]
        term = ended[data.draw(st.integers(0, len(ended) - 1), label="ended term")]
        self._tick()
        # An ended term refuses: StaleTerm (the Lease moved) or PublicationStopped (it knows
        # it stopped); either way nothing is written, which no_write_after_the_lease_is_gone
        # checks.
        with contextlib.suppress(StaleTerm, PublicationStopped):
            term.pipeline.publish()
        if self.outputs:
            self._deliver(Dispatch(term, self.outputs[-1], None, False))

    # -- invariants ------------------------------------------------------------------------

    def _take(self, kind: str) -> list[str]:
        return self.violations.pop(kind, [])

    @invariant()
    def the_intent_names_the_last_dispatched_output(self) -> None:
        found = self._take("dispatch")
        assert not found, "\n".join(found)

    @invariant()
    def no_pod_is_given_a_plan_the_intent_does_not_name(self) -> None:
        found = self._take("applies")
        assert not found, "\n".join(found)

    @invariant()
    def recovery_applies_only_to_bootstrap_pods(self) -> None:
        found = self._take("recovery")
        assert not found, "\n".join(found)

    @invariant()
    def agents_never_fence_out_the_current_term(self) -> None:
        found = self._take("fencing")
        assert not found, "\n".join(found)

    @invariant()
    def a_publication_publishes_the_output_the_intent_names(self) -> None:
        found = self._take("publication")
        assert not found, "\n".join(found)

    @invariant()
    def the_acknowledged_intent_has_a_checkpoint_after_publication(self) -> None:
        found = self._take("checkpoint")
        assert not found, "\n".join(found)

    @invariant()
    def a_term_the_elector_ended_applies_nothing(self) -> None:
        found = self._take("ended")
        assert not found, "\n".join(found)

    @invariant()
    def no_write_after_the_lease_is_gone(self) -> None:
        found = inv.writes_after_lease_gone(self.writes, self.gone_at)
        assert not found, "\n".join(found)

    def teardown(self) -> None:
        for agent in [a for a in RECORDERS if a.startswith(f"haptic-model/{self.name}/")]:
            del RECORDERS[agent]
        for term in self.terms:
            with contextlib.suppress(Exception):
                term.pipeline.stop(drain=False)
            term.pipeline.gate.close()
            term.deployer.close()
            term.deployer.pool.close()


def recovery_retry_delay(monkeypatch: pytest.MonkeyPatch) -> None:
    """Recovery retries after 2 s in production; the model waits for every attempt."""
    import controller.recovery

    if hasattr(controller.recovery, "RETRY_DELAY"):
        monkeypatch.setattr(controller.recovery, "RETRY_DELAY", 0.01)


@pytest.mark.timeout(120 + EXAMPLES * 10 + (900 if SHRINK else 0))
def test_term_protocol_model(api: ApiServer, monkeypatch: pytest.MonkeyPatch) -> None:
    recovery_retry_delay(monkeypatch)
    TermModel.server = api
    run_state_machine_as_test(
        TermModel,
        settings=settings(
            max_examples=EXAMPLES,
            stateful_step_count=STEPS,
            deadline=None,
            derandomize=not RANDOM,
            database=None,
            suppress_health_check=list(HealthCheck),
            print_blob=True,
            phases=[p for p in Phase if SHRINK or p not in (Phase.shrink, Phase.explain)],
        ),
    )


# -- the holes the model finds, as fixed sequences of its rules ----------------------------------


class Drawn:
    """Stands in for hypothesis' `data` in a fixed sequence: every draw returns `value`."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def draw(self, strategy: Any, label: str | None = None) -> Any:
        return self.value


def run_steps(api: ApiServer, steps: Callable[[TermModel], None]) -> None:
    TermModel.server = api
    model = TermModel()
    try:
        model.first_term()
        steps(model)
    finally:
        model.teardown()


def test_a_reverted_change_is_named_by_the_intent(api: ApiServer) -> None:
    """A -> B -> A within one term: the intent names A again before A is re-applied."""

    def steps(model: TermModel) -> None:
        model.deploy(Drawn(0))  # A
        model.render_new_plan()
        model.deploy(Drawn(0))  # B
        model.render_previous_plan_again(Drawn(0))
        model.deploy(Drawn(0))  # A again
        model.the_intent_names_the_last_dispatched_output()

    run_steps(api, steps)


def test_receipts_absorbed_during_a_publication_reach_the_next_one(api: ApiServer) -> None:
    """A deployment of B runs while a publication of A is between its read of the receipts
    and its checkpoint write; B's receipts must survive into the next publication of B."""

    def steps(model: TermModel) -> None:
        model.deploy(Drawn(0))  # A, acknowledged
        model.render_new_plan()  # B queued
        model.render_previous_plan_again(Drawn(0))  # A queued, the current render
        model.publish_while_a_deployment_runs()  # publication of A; B deployed meanwhile
        model.render_previous_plan_again(Drawn(1))  # B is the current render again
        model.publish()
        model.the_acknowledged_intent_has_a_checkpoint_after_publication()

    run_steps(api, steps)


def test_a_recovery_apply_never_lands_on_a_pod_configured_since(api: ApiServer) -> None:
    """Recovery hands the intent's checkpoint to a bootstrap pod; a good render is deployed
    to every pod (the bootstrap one included) before the recovery task runs. The recovery
    apply must then be refused, and must not re-record the older intent."""

    def steps(model: TermModel) -> None:
        model.deploy(Drawn(0))  # A everywhere
        model.publish()  # A's checkpoint
        model.add_bootstrap_pod()  # its push of A is never run: the term ends
        model.run_recovery()  # a new term, rendering broken: recovery of A to the new pod
        recovery = [d for d in model.queue if d.recovery]
        assert recovery, "premise: recovery handed over a deployment"
        model.render_new_plan()  # rendering works again: B
        current = [d for d in model.queue if d.term is model.current and not d.recovery]
        model.queue.remove(current[-1])
        model._deliver(current[-1])  # B everywhere, the new pod included
        model.queue.remove(recovery[0])
        model._deliver(recovery[0])  # the recovery task runs last
        model.recovery_applies_only_to_bootstrap_pods()
        intent = model.store.read_intent()
        assert intent is not None and intent.plan_id == current[-1].output.plan_id, (
            "recovery re-recorded an older intent over the current render's"
        )

    run_steps(api, steps)


def test_a_recreated_lease_at_the_claimed_epoch_still_outranks_the_old_term(
    api: ApiServer,
) -> None:
    """The first term (epoch 1) deploys three times; the leader Lease is deleted and a
    replica that never saw an epoch acquires the new one at epoch 1 again. Its term must
    outrank the old one on the agents (before the fix they refused it: stale_sequence)."""

    def steps(model: TermModel) -> None:
        for _ in range(2):
            model.deploy(Drawn(0))
            model.render_new_plan()
        model.deploy(Drawn(0))
        model.recreate_the_leader_lease()
        model.render_new_plan()
        while model.queue:
            model.deploy(Drawn(0))
        model.agents_never_fence_out_the_current_term()

    run_steps(api, steps)


def test_a_deployment_queued_before_the_elector_ended_the_term_applies_nothing(
    api: ApiServer,
) -> None:
    """Issue 19: deployments run in place, fenced by the term itself. A is deployed, B is
    rendered and queued, then the elector ends the term while the Lease still names it; B's
    deployment runs late and must give no pod anything (before the fix the in-place fence
    read only the Lease, which still named the term)."""

    def steps(model: TermModel) -> None:
        model.deploy(Drawn(0))  # A everywhere
        model.render_new_plan()  # B queued
        model.the_elector_ends_the_term()
        model.deploy(Drawn(0))  # B's deployment runs after the term ended
        model.a_term_the_elector_ended_applies_nothing()
        model.no_write_after_the_lease_is_gone()

    run_steps(api, steps)

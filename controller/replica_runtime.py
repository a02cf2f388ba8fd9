"""The controller process model: each replica is a Celery worker that also runs the elector.

A consumer bootstep (enabled with `celery -A haptic_site worker --leader-election`) starts,
once per worker process:

* the all-replica components (`ReplicaComponents`, e.g. the watch caches), and
* the election supervisor thread. For each term this replica wins, it starts consuming the
  leader queue and starts the leader-only components (`LeaderComponents`) with the term;
  when the term ends (lost lease, renew deadline, graceful stop) it cancels the queue
  consumer and stops those components before the Lease can pass to another replica.

Tasks on the leader queue run in this process (use `--pool threads` or `--pool solo`, not
prefork) so they can see the caches and the local term; see controller.leader_tasks.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import click
from celery import Celery, bootsteps
from kubernetes import client

from config import env
from controller.election.elector import ElectionCallbacks, LeaderElector
from controller.election.events import EventRecorder
from controller.election.identity import replica_identity, replica_user_agent
from controller.election.lease_store import KubeLeaseStore
from controller.election.lease_watch import LeaseWatch
from controller.election.metrics import default_metrics
from controller.election.rounds import ElectionSupervisor
from controller.election.template_config import (
    ElectionConfigFollower,
    Follow,
    FollowDecision,
    judge_election_config,
    read_template_config,
)
from controller.election.term import FencingToken, Term
from controller.election.timing import ElectionSettings
from controller.kubeclient import from_kubeconfig

log = logging.getLogger(__name__)

DEFAULT_LEADER_QUEUE = "leader"

StartFn = Callable[[Term], None]
StopFn = Callable[[Term], None]


# -- component registries ---------------------------------------------------------------


@dataclass(frozen=True)
class _Component:
    name: str
    start: Callable[..., None]
    stop: Callable[..., None] | None
    drain: Callable[..., None] | None = None


class _Registry:
    """A class-level list of components; each subclass holds its own list and lock."""

    _components: list[_Component]
    _lock: threading.Lock

    @classmethod
    def registered(cls) -> list[_Component]:
        with cls._lock:
            return list(cls._components)

    @classmethod
    def clear(cls) -> None:
        with cls._lock:
            cls._components.clear()


class LeaderComponents(_Registry):
    """Leader-only components: `start_fn(term)` at the start of every term this replica wins,
    `stop_fn(term)` when it ends. `term.token` is the fencing token; `term.is_valid()` and
    `term.wait_ended()` let long-running work notice the end by itself. Both functions run
    on the elector thread and must return promptly (start threads, do not block).

    `drain_fn(term)`, if given, runs on a graceful worker stop while the term still renews
    (ADR-0033: finish and publish what was dispatched before releasing the Lease); all
    drains together are bounded by `ReplicaRuntime.drain_timeout` (15 s)."""

    _components: list[_Component] = []
    _lock = threading.Lock()

    @classmethod
    def register(
        cls,
        start_fn: StartFn,
        stop_fn: StopFn | None = None,
        name: str = "",
        drain_fn: StopFn | None = None,
    ) -> None:
        with cls._lock:
            cls._components.append(_Component(name or _name(start_fn), start_fn, stop_fn, drain_fn))


class ReplicaComponents(_Registry):
    """All-replica components (watch caches...): `start_fn(runtime)` once per process at
    worker start, `stop_fn(runtime)` at worker shutdown."""

    _components: list[_Component] = []
    _lock = threading.Lock()

    @classmethod
    def register(
        cls,
        start_fn: Callable[[ReplicaRuntime], None],
        stop_fn: Callable[[ReplicaRuntime], None] | None = None,
        name: str = "",
    ) -> None:
        with cls._lock:
            cls._components.append(_Component(name or _name(start_fn), start_fn, stop_fn))


def _name(fn: Callable[..., Any]) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


# -- configuration ----------------------------------------------------------------------


@dataclass(frozen=True)
class RuntimeConfig:
    identity: str
    namespace: str
    template_name: str
    leader_queue: str
    kubeconfig: str
    # The cluster of the Ingresses, Services and HAProxy pods when it is not the cluster of
    # the template config, Leases and checkpoints (seed 004: two control planes, one fleet).
    workload_kubeconfig: str = ""

    @classmethod
    def from_environment(cls) -> RuntimeConfig:
        """POD_NAME, HAPTIC_NAMESPACE, HAPTIC_TEMPLATE_CONFIG, HAPTIC_LEADER_QUEUE,
        HAPTIC_KUBECONFIG (empty: in-cluster config) and HAPTIC_WORKLOAD_KUBECONFIG (empty:
        the workload lives in the same cluster)."""
        return cls(
            identity=replica_identity(),
            namespace=env.namespace(),
            template_name=env.template_config(),
            leader_queue=leader_queue_name(),
            kubeconfig=env.kubeconfig(),
            workload_kubeconfig=env.workload_kubeconfig(),
        )


def leader_queue_name() -> str:
    return env.leader_queue()


# -- the runtime of one replica ----------------------------------------------------------


class QueueSwitch:
    """Adds and cancels the leader-queue consumer from the elector thread.

    The consumer belongs to the worker's event loop; `call_soon` hands the change to that
    loop (and wakes it). We wait a bounded time for the loop to apply it: messages already
    reserved are still fenced by their tasks, so a slow loop delays nothing that matters.
    """

    def __init__(self, queue: str, wait: float = 1.0):
        self.queue = queue
        self.wait = wait
        self._consumer: Any = None
        self.consuming = False
        self.closed = False

    def attach(self, consumer: Any) -> None:
        self._consumer = consumer

    def add(self) -> bool:
        self.consuming = True
        # Not waited for: the elector thread must get back to renewing.
        return self._call(lambda c: c.add_task_queue(self.queue), wait=False)

    def cancel(self) -> bool:
        self.consuming = False
        return self._call(lambda c: c.cancel_task_queue(self.queue))

    def close_from_loop(self) -> None:
        """On worker shutdown, from the consumer's own thread (whose loop no longer runs
        callbacks): cancel directly, and make later add/cancel calls no-ops."""
        self.closed = True
        consumer = self._consumer
        if consumer is not None and self.consuming:
            self.consuming = False
            try:
                consumer.cancel_task_queue(self.queue)
            except Exception:
                log.exception("could not cancel the leader queue consumer")

    def _call(self, fn: Callable[[Any], None], wait: bool = True) -> bool:
        consumer = self._consumer
        if consumer is None or self.closed:
            return False
        done = threading.Event()

        def apply() -> None:
            try:
                fn(consumer)
            finally:
                done.set()

        consumer.call_soon(apply)
        return done.wait(self.wait) if wait else True


class ReplicaRuntime:
    """Elector, all-replica components and the per-term leader work of one process.

    Without explicit `settings` the election settings come from the template config, and
    follow it (controller.election.template_config): a refused leaderElection block is
    reported and the replica does not elect until it is fixed; new timings are followed
    without a restart."""

    def __init__(
        self,
        cfg: RuntimeConfig,
        api_client: client.ApiClient,
        settings: ElectionSettings | None = None,
        queue_switch: QueueSwitch | None = None,
        workload_client: client.ApiClient | None = None,
    ):
        self.config = cfg
        # The control plane's own cluster: template config, Leases, Events, checkpoints.
        self.api_client = api_client
        # Where the Ingresses, Services, EndpointSlices and HAProxy pods are watched.
        self.workload_client = workload_client or api_client
        self.queue_switch = queue_switch or QueueSwitch(cfg.leader_queue)
        self.refusal: str | None = None
        if settings is None:
            settings, self.refusal = _initial_settings(api_client, cfg)
        self.settings = settings
        self.store: KubeLeaseStore | None = None
        self.events: EventRecorder | None = None
        self.elector: LeaderElector | None = None
        self.supervisor: ElectionSupervisor | None = None
        if settings is not None:
            self._build_election(settings)
        self.follower = ElectionConfigFollower(
            api_client,
            cfg.namespace,
            cfg.template_name,
            cfg.identity,
            running=lambda: self.settings if self.elector is not None else None,
            on_decision=self._follow,
        )
        self._electing = False
        self._term: Term | None = None
        self._work: TermWork | None = None
        self._started_replica: list[_Component] = []
        self._lock = threading.Lock()
        self._shut_down = False

    def _build_election(self, settings: ElectionSettings) -> None:
        cfg = self.config
        self.store = KubeLeaseStore(self.api_client, cfg.namespace, settings.lease_name)
        store = self.store
        self.events = EventRecorder(
            self.api_client, cfg.namespace, settings.lease_name, cfg.identity, lambda: store.uid
        )
        self.elector = LeaderElector(
            store,
            cfg.identity,
            settings.timing,
            callbacks=ElectionCallbacks(
                on_started_leading=self._on_started_leading,
                on_stopped_leading=self._on_stopped_leading,
            ),
            metrics=default_metrics(),
            events=self.events,
        )
        # The Lease watch wakes a follower when the Lease is released (a hand-over at once).
        self.supervisor = ElectionSupervisor(
            self.elector, watch=LeaseWatch(self.api_client, self.elector)
        )

    def _follow(self, decision: FollowDecision) -> None:
        """A change of the template config's leaderElection block (informer thread)."""
        with self._lock:
            if self._shut_down:
                return
            if decision.action is Follow.START and decision.settings is not None:
                self.settings, self.refusal = decision.settings, None
                self._build_election(decision.settings)
                self._start_electing()
            elif decision.action is Follow.RETIME and decision.settings is not None:
                assert self.elector is not None
                self.settings = decision.settings
                self.elector.set_timing(decision.settings.timing)

    def _start_electing(self) -> None:
        # Called with self._lock held.
        if self._electing or self.supervisor is None:
            return
        self._electing = True
        self.supervisor.start()
        assert self.settings is not None
        log.info("%s: elector started on lease %s", self.identity, self.settings.lease_name)

    @property
    def identity(self) -> str:
        return self.config.identity

    def current_term(self) -> Term | None:
        """The term this process holds and may still act on, else None."""
        term = self._term
        return term if term is not None and term.is_valid() else None

    def current_token(self) -> FencingToken | None:
        term = self.current_term()
        return term.token if term is not None else None

    def start(self) -> None:
        for component in ReplicaComponents.registered():
            try:
                component.start(self)
                self._started_replica.append(component)
            except Exception:
                log.exception("all-replica component %s failed to start", component.name)
        with self._lock:
            self._start_electing()
        if self.refusal is not None:
            log.error("%s: not electing: %s", self.identity, self.refusal)
        self.follower.start()

    drain_timeout = 15.0

    def shutdown(self, timeout: float = 10.0) -> None:
        """Graceful stop: leader components drain (the term still renews), leader work
        stops, the Lease is released, then the all-replica components stop."""
        with self._lock:
            if self._shut_down:
                return
            self._shut_down = True
        self._drain()
        self.follower.stop()
        if self._electing and self.supervisor is not None:
            self.supervisor.stop(timeout)
        for component in reversed(self._started_replica):
            if component.stop is not None:
                try:
                    component.stop(self)
                except Exception:
                    log.exception("all-replica component %s failed to stop", component.name)
        if self.events is not None:
            self.events.close()

    def _drain(self) -> None:
        work = self._work
        if work is not None and work.term.is_valid():
            work.drain(self.drain_timeout)

    def _on_started_leading(self, term: Term) -> None:
        # Components start on their own thread: a slow start must not delay renewals.
        work = TermWork(term, LeaderComponents.registered(), self.identity)
        with self._lock:
            self._term = term
            self._work = work
        self.queue_switch.add()
        work.start()

    def _on_stopped_leading(self, term: Term, reason: str) -> None:
        # Stop taking new leader work first, then tear down what runs.
        self.queue_switch.cancel()
        with self._lock:
            work = self._work if self._work is not None and self._work.term is term else None
            if work is not None:
                self._work = None
            if self._term is term:
                self._term = None
        if work is not None:
            work.stop()
        log.info("%s: leader work stopped (%s)", self.identity, reason)


class TermWork:
    """The leader components of one term: started in order on a thread of their own,
    drained on a graceful stop, stopped exactly once in reverse order.

    A component whose start returns after the term was stopped is stopped at once, so a
    slow start never leaves work running past its term."""

    def __init__(self, term: Term, components: list[_Component], identity: str):
        self.term = term
        self._components = components
        self._lock = threading.Lock()
        self._started: list[_Component] = []
        self._stopped = False
        self._thread = threading.Thread(
            target=self._start_all, name=f"term-{identity}-{term.token.epoch}", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def _start_all(self) -> None:
        for component in self._components:
            with self._lock:
                if self._stopped or not self.term.is_valid():
                    return
            try:
                component.start(self.term)
            except Exception:
                log.exception("leader component %s failed to start", component.name)
                continue
            with self._lock:
                if not self._stopped:
                    self._started.append(component)
                    continue
            self._stop_one(component)

    def drain(self, timeout: float) -> None:
        """Drain the started components, all within `timeout` (one bound, not one per step)."""
        deadline = time.monotonic() + timeout
        self._thread.join(timeout)
        with self._lock:
            drains = [c for c in self._started if c.drain is not None]
        if not drains:
            return

        def run() -> None:
            for component in drains:
                if not self.term.is_valid():
                    return  # renewal failed: the drain ends with the term
                try:
                    assert component.drain is not None
                    component.drain(self.term)
                except Exception:
                    log.exception("leader component %s failed to drain", component.name)

        worker = threading.Thread(target=run, name=f"{self._thread.name}-drain", daemon=True)
        worker.start()
        worker.join(max(0.0, deadline - time.monotonic()))
        if worker.is_alive():
            log.warning("drain of %r did not finish in %.0fs", self.term, timeout)

    def stop(self, start_wait: float = 0.5) -> None:
        # Give a start in progress a moment, but never wait long: the term is over.
        self._thread.join(start_wait)
        with self._lock:
            self._stopped = True
            started, self._started = self._started, []
        for component in reversed(started):
            self._stop_one(component)

    def _stop_one(self, component: _Component) -> None:
        if component.stop is None:
            return
        try:
            component.stop(self.term)
        except Exception:
            log.exception("leader component %s failed to stop", component.name)


_runtime: ReplicaRuntime | None = None


def current_runtime() -> ReplicaRuntime | None:
    """The runtime of this worker process, if it runs the elector."""
    return _runtime


# -- Celery wiring ------------------------------------------------------------------------


class LeaderElectionStep(bootsteps.StartStopStep):
    """Consumer bootstep: starts the replica runtime once; releases on worker shutdown.

    Consumer steps restart when the broker connection drops; the elector must not, so the
    runtime is created on the first start and only the consumer reference is refreshed.
    The leader queue stays selected in app.amqp.queues, so a reconnected consumer keeps
    consuming it while the term lasts.
    """

    requires = ("celery.worker.consumer.tasks:Tasks",)

    def __init__(self, parent: Any, leader_election: bool = False, **kwargs: Any):
        self.enabled = bool(leader_election)
        super().__init__(parent, **kwargs)

    def start(self, c: Any) -> None:
        global _runtime
        if _runtime is None:
            cfg = RuntimeConfig.from_environment()
            _select_without(c, cfg.leader_queue)
            api_client = from_kubeconfig(cfg.kubeconfig)
            workload = from_kubeconfig(cfg.workload_kubeconfig) if cfg.workload_kubeconfig else None
            # Every request names the replica, so an audit log attributes writes to it.
            for named in (api_client, workload):
                if named is not None:
                    named.user_agent = replica_user_agent(cfg.identity)
            # Settings from the template config, followed while running (see ReplicaRuntime).
            _runtime = ReplicaRuntime(cfg, api_client, workload_client=workload)
            _runtime.queue_switch.attach(c)
            pool = type(getattr(c, "pool", None)).__module__
            if "prefork" in pool:
                log.error("leader tasks need --pool threads or solo to see the local term")
            _runtime.start()
        else:
            _runtime.queue_switch.attach(c)

    def stop(self, c: Any) -> None:
        # Called on connection restarts too; only a closing blueprint means shutdown.
        if c.blueprint.state in (bootsteps.CLOSE, bootsteps.TERMINATE):
            self.shutdown(c)

    def shutdown(self, c: Any) -> None:
        if _runtime is not None:
            # We are on the consumer's thread and its loop has stopped: a queue change
            # handed to the loop would wait in vain, so cancel here first.
            _runtime.queue_switch.close_from_loop()
            _runtime.shutdown()


def _initial_settings(
    api_client: client.ApiClient, cfg: RuntimeConfig
) -> tuple[ElectionSettings | None, str | None]:
    """The template config's election settings at start, or why there are none yet.

    Never defaults in place of a refused block; an unreadable config is not a refusal
    either: the follower's first list supplies the settings (the replica waits until then).
    """
    try:
        obj = read_template_config(api_client, cfg.namespace, cfg.template_name, timeout=5.0)
    except Exception as exc:
        return None, f"cannot read election settings from {cfg.template_name}: {exc}"
    verdict = judge_election_config((obj or {}).get("spec"))
    return verdict.settings, verdict.error


def _select_without(c: Any, leader_queue: str) -> None:
    """Pin the worker's queue selection to what it consumes now, minus the leader queue.

    Without an explicit selection Celery consumes every known queue, and a queue becomes
    known when a task is routed to it: a follower that sent a leader task would consume
    the leader queue after its next reconnect. Only a term adds it."""
    queues = c.app.amqp.queues
    names = [name for name in queues.consume_from if name != leader_queue]
    queues.select(names)
    if c.task_consumer is not None and any(q.name == leader_queue for q in c.task_consumer.queues):
        c.cancel_task_queue(leader_queue)


def install(app: Celery) -> None:
    """Register the bootstep and its worker option on `app` (idempotent)."""
    if LeaderElectionStep in app.steps["consumer"]:
        return
    app.steps["consumer"].add(LeaderElectionStep)
    app.user_options["worker"].add(
        click.Option(
            ["--leader-election"],
            is_flag=True,
            default=False,
            help="Run the haptic elector and leader-only work in this worker.",
        )
    )
    # The fenced leader tasks are part of the process model.
    import controller.leader_tasks  # noqa: F401

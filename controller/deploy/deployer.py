"""The parallel deployer: every HAProxy pod gets the output through its agent at once.

Pods are applied to side by side on a bounded thread pool (16), each over its agent's one
kept connection (`AgentPool`). Each pod is diffed against the state its agent reports (the
state its last apply returned, when nobody applied since), so an endpoint change is one
request per pod carrying all of that pod's runtime operations, which the agent runs in one
runtime-API session. The apply carries the term's fencing token (holder, epoch, sequence)
so agents refuse a deposed term. Results come back as pod outcomes with the receipt each
acknowledgement proves.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from agents.client import AgentClient, AgentConflict, AgentError, AgentRejected, AgentState
from contract import PodAction
from controller.deploy.diff import (
    BOOTSTRAP,
    Apply,
    Skip,
    decide_pod,
    encode_manifest,
    encoded_files,
    manifest_head,
    revert_manifest,
    whole,
)
from controller.render import RenderOutput
from controller.retained.fleet import PodReport
from controller.retained.receipts import PodReceipt, acknowledgement

log = logging.getLogger(__name__)

# An agent's refusals of edits it cannot make on its files (agents/manifest.py): the apply is
# sent again with the bytes.
BASE_REFUSALS = frozenset({"base_unavailable", "bad_patch", "digest_mismatch", "size_mismatch"})


@dataclass(frozen=True)
class HAProxyPod:
    name: str
    uid: str
    ip: str


@dataclass(frozen=True)
class PodOutcome:
    pod: HAProxyPod
    action: PodAction
    state: AgentState | None
    error: str | None = None
    reason: str | None = None  # the agent's machine-readable refusal reason
    unreachable: bool = False  # no answer at all (not listening yet, connection lost)

    def __post_init__(self) -> None:
        # The agent's `result` arrives as text: one type from here on.
        object.__setattr__(self, "action", PodAction(self.action))

    @property
    def summary(self) -> str:
        """What the agent did, `refused: <reason>` (a 409: nothing written) or
        `failed: <why>`."""
        if self.action is PodAction.REFUSED:
            return f"refused: {self.reason}: {self.error}"
        return self.action.value if not self.error else f"failed: {self.error}"

    @property
    def report(self) -> PodReport | None:
        if self.state is None:
            return None
        # The state an apply returns was read after the agent proved uptake.
        return PodReport.from_agent_state(self.pod.name, self.pod.uid, self.state.raw, True)

    def receipt(self, output: RenderOutput) -> PodReceipt | None:
        report = self.report
        return acknowledgement(report, output.plan_id, output.checksum) if report else None


def _failed(pod: HAProxyPod, state: AgentState | None, exc: AgentError) -> PodOutcome:
    # An AgentError without a status is one no agent answered (agents/client.py).
    return PodOutcome(pod, PodAction.FAILED, state, error=str(exc), unreachable=exc.status is None)


class AgentPool:
    """One client per agent address, each keeping one HTTP/1.1 connection alive across
    deployments and state reads (agents/client.py); `forget` drops those of pods gone."""

    def __init__(self, port: int, token: Callable[[], str], scheme: str = "http") -> None:
        self.port = port
        self.scheme = scheme
        self._token = token
        self._clients: dict[str, AgentClient] = {}
        self._lock = threading.Lock()

    def url(self, pod: HAProxyPod) -> str:
        return f"{self.scheme}://{pod.ip}:{self.port}"

    def client(self, pod: HAProxyPod) -> AgentClient:
        url = self.url(pod)
        with self._lock:
            existing = self._clients.get(url)
            if existing is None:
                existing = AgentClient(url, self._token(), timeout=5.0, apply_timeout=30.0)
                self._clients[url] = existing
            return existing

    def forget(self, keep: Iterable[HAProxyPod]) -> None:
        urls = {self.url(p) for p in keep}
        with self._lock:
            for url in list(self._clients):
                if url not in urls:
                    self._clients.pop(url).close()

    def close(self) -> None:
        with self._lock:
            for c in self._clients.values():
                c.close()
            self._clients.clear()


@dataclass
class _Deployment:
    """One deployment of an output: what every pod's apply shares. The files' encoding,
    nearly all of a manifest's bytes, is made once, by the first pod that needs it."""

    output: RenderOutput
    holder: str
    epoch: int
    sequence: int
    known_plans: Mapping[str, Mapping[str, Any]]
    _files: dict[bool, bytes] = field(default_factory=dict, init=False)  # by from_base
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def body(self, decision: Apply, expect_bootstrap: bool = False) -> bytes:
        with self._lock:
            files = self._files.get(decision.from_base)
            if files is None:
                files = self._files[decision.from_base] = encoded_files(
                    self.output, decision.from_base
                )
        head = manifest_head(
            self.output, decision, self.holder, self.epoch, self.sequence, expect_bootstrap
        )
        return encode_manifest(head, files)


class Deployer:
    def __init__(self, pool: AgentPool, max_parallel: int = 16) -> None:
        self.pool = pool
        self._executor = ThreadPoolExecutor(max_workers=max_parallel, thread_name_prefix="deploy")
        self._sequence = itertools.count(1)
        self._last_state: dict[str, AgentState] = {}  # pod uid -> state after our last apply

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)

    def deploy(
        self,
        output: RenderOutput,
        pods: Sequence[HAProxyPod],
        holder: str,
        epoch: int,
        known_plans: Mapping[str, Mapping[str, Any]],
        verify: bool = False,
        bootstrap_only: bool = False,
    ) -> list[PodOutcome]:
        """Apply to every pod in parallel; `verify` re-hashes each pod's files first (drift
        prevention), so a drifted pod reports a violation and gets a full apply.
        `bootstrap_only` (recovery) sends the bootstrap expectation itself: the agent refuses
        (409 not_bootstrap) a pod that is no longer bootstrap when the apply arrives."""
        one = _Deployment(output, holder, epoch, next(self._sequence), known_plans)
        if bootstrap_only:
            futures = [self._executor.submit(self._deploy_bootstrap, pod, one) for pod in pods]
        else:
            futures = [self._executor.submit(self._deploy_pod, pod, one, verify) for pod in pods]
        return [f.result() for f in futures]

    def _deploy_bootstrap(self, pod: HAProxyPod, one: _Deployment) -> PodOutcome:
        # No read decides the expectation: a read is already stale when the apply lands.
        body = one.body(BOOTSTRAP, expect_bootstrap=True)
        outcome = self._send(self.pool.client(pod), pod, None, body, BOOTSTRAP.reason)
        self._remember(pod, outcome)
        return outcome

    def _deploy_pod(self, pod: HAProxyPod, one: _Deployment, verify: bool) -> PodOutcome:
        client = self.pool.client(pod)
        cached = self._last_state.get(pod.uid)
        try:
            # The state the last apply returned is current unless someone else applied
            # since; the agent's expected-previous-plan fence tells us, and we re-read.
            reuse = (
                cached is not None and not verify and cached.applied_plan_id != one.output.plan_id
            )
            state = cached if reuse and cached is not None else client.state(verify=verify)
        except AgentError as exc:
            return _failed(pod, None, exc)
        outcome = self._apply(client, pod, state, one)
        if outcome.reason == "unexpected_previous_plan" and reuse:
            try:
                state = client.state()
            except AgentError as exc:
                return _failed(pod, None, exc)
            outcome = self._apply(client, pod, state, one)
        self._remember(pod, outcome)
        return outcome

    def _remember(self, pod: HAProxyPod, outcome: PodOutcome) -> None:
        if outcome.state is not None and not outcome.action.is_error:
            self._last_state[pod.uid] = outcome.state
        else:
            self._last_state.pop(pod.uid, None)

    def _apply(
        self, client: AgentClient, pod: HAProxyPod, state: AgentState, one: _Deployment
    ) -> PodOutcome:
        decision = decide_pod(
            state.applied_plan_id,
            state.applied_checksum,
            state.invariant_violation,
            one.output,
            one.known_plans,
        )
        if isinstance(decision, Skip):
            return PodOutcome(pod, PodAction.SKIPPED, state)
        assert isinstance(decision, Apply)
        outcome = self._send(client, pod, state, one.body(decision), decision.reason)
        if decision.from_base and outcome.reason in BASE_REFUSALS:
            # The pod's files are not the base the edits were made against (changed behind
            # its agent): the same apply with every file's bytes.
            decision = whole(decision)
            outcome = self._send(client, pod, state, one.body(decision), decision.reason)
        return outcome

    def _send(
        self,
        client: AgentClient,
        pod: HAProxyPod,
        state: AgentState | None,
        body: dict[str, Any] | bytes,
        why: str,
    ) -> PodOutcome:
        try:
            result = client.apply(body)
        except AgentConflict as exc:
            return PodOutcome(pod, PodAction.REFUSED, state, error=str(exc), reason=exc.reason)
        except AgentRejected as exc:
            error = exc.error_text or str(exc)
            return PodOutcome(pod, PodAction.FAILED, state, error=error, reason=exc.reason)
        except AgentError as exc:
            return _failed(pod, state, exc)
        log.info("pod %s: %s (%s)", pod.name, result.result, why)
        return PodOutcome(pod, result.result, result.state)

    def read_states(self, pods: Sequence[HAProxyPod], verify: bool) -> list[PodReport]:
        """Every pod's state in parallel; an unreachable agent is reported as such."""

        def read(pod: HAProxyPod) -> PodReport:
            try:
                state = self.pool.client(pod).state(verify=verify)
            except AgentError:
                return PodReport.unreachable(pod.name, pod.uid)
            check = state.verification or {}
            verified = verify and bool(check.get("files_ok")) and bool(check.get("worker_ok"))
            return PodReport.from_agent_state(pod.name, pod.uid, state.raw, verified)

        return list(self._executor.map(read, pods))

    def revert_to_last_known_good(
        self, pod: HAProxyPod, state: AgentState, holder: str, epoch: int
    ) -> PodOutcome:
        """Ask `pod`'s agent to serve its last-known-good plan again (a plan the render gate
        refused after dispatch; seed 003's RenderGate)."""
        lkg, applied = state.last_known_good_plan_id, state.applied_plan_id
        if lkg is None or applied is None or lkg == applied:
            return PodOutcome(pod, PodAction.SKIPPED, state, reason="no other last-known-good plan")
        client = self.pool.client(pod)
        body = revert_manifest(lkg, applied, holder, epoch, next(self._sequence))
        try:
            result = client.apply(body)
        except AgentConflict as exc:
            return PodOutcome(pod, PodAction.REFUSED, state, error=str(exc), reason=exc.reason)
        except AgentError as exc:
            return _failed(pod, state, exc)
        self._last_state.pop(pod.uid, None)
        log.info("pod %s: reverted to last-known-good %s", pod.name, lkg)
        return PodOutcome(pod, result.result, result.state)

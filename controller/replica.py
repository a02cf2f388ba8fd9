"""Wiring of one controller replica into the worker's component registries.

All replicas: the watch side (caches, reconciler debounce, health server), the render gate,
the plan memory and the agent pool. Leader only: one `LeaderPipeline` per term, attached to
the watch side so the caches replay into it at once (seed 003's bootstrap-replay pattern).
The term deploys and publishes on its own threads, in this process, under its fence
(docs/term.md); the leader queue carries only requests from outside it (recovery reviews).
"""

from __future__ import annotations

import base64
import logging
import threading
import uuid
from datetime import UTC, datetime
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from config import env
from contract import CONTROLLER_COMPONENT
from controller.deploy.deployer import AgentPool, Deployer
from controller.election.identity import replica_user_agent
from controller.election.term import Term
from controller.election.timing import parse_duration
from controller.fencing import check_term
from controller.httpstore.store import HTTPStore
from controller.hub.config import HubConfig
from controller.hub.hub import build_hub
from controller.ingressstatus import IngressStatusWriter, fleet_addresses
from controller.kubeclient import secret_data
from controller.leader import LeaderPipeline, LeaderSettings, PlanMemory
from controller.render.warnings import render_warning_reporter, template_status_writer
from controller.rendergate import RenderGate, check_output
from controller.replica_runtime import LeaderComponents, ReplicaComponents, ReplicaRuntime
from controller.retained.checkpoint import API_VERSION, TemplateRef
from controller.statusapplier import StatusApplier, cache_lookup
from controller.templategate import HEALTH_COMPONENT as TEMPLATE_GATE
from controller.templategate import TemplateGate, template_reporter, validation_runner
from controller.watch.replica import ReplicaWatch

log = logging.getLogger(__name__)

COMPONENT = CONTROLLER_COMPONENT


def _seconds(value: Any, default: float) -> float:
    try:
        return parse_duration(value) if value else default
    except ValueError:
        log.warning("ignoring malformed duration %r", value)
        return default


def leader_settings(template: dict[str, Any]) -> LeaderSettings:
    spec = (template.get("spec") or {}).get("controller") or {}
    return LeaderSettings(
        deployment_min_interval=_seconds(spec.get("deploymentMinInterval"), 0.1),
        publish_interval=_seconds(spec.get("configPublishInterval"), 10.0),
        drift_interval=_seconds(spec.get("driftPreventionInterval"), 60.0),
    )


class TemplateEvents:
    """Kubernetes Events on the HAProxyTemplateConfig (render errors, retained config)."""

    def __init__(self, api_client: client.ApiClient, template: TemplateRef, identity: str):
        self.core = client.CoreV1Api(api_client)
        self.template = template
        self.identity = identity

    def record(self, type_: str, reason: str, message: str) -> None:
        now = datetime.now(UTC)
        body = {
            "metadata": {
                "name": f"{self.template.name}.{uuid.uuid4().hex[:12]}",
                "namespace": self.template.namespace,
            },
            "involvedObject": {
                "apiVersion": API_VERSION,
                "kind": "HAProxyTemplateConfig",
                "name": self.template.name,
                "namespace": self.template.namespace,
                "uid": self.template.uid,
            },
            "reason": reason,
            "message": message[:1024],
            "type": type_,
            "count": 1,
            "firstTimestamp": now.isoformat(),
            "lastTimestamp": now.isoformat(),
            "source": {"component": COMPONENT, "host": self.identity},
            "reportingComponent": COMPONENT,
            "reportingInstance": self.identity,
        }
        # Events are reports: a failing write must never stop leader work.
        threading.Thread(target=self._send, args=(body,), daemon=True).start()

    def _send(self, body: dict[str, Any]) -> None:
        try:
            self.core.create_namespaced_event(self.template.namespace, body, _request_timeout=5.0)
        except Exception as exc:
            log.warning("event %s not recorded: %s", body["reason"], exc)


class ControllerReplica:
    def __init__(self, runtime: ReplicaRuntime) -> None:
        self.runtime = runtime
        self.api_client = runtime.api_client
        cfg = runtime.config
        port = env.env_int("HAPTIC_HEALTH_PORT", 8090)
        host = env.env_text("HAPTIC_HEALTH_HOST", "127.0.0.1")
        self.watch = ReplicaWatch(
            self.api_client,
            cfg.namespace,
            cfg.template_name,
            health_address=(host, port) if port else None,
            workload_client=runtime.workload_client,
        )
        # spec.httpResources, fetched only while this replica leads (issue 18).
        self.http_store = HTTPStore(
            self._template,
            self._template_secret,
            health=self.watch.health,
            user_agent=replica_user_agent(runtime.identity),
        )
        self.gate = RenderGate(binary=env.haproxy_bin() or None, on_verdict=self._gate_verdict)
        # A changed template config renders only once its validationTests pass (issue 18).
        self.template_gate = TemplateGate(
            validation_runner(self._haproxy_check, http=lambda: self.http_store.render_view())
        )
        self.watch.health.register_probe(TEMPLATE_GATE, self.template_gate.refusal)
        self.plans = PlanMemory()
        self.pool = AgentPool(port=self._agent_port(), token=self._agent_token)
        self.deployer = Deployer(self.pool)
        self.pipeline: LeaderPipeline | None = None
        self._lock = threading.Lock()
        # Cross-cluster role (seed 004); standalone builds nothing and its fence stays open.
        self.hub = build_hub(HubConfig.from_env(), self.api_client, kick=self._after_promotion)

    def _after_promotion(self) -> None:
        """The hub's kick once the fence is open. The promotion raised the epoch on our
        leader Lease, which ends our fenced term; have the elector see it now so the next
        term (above the old Active's epoch) starts without waiting a retry period. The
        reconcile trigger covers a replica that holds no term."""
        self._recheck_elector()
        self.watch.reconciler.trigger_now()

    def _recheck_elector(self) -> None:
        """Have the elector look at the Lease now (after a promotion or a Reclaim)."""
        if self.runtime.elector is not None:  # None while a refused config keeps it idle
            self.runtime.elector.recheck()

    # -- template-derived settings ----------------------------------------------------

    def _template(self) -> dict[str, Any] | None:
        return self.watch.caches.template_config

    def _agent_port(self) -> int:
        template = self._template() or {}
        return int(((template.get("spec") or {}).get("agent") or {}).get("port") or 8405)

    def _agent_token(self) -> str:
        """The agent bearer token from the Secret the template names (or HAPTIC_AGENT_TOKEN)."""
        if env.agent_token():
            return env.agent_token()
        template = self._template() or {}
        ref = ((template.get("spec") or {}).get("agent") or {}).get("tokenSecretRef") or {}
        name = ref.get("name", "haptic-agent-token")
        key = ref.get("key", "token")
        try:
            secret = client.CoreV1Api(self.api_client).read_namespaced_secret(
                name, self.runtime.config.namespace, _request_timeout=5.0
            )
        except ApiException as exc:
            raise RuntimeError(f"agent token Secret {name}: HTTP {exc.status}") from exc
        return base64.b64decode((secret.data or {})[key]).decode().strip()

    def _template_secret(self, name: str) -> dict[str, str] | None:
        """A Secret's decoded data in the template config's namespace (HTTP resource auth)."""
        return secret_data(self.api_client, self.runtime.config.namespace, name)

    def _render_kwargs(self) -> dict[str, Any]:
        """RenderInput keyword arguments: the watched objects, the HTTP store's bodies and
        the accepted template config (the newest whose validation tests passed)."""
        kwargs = self.watch.caches.snapshot().render_kwargs()
        template = self.template_gate.select(kwargs["template_config"]) or {}
        return {
            **kwargs,
            "template_config": template,
            "http_resources": self.http_store.render_view(),
        }

    def _haproxy_check(self, output: Any) -> tuple[bool, str]:
        """`haproxy -c` of a validation test's render (its haproxyValid assertion)."""
        verdict = check_output(output, binary=env.haproxy_bin() or None)
        return verdict.accepted, verdict.output

    def _template_conditions(self) -> list[dict[str, Any]]:
        return list(((self._template() or {}).get("status") or {}).get("conditions") or [])

    def _gate_verdict(self, output: Any, verdict: Any) -> None:
        """The render gate judged a render: its pending HTTP bodies become accepted, or are
        discarded and the leader renders again with the accepted ones."""
        if self.http_store.settle(dict(output.http_digests), verdict.accepted):
            with self._lock:
                pipeline = self.pipeline
            if pipeline is not None:
                pipeline.request_render()

    # -- all-replica lifecycle --------------------------------------------------------

    def start(self) -> None:
        self.watch.start()
        self.hub.start()

    def stop(self) -> None:
        self.hub.stop()
        self.watch.stop()
        self.deployer.close()
        self.pool.close()
        self.gate.close()
        self.http_store.close()

    # -- per term -----------------------------------------------------------------------

    def start_term(self, term: Term) -> None:
        threading.Thread(target=self._start_term, args=(term,), daemon=True).start()

    def _start_term(self, term: Term) -> None:
        # The caches must know the template before a pipeline can be built.
        self.watch.caches.wait_synced(30)
        template = self._template()
        if template is None or not term.is_valid():
            log.error("term %s: no HAProxyTemplateConfig to lead", term)
            return
        meta = template["metadata"]
        ref = TemplateRef(meta["name"], meta["namespace"], meta["uid"])
        self.pool.port = self._agent_port()
        events = TemplateEvents(self.api_client, ref, self.runtime.identity)
        # ADR-0034: the deployed variant of the gate condition, written only in this term.
        applier = StatusApplier(
            self.runtime.workload_client,
            cache_lookup(self.watch.caches.informer),
            term_valid=term.is_valid,
            check_term=lambda: check_term(self.api_client, term.token),
        )
        caches = self.watch.caches
        ingress_status = IngressStatusWriter(
            self.runtime.workload_client,
            lambda: caches.snapshot().get("ingresses"),
            lambda: fleet_addresses(
                caches.template_config,
                cache_lookup(caches.informer, "services"),
                (p.pod_ip for p in caches.haproxy_pods() if not p.terminating),
            ),
            term_valid=term.is_valid,
            check_term=lambda: check_term(self.api_client, term.token),
        )

        def converged(output: Any) -> None:
            applier.apply(output)
            ingress_status.apply_later(output)  # one PATCH per Ingress: off the deploy path

        pipeline = LeaderPipeline(
            api_client=self.api_client,
            token=term.token,
            template=ref,
            health=self.watch.health,
            gate=self.gate,
            plans=self.plans,
            snapshot=self._render_kwargs,
            haproxy_pods=self.watch.caches.haproxy_pods,
            deployer=self.deployer,
            settings=leader_settings(template),
            term_valid=term.is_valid,
            check_term=lambda: check_term(self.api_client, term.token),
            record_event=events.record,
            write_fence=self.hub.fence.is_open,
            on_converged=converged,
            recheck=self._recheck_elector,
            report_warnings=render_warning_reporter(
                self.runtime.workload_client,
                self.runtime.identity,
                template_status_writer(
                    self.api_client,
                    ref.namespace,
                    ref.name,
                    lambda: check_term(self.api_client, term.token),
                ),
            ),
        )
        self._report_template_verdicts(term, ref, events)
        # A new leader fetches every HTTP resource before its first render.
        self.http_store.begin_term(pipeline.request_render, events.record, term.is_valid)
        with self._lock:
            if not term.is_valid():
                self.http_store.end_term()
                return
            self.pipeline = pipeline
            pipeline.start()
            self.watch.attach_leader(
                lambda _trigger: pipeline.request_render(),
                lambda _pods: pipeline.pods_changed(),
            )

    def _report_template_verdicts(self, term: Term, ref: TemplateRef, events: Any) -> None:
        """This term reports the template gate's verdicts (Event, status condition)."""
        self.template_gate.attach(
            template_reporter(
                self.api_client,
                ref.namespace,
                ref.name,
                events.record,
                lambda: check_term(self.api_client, term.token),
                self._template_conditions,
            )
        )

    def drain_term(self) -> None:
        """Graceful stop while the term still renews: drain, bounded to 15 s."""
        with self._lock:
            pipeline = self.pipeline
        if pipeline is not None:
            pipeline.stop(drain=True)

    def stop_term(self, term: Term) -> None:
        self.watch.detach_leader()
        self.http_store.end_term()
        self.template_gate.attach(None)
        with self._lock:
            pipeline, self.pipeline = self.pipeline, None
        if pipeline is not None:
            pipeline.stop(drain=False)


_replica: ControllerReplica | None = None


def _start_replica(runtime: ReplicaRuntime) -> None:
    global _replica
    _replica = ControllerReplica(runtime)
    _replica.start()


def _stop_replica(runtime: ReplicaRuntime) -> None:
    if _replica is not None:
        _replica.stop()


def _start_leader(term: Term) -> None:
    if _replica is not None:
        _replica.start_term(term)


def _drain_leader(term: Term) -> None:
    if _replica is not None:
        _replica.drain_term()


def _stop_leader(term: Term) -> None:
    if _replica is not None:
        _replica.stop_term(term)


def current_replica() -> ControllerReplica | None:
    return _replica


def install() -> None:
    """Register the controller with the worker's registries (idempotent)."""
    if any(c.name == "controller.replica" for c in ReplicaComponents.registered()):
        return
    ReplicaComponents.register(_start_replica, _stop_replica, name="controller.replica")
    LeaderComponents.register(
        _start_leader, _stop_leader, name="controller.leader", drain_fn=_drain_leader
    )

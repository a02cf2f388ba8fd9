"""Two whole control planes and one shared fleet, on three clusters (started in parallel).

The Active's cluster (A) and the Standby's (B) each keep their own HAProxyTemplateConfig,
Leases and checkpoints; the workload cluster (W) holds the Ingresses, Services, backends and
the HAProxy pods (agent + real haproxy, run by W's node). Each control plane is one
controller replica as a real Celery worker, configured with HAPTIC_KUBECONFIG for its own
cluster, HAPTIC_WORKLOAD_KUBECONFIG for W and HAPTIC_HA_* for its role.

Shared by tests/hub/test_promoted_controller.py and bench/bench_fleet_failover.py.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import kubernetes
from kubernetes.client.exceptions import ApiException

from controller.retained.checkpoint import checkpoint_name
from controller.retained.intent import INTENT_ANNOTATION, MIRRORED_INTENT_ANNOTATION
from controller.retained.store import retained_lease_name
from devstack import stack
from localcluster.testing import ApiServer, start_clusters
from tests.e2e.harness import System, start_system

NS = stack.NAMESPACE
ACTIVE, STANDBY = "ctl-a-0", "ctl-b-0"
# The hub's timings (seconds): issue 10's budget is lease + padding + one poll + 1 s.
HUB = {"lease_duration": 2.0, "renew_deadline": 1.5, "retry_period": 0.5, "padding_seconds": 0.5,
       "promotion_dial_timeout": 0.3, "promotion_grace_period": 2.0, "publish_interval": 5.0,
       "mirror_prune_interval": 1.0}  # fmt: skip
BUDGET = HUB["lease_duration"] + HUB["padding_seconds"] + HUB["retry_period"] + 1.0
GROUP, VERSION = "haproxy-haptic.org", "v1alpha1"
TEMPLATE = "haptic"
BROKEN = "{{ this template does not parse"


@dataclass
class ControlPlanes:
    fleet: System  # W: the workload cluster, its node and the HAProxy pods
    a: ApiServer
    b: ApiServer
    active: stack.Process
    standby: stack.Process
    state_dir: Path

    def stop(self) -> None:
        self.fleet.stop()
        for api in (self.a, self.b):
            api.stop()
        shutil.rmtree(self.state_dir, ignore_errors=True)

    def lease(self, api: ApiServer, name: str) -> kubernetes.client.V1Lease | None:
        try:
            return kubernetes.client.CoordinationV1Api(api.api_client()).read_namespaced_lease(
                name, NS, _request_timeout=5
            )
        except (ApiException, OSError):
            return None

    def holder(self, api: ApiServer, name: str) -> str | None:
        lease = self.lease(api, name)
        return lease.spec.holder_identity if lease is not None else None

    def applied_tokens(self) -> dict[str, dict]:
        """The token of what each HAProxy pod's agent last applied, by pod name."""
        return {
            p.metadata.name: self.fleet.agent_state(p).applied_token or {}
            for p in self.fleet.haproxy_pods(ready_only=False)
        }

    def applied_holders(self) -> set[str | None]:
        """Who wrote what each HAProxy pod's agent last applied."""
        return {t.get("holder") for t in self.applied_tokens().values()}


def custom_object(api: ApiServer, plural: str, name: str) -> dict | None:
    try:
        return kubernetes.client.CustomObjectsApi(api.api_client()).get_namespaced_custom_object(
            GROUP, VERSION, NS, plural, name, _request_timeout=5
        )
    except ApiException:
        return None


def intents(api: ApiServer) -> dict:
    """The intent and the mirrored intent (the floor) on a cluster's retained-state Lease."""
    leases = kubernetes.client.CoordinationV1Api(api.api_client())
    try:
        lease = leases.read_namespaced_lease(retained_lease_name(TEMPLATE), NS)
    except ApiException:
        return {}
    annotations = lease.metadata.annotations or {}
    return {
        key: json.loads(annotations[key])
        for key in (INTENT_ANNOTATION, MIRRORED_INTENT_ANNOTATION)
        if key in annotations
    }


def mirrored_for_recovery(b: ApiServer, checksum: str) -> bool:
    """B holds the re-parented checkpoint of `checksum`, the pointer to its copy, and it as
    the floor (still carried, or adopted already)."""
    template = custom_object(b, "haproxytemplateconfigs", TEMPLATE)
    copy_ = custom_object(b, "haproxycfgs", checkpoint_name(TEMPLATE, checksum))
    ordinary = custom_object(b, "haproxycfgs", TEMPLATE)
    if template is None or copy_ is None or ordinary is None:
        return False
    uid = template["metadata"]["uid"]
    pointers = (ordinary.get("status") or {}).get("retainedConfigs") or []
    floors = intents(b)
    return (
        copy_["spec"]["templateUID"] == uid
        and copy_["metadata"]["ownerReferences"][0]["uid"] == uid
        and any(p["uid"] == copy_["metadata"]["uid"] for p in pointers)
        and any(f.get("checksum") == checksum for f in floors.values())
    )


def break_rendering(api: ApiServer) -> None:
    """The cluster's template no longer parses (on B: the mirror leaves its copy alone
    until the Active's template changes)."""
    kubernetes.client.CustomObjectsApi(api.api_client()).patch_namespaced_custom_object(
        GROUP, VERSION, NS, "haproxytemplateconfigs", TEMPLATE,
        {"spec": {"haproxyConfig": {"template": BROKEN}}},
    )  # fmt: skip


def _hub_env(role: str, own: ApiServer, ca: Path, suffix: str) -> dict[str, str]:
    env = {f"HAPTIC_HA_{k.upper()}": str(v) for k, v in HUB.items()}
    env.update(
        HAPTIC_HA_MODE=role,
        HAPTIC_HA_SELF_ENDPOINT=own.url,
        HAPTIC_HA_SELF_CA_BUNDLE_PATH=str(ca),
        # Separate control planes: each its own leader queue.
        HAPTIC_LEADER_QUEUE=f"leader-{role}-{suffix}",
    )
    return env


def start_control_planes(
    name: str, haproxy_replicas: int = 2, start_timeout: float = 30.0
) -> ControlPlanes:
    """W with an `echo` backend and the Ingress `before.example`; A with the configuration
    and the agent token Secret; B with an empty namespace (the mirror fills it)."""
    w, a, b = start_clusters(3, timeout=start_timeout)
    try:
        fleet = start_system(
            name, haproxy_replicas=haproxy_replicas, controllers=0, template=False, api=w
        )
    except BaseException:
        a.stop()
        b.stop()
        raise
    state = Path(tempfile.mkdtemp(prefix="haptic-hub-planes-"))
    started: list[ApiServer] = [a, b]
    try:
        fleet.apply(stack.backend("echo", replicas=1))
        fleet.apply([stack.ingress("echo", "before.example", "echo")])
        stack.apply_objects(a.api_client(), stack.base_objects(fleet.token))
        stack.apply_objects(a.api_client(), [stack.template_config(stack.Timings.short())])
        stack.apply_objects(b.api_client(), stack.base_objects(fleet.token)[:1])
        ca = state / "ca.crt"
        ca.write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
        common = {"HAPTIC_WORKLOAD_KUBECONFIG": str(fleet.api.kubeconfig)}
        active = fleet.start_controller(
            ACTIVE,
            {**common, **_hub_env("active", a, ca, fleet.queue_suffix)},
            kubeconfig=a.kubeconfig,
        )
        standby = fleet.start_controller(
            STANDBY,
            {
                **common,
                **_hub_env("standby", b, ca, fleet.queue_suffix),
                "HAPTIC_HA_ACTIVE_KUBECONFIG": str(a.kubeconfig),
                # Read the agent token from the mirrored Secret, as a real Standby would.
                "HAPTIC_AGENT_TOKEN": "",
            },
            kubeconfig=b.kubeconfig,
        )
    except BaseException:
        fleet.stop()
        for api in started:
            api.stop()
        shutil.rmtree(state, ignore_errors=True)
        raise
    return ControlPlanes(fleet, a, b, active, standby, state)

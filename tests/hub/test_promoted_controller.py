"""Two whole control planes and one shared fleet (seed 004 on the real process model).

Three local API servers: the Active's cluster (A) and the Standby's (B) each keep their own
HAProxyTemplateConfig, Leases and checkpoints; the workload cluster (W) holds the Ingresses,
Services, backends and the HAProxy pods (agent + real haproxy, run by W's node). Each control
plane is a controller replica as a real Celery worker (`--leader-election`), configured with
HAPTIC_KUBECONFIG for its own cluster, HAPTIC_WORKLOAD_KUBECONFIG for W and HAPTIC_HA_* for
its role. Nothing is driven by hand: the Standby's controller leads its own cluster from the
start but is fenced; after the Active's controller is SIGKILLed it promotes, starts a term
above the Active's last epoch, and deploys to W's fleet by itself.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import kubernetes
import pytest
from kubernetes.client.exceptions import ApiException

from agents.client import AgentClient, AgentConflict
from controller.hub.leases import EPOCH_ANNOTATION, read_lease
from controller.hub.mirror_rules import MIRROR_LABEL
from controller.hub.resolver import resolve_kubeconfigs
from haptic_site import stack
from haptic_site.stack import wait_for
from localcluster.testing import ApiServer
from tests.e2e.harness import System, start_system
from tests.hub.conftest import REPO_ROOT
from tests.hub.scenario import reload_manifest

pytestmark = pytest.mark.e2e

NS = stack.NAMESPACE
GROUP, VERSION = "haproxy-haptic.org", "v1alpha1"
ROLE_LABEL = "haproxy-haptic.org/role"
# The hub's timings (seconds): issue 10's budget is lease + padding + one poll + 1 s.
HUB = {"lease_duration": 2.0, "renew_deadline": 1.5, "retry_period": 0.5, "padding_seconds": 0.5,
       "promotion_dial_timeout": 0.3, "promotion_grace_period": 2.0, "publish_interval": 5.0,
       "mirror_prune_interval": 1.0}  # fmt: skip
BUDGET = HUB["lease_duration"] + HUB["padding_seconds"] + HUB["retry_period"] + 1.0


@dataclass
class ControlPlanes:
    fleet: System  # W: the workload cluster, its node and the HAProxy pods
    a: ApiServer
    b: ApiServer
    active: stack.Process
    standby: stack.Process

    def client(self, api: ApiServer) -> kubernetes.client.ApiClient:
        return api.api_client()


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


@pytest.fixture(scope="module")
def planes() -> Iterator[ControlPlanes]:
    fleet = start_system("hub-promoted", haproxy_replicas=2, controllers=0, template=False)
    state = Path(tempfile.mkdtemp(prefix="haptic-hub-planes-"))
    a = b = None
    try:
        fleet.apply(stack.backend("echo", replicas=1))
        fleet.apply([stack.ingress("echo", "before.example", "echo")])
        a = ApiServer.start(state / "a")
        b = ApiServer.start(state / "b")
        # A holds the configuration and the agent token Secret; B starts with an empty
        # namespace and gets both from the mirror.
        stack.apply_objects(a.api_client(), stack.base_objects(fleet.token))
        stack.apply_objects(a.api_client(), [stack.template_config(stack.Timings.short())])
        stack.apply_objects(b.api_client(), stack.base_objects(fleet.token)[:1])
        ca = state / "ca.crt"
        ca.write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
        common = {"HAPTIC_WORKLOAD_KUBECONFIG": str(fleet.api.kubeconfig)}
        active = fleet.start_controller(
            "ctl-a-0",
            {**common, **_hub_env("active", a, ca, fleet.queue_suffix)},
            kubeconfig=a.kubeconfig,
        )
        standby = fleet.start_controller(
            "ctl-b-0",
            {
                **common,
                **_hub_env("standby", b, ca, fleet.queue_suffix),
                "HAPTIC_HA_ACTIVE_KUBECONFIG": str(a.kubeconfig),
                # Read the agent token from the mirrored Secret, as a real Standby would.
                "HAPTIC_AGENT_TOKEN": "",
            },
            kubeconfig=b.kubeconfig,
        )
        yield ControlPlanes(fleet, a, b, active, standby)
    finally:
        fleet.stop()
        for api in (a, b):
            if api is not None:
                api.stop()


def _lease(api: ApiServer, name: str) -> kubernetes.client.V1Lease | None:
    try:
        return kubernetes.client.CoordinationV1Api(api.api_client()).read_namespaced_lease(
            name, NS, _request_timeout=5
        )
    except ApiException:
        return None


def _holder(api: ApiServer, name: str) -> str | None:
    lease = _lease(api, name)
    return lease.spec.holder_identity if lease is not None else None


def _custom(api: ApiServer, plural: str, selector: str = "") -> list[dict]:
    listing = kubernetes.client.CustomObjectsApi(api.api_client()).list_namespaced_custom_object(
        GROUP, VERSION, NS, plural, label_selector=selector, _request_timeout=5
    )
    return list(listing.get("items") or [])


def _applied_tokens(fleet: System) -> dict[str, dict]:
    return {
        p.metadata.name: fleet.agent_state(p).applied_token or {}
        for p in fleet.haproxy_pods(ready_only=False)
    }


def _stale_apply(fleet: System, pod, token: dict, previous: str | None) -> dict:
    manifest = reload_manifest(b"global\n    default-path config\n", token, previous)
    url = f"http://{pod.status.pod_ip}:8405"
    with (
        AgentClient(url, fleet.token, timeout=10) as agent,
        pytest.raises(AgentConflict) as refused,
    ):
        agent.apply(manifest)
    return {"status": refused.value.status, **(refused.value.body or {})}


def test_promoted_controller_deploys_to_the_shared_fleet(planes: ControlPlanes) -> None:
    fleet, a, b = planes.fleet, planes.a, planes.b

    # Baseline: the Active's controller deploys to W; its checkpoints are mirrored into B.
    wait_for(lambda: len(fleet.haproxy_pods(ready_only=False)) == 2, 60, what="haproxy pods")
    wait_for(lambda: fleet.serves("before.example", "echo-"), 90, what="served by the Active")
    assert {t.get("holder") for t in _applied_tokens(fleet).values()} == {"ctl-a-0"}
    wait_for(
        lambda: any(
            MIRROR_LABEL in (o["metadata"].get("labels") or {})
            for o in _custom(b, "haproxycfgs", f"{ROLE_LABEL}=checkpoint")
        ),
        60,
        what="a checkpoint of the Active mirrored into B",
    )
    template_b = _custom(b, "haproxytemplateconfigs")
    assert [t["metadata"]["labels"][MIRROR_LABEL] for t in template_b] == ["active"]

    # The Standby's controller leads its own cluster but its fence is shut: it publishes
    # nothing of its own and never deploys.
    wait_for(lambda: _holder(b, "haptic-leader") == "ctl-b-0", 30, what="B's controller leads")
    time.sleep(2.0)
    assert {t.get("holder") for t in _applied_tokens(fleet).values()} == {"ctl-a-0"}
    assert _custom(b, "haproxycfgs", f"{ROLE_LABEL}=published") == []

    # The Active's controller dies outright; its API server stays up.
    lease_a = _lease(a, "haptic-leader")
    assert lease_a is not None
    active_epoch = int(lease_a.metadata.annotations[EPOCH_ANNOTATION])
    wait_for(lambda: _holder(a, "haptic-hub") == "ctl-a-0", 10, what="A's hub Lease")
    planes.active.signal(signal.SIGKILL)
    killed_at = time.monotonic()
    wait_for(lambda: _holder(b, "haptic-hub") == "ctl-b-0", 30, 0.05, what="promotion")
    promoted_after = time.monotonic() - killed_at
    print(f"SIGKILL -> promoted: {promoted_after:.2f} s (budget {BUDGET:.1f} s)")
    assert promoted_after <= BUDGET

    # The promoted controller starts a term above the Active's last epoch and deploys to the
    # shared fleet on its own: a change made after the failover reaches every HAProxy pod.
    fleet.apply([stack.ingress("after", "after.example", "echo")])
    wait_for(lambda: fleet.serves("after.example", "echo-"), 90, what="served by the promoted")
    tokens = _applied_tokens(fleet)
    assert {t.get("holder") for t in tokens.values()} == {"ctl-b-0"}
    assert all(t["epoch"] > active_epoch for t in tokens.values())
    assert int(_lease(b, "haptic-leader").metadata.annotations[EPOCH_ANNOTATION]) > active_epoch
    # B now publishes its own output and checkpoints in its own cluster.
    wait_for(lambda: _custom(b, "haproxycfgs", f"{ROLE_LABEL}=published"), 30, what="published")

    # The old Active comes back with its old epoch: every agent refuses, nothing changes.
    old = {"holder": "ctl-a-0", "epoch": active_epoch, "sequence": 10**6}
    for pod in fleet.haproxy_pods(ready_only=False):
        before = fleet.agent_state(pod).applied_plan_id
        refused = _stale_apply(fleet, pod, old, before)
        assert refused["status"] == 409 and refused["reason"] == "stale_epoch", refused
        assert fleet.agent_state(pod).applied_plan_id == before
    assert fleet.serves("after.example", "echo-")

    # The resolver names the new Active, as a library and from the command line.
    resolution = resolve_kubeconfigs(
        [str(a.kubeconfig), str(b.kubeconfig)], namespace=NS, template_name="haptic", timeout=2.0
    )
    assert resolution.active_identity == "ctl-b-0", resolution
    assert resolution.active_url.rstrip("/") == b.url.rstrip("/")
    cli = subprocess.run(
        [sys.executable, "-m", "controller.hub", "resolve", "--json",
         "--kubeconfig", str(a.kubeconfig), "--kubeconfig", str(b.kubeconfig)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert json.loads(cli.stdout)["active_identity"] == "ctl-b-0"
    # The promoted hub keeps renewing its Lease.
    first = read_lease(b.api_client(), NS, "haptic-hub", 5.0).renew_time
    wait_for(
        lambda: read_lease(b.api_client(), NS, "haptic-hub", 5.0).renew_time != first,
        10,
        what="B's hub Lease renewed",
    )

"""Two whole control planes and one shared fleet (seed 004 on the real process model).

See tests/hub/planes.py for the topology: three local API servers, both control planes as
real Celery workers. Nothing is driven by hand: the Standby's controller leads its own
cluster from the start but is fenced; after the Active's controller is SIGKILLed it
promotes, starts a term above the Active's last epoch, and deploys to W's fleet by itself.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import kubernetes
import pytest

from agents.client import AgentClient, AgentConflict
from controller.hub.leases import EPOCH_ANNOTATION, read_lease
from controller.hub.mirror_rules import MIRROR_LABEL
from controller.hub.resolver import resolve_kubeconfigs
from devstack.stack import ingress, wait_for
from localcluster.testing import ApiServer
from tests.e2e.harness import System
from tests.hub.conftest import REPO_ROOT
from tests.hub.planes import ACTIVE, BUDGET, NS, STANDBY, ControlPlanes, start_control_planes
from tests.hub.scenario import reload_manifest

# Three clusters to start first: on the real tier, under load, more than the suite's 300 s.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

GROUP, VERSION = "haproxy-haptic.org", "v1alpha1"
ROLE_LABEL = "haproxy-haptic.org/role"


@pytest.fixture(scope="module")
def planes() -> Iterator[ControlPlanes]:
    planes = start_control_planes("hub-promoted")
    try:
        yield planes
    finally:
        planes.stop()


def _custom(api: ApiServer, plural: str, selector: str = "") -> list[dict]:
    listing = kubernetes.client.CustomObjectsApi(api.api_client()).list_namespaced_custom_object(
        GROUP, VERSION, NS, plural, label_selector=selector, _request_timeout=5
    )
    return list(listing.get("items") or [])


def _mirrored(obj: dict) -> bool:
    return MIRROR_LABEL in (obj["metadata"].get("labels") or {})


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
    assert planes.applied_holders() == {ACTIVE}
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
    wait_for(lambda: planes.holder(b, "haptic-leader") == STANDBY, 30, what="B's controller leads")
    time.sleep(2.0)
    assert planes.applied_holders() == {ACTIVE}
    # (The ordinary HAProxyCfg B holds is the Active's, mirrored for its checkpoint pointers.)
    assert [_mirrored(o) for o in _custom(b, "haproxycfgs", f"{ROLE_LABEL}=published")] == [True]

    # The Active's controller dies outright; its API server stays up.
    lease_a = planes.lease(a, "haptic-leader")
    assert lease_a is not None
    active_epoch = int(lease_a.metadata.annotations[EPOCH_ANNOTATION])
    wait_for(lambda: planes.holder(a, "haptic-hub") == ACTIVE, 10, what="A's hub Lease")
    planes.active.signal(signal.SIGKILL)
    killed_at = time.monotonic()
    wait_for(lambda: planes.holder(b, "haptic-hub") == STANDBY, 30, 0.05, what="promotion")
    promoted_after = time.monotonic() - killed_at
    print(f"SIGKILL -> promoted: {promoted_after:.2f} s (budget {BUDGET:.1f} s)")
    assert promoted_after <= BUDGET

    # The promoted controller starts a term above the Active's last epoch and deploys to the
    # shared fleet on its own: a change made after the failover reaches every HAProxy pod.
    fleet.apply([ingress("after", "after.example", "echo")])
    wait_for(lambda: fleet.serves("after.example", "echo-"), 90, what="served by the promoted")
    tokens = planes.applied_tokens()
    assert {t.get("holder") for t in tokens.values()} == {STANDBY}
    assert all(t["epoch"] > active_epoch for t in tokens.values())
    lease_b = planes.lease(b, "haptic-leader")
    assert int(lease_b.metadata.annotations[EPOCH_ANNOTATION]) > active_epoch
    # B now publishes its own checkpoints in its own cluster.
    wait_for(
        lambda: [
            o for o in _custom(b, "haproxycfgs", f"{ROLE_LABEL}=checkpoint") if not _mirrored(o)
        ],
        30,
        what="a checkpoint of B's own",
    )

    # The old Active comes back with its old epoch: every agent refuses, nothing changes.
    old = {"holder": ACTIVE, "epoch": active_epoch, "sequence": 10**6}
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
    assert resolution.active_identity == STANDBY, resolution
    assert resolution.active_url.rstrip("/") == b.url.rstrip("/")
    cli = subprocess.run(
        [sys.executable, "-m", "controller.hub", "resolve", "--json",
         "--kubeconfig", str(a.kubeconfig), "--kubeconfig", str(b.kubeconfig)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert json.loads(cli.stdout)["active_identity"] == STANDBY

    # The operator's fleet view: configuration from B, pods from the workload cluster.
    env = {k: v for k, v in os.environ.items() if k != "HAPTIC_AGENT_TOKEN"}
    fleet_cli = subprocess.run(
        [sys.executable, "manage.py", "fleet", "--json", "--kubeconfig", str(b.kubeconfig),
         "--workload-kubeconfig", str(fleet.api.kubeconfig)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, check=True, env=env,
    )  # fmt: skip
    rows = json.loads(fleet_cli.stdout)
    assert len(rows) == 2 and all(r["applied_token"]["holder"] == STANDBY for r in rows), rows
    # The promoted hub keeps renewing its Lease.
    first = read_lease(b.api_client(), NS, "haptic-hub", 5.0).renew_time
    wait_for(
        lambda: read_lease(b.api_client(), NS, "haptic-hub", 5.0).renew_time != first,
        10,
        what="B's hub Lease renewed",
    )

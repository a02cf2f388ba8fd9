"""deploy/ on the real API server: the CRDs, the RBAC and the readiness-gate RBAC are applied
with kubectl, then the controller and the mirror run under their own ServiceAccount tokens
(not as admin) through deploy, publish, the readiness gate, the loss of the leader and the
recovery of a replacement pod from the retained checkpoint (ADR-0033), with HAProxy pods and
their agents run by the local node as the cluster's kubelet. The audit log then shows no 403
for either ServiceAccount, and RBAC grants no verb the flow did not use.

Skipped when the real control plane is not built (`make kube`, which needs Go).
"""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import kubernetes
import pytest
import yaml

from checkpoints import mirror as mirror_module
from checkpoints.models import Checkpoint
from devstack import stack
from devstack.stack import wait_for
from localcluster.real import audit
from localcluster.real.cluster import missing_binaries
from tests.conftest import REPO_ROOT
from tests.e2e.harness import System, start_system
from tests.e2e.test_retained_configuration import break_rendering, checkpoint_for_intent

pytestmark = [
    pytest.mark.skipif(
        bool(missing_binaries()),
        reason=f"real control plane not built ({', '.join(missing_binaries())}): run make kube",
    ),
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(1200),
]

DEPLOY = REPO_ROOT / "deploy"
MANIFESTS = [
    DEPLOY / "namespace.yaml",
    DEPLOY / "crds",
    DEPLOY / "rbac.yaml",
    DEPLOY / "rbac-readiness-gate.yaml",
]
NS = stack.NAMESPACE
GATE = stack.GATE_CONDITION


P = audit.Permission
_CRS = ("haproxycfgs", "haproxymapfiles", "haproxygeneralfiles", "haproxycrtlistfiles")
# Grants this flow does not exercise, each with the path that needs it (or the note that
# none was found: a candidate for removal from deploy/rbac.yaml). The test fails when a
# grant is unused and not listed here, and when a listed one is used after all.
NOT_IN_THIS_FLOW: dict[str, dict[audit.Permission, str]] = {
    "haptic-controller": {
        P("", "secrets", "create"): "certificate Secrets of checkpoints (TLS Ingresses)",
        P("", "secrets", "update"): "certificate Secrets of checkpoints (TLS Ingresses)",
        P("", "secrets", "delete"): "garbage collection of certificate Secrets",
        P("", "secrets", "get"): "certificate Secrets of checkpoints (TLS Ingresses)",
        P("haproxy-haptic.org", "haproxytemplateconfigs", "create"): "cross-cluster Standby",
        P("haproxy-haptic.org", "haproxytemplateconfigs", "update"): "cross-cluster Standby",
        P("haproxy-haptic.org", "haproxytemplateconfigs", "delete"): "cross-cluster Standby",
        P("haproxy-haptic.org", "haproxytemplateconfigs/status", "update"): "hub publisher",
        P("haproxy-haptic.org", "haproxytemplateconfigs/status", "get"): "none found",
        P("", "events", "patch"): "none found (events are only created)",
        P("", "pods", "get"): "none found (pods are listed and watched)",
        P("", "services", "get"): "none found (an informer lists and watches)",
        P("discovery.k8s.io", "endpointslices", "get"): "none found (informer)",
        P("networking.k8s.io", "ingresses", "get"): "none found (informer)",
        **{P("haproxy-haptic.org", r, "delete"): "checkpoint garbage collection" for r in _CRS},
        **{P("haproxy-haptic.org", r, "update"): "an output that changes in place" for r in _CRS},
        **{P("haproxy-haptic.org", r, "patch"): "none found (no patch of outputs)" for r in _CRS},
        **{P("haproxy-haptic.org", r, "watch"): "none found (outputs are listed)" for r in _CRS},
        **{P("haproxy-haptic.org", f"{r}/status", "get"): "none found" for r in _CRS},
        **{P("haproxy-haptic.org", f"{r}/status", "patch"): "none found" for r in _CRS},
        **{
            P("haproxy-haptic.org", r, v): "general and crt-list files (TLS, errorfiles)"
            for r in ("haproxygeneralfiles", "haproxycrtlistfiles")
            for v in ("create", "get")
        },
        **{
            P("haproxy-haptic.org", f"{r}/status", "update"): "an output whose status changes"
            for r in ("haproxymapfiles", "haproxygeneralfiles", "haproxycrtlistfiles")
        },
    },
    "haptic-web": {
        # The mirror lists and watches; nothing of the site reads pods from the API.
        P("", "pods", "get"): "none found",
        P("", "pods", "list"): "none found",
        P("", "pods", "watch"): "none found",
        P("", "events", "get"): "none found (mirror: list and watch)",
        P("coordination.k8s.io", "leases", "get"): "none found (mirror: list and watch)",
        **{
            P("haproxy-haptic.org", r, "get"): "none found (mirror: list and watch)"
            for r in (*_CRS, "haproxytemplateconfigs")
        },
    },
}


def kubectl(kubeconfig: Path, *args: str) -> str:
    result = subprocess.run(
        ["kubectl", "--kubeconfig", str(kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def rbac_docs() -> list[dict]:
    docs = []
    for path in (DEPLOY / "rbac.yaml", DEPLOY / "rbac-readiness-gate.yaml"):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


def gate_true(system: System, app: str) -> bool:
    response = system.core().list_namespaced_pod(
        NS, label_selector=f"app={app}", _preload_content=False
    )
    pods = json.loads(response.data)["items"]
    if not pods:
        return False
    for pod in pods:
        conds = {c["type"]: c["status"] for c in pod["status"].get("conditions") or []}
        if conds.get(GATE) != "True" or conds.get("Ready") != "True":
            return False
    return True


@pytest.fixture
def real_system(tmp_path: Path) -> Iterator[tuple[System, dict[str, Path]]]:
    from localcluster.real.testing import RealApiServer

    api = RealApiServer.start(tmp_path / "cluster", install_crds=False)
    try:
        args = [a for path in MANIFESTS for a in ("-f", str(path))]
        kubectl(api.kubeconfig, "apply", *args)
        kubectl(api.kubeconfig, "wait", "--for=condition=Established", "crd", "--all")
        kubeconfigs = {
            sa: api.plane.service_account_kubeconfig(NS, sa)
            for sa in ("haptic-controller", "haptic-web")
        }
    except BaseException:
        api.stop()
        raise
    system = start_system(
        "real_manifests",
        haproxy_replicas=2,
        gate=True,
        api=api,
        controller_kubeconfig=kubeconfigs["haptic-controller"],
    )
    try:
        yield system, kubeconfigs
    finally:
        system.stop()


def test_controller_and_mirror_under_their_service_accounts(
    real_system: tuple[System, dict[str, Path]],
) -> None:
    system, kubeconfigs = real_system
    system.apply(stack.backend("echo", replicas=1, gated=True))
    system.apply([stack.ingress("echo", "x.example", "echo")])
    wait_for(lambda: system.serves("x.example", "echo-"), 180, what="x.example served")
    wait_for(lambda: gate_true(system, "echo"), 60, what="readiness gate True")
    wait_for(lambda: checkpoint_for_intent(system), 60, what="checkpoint of the intent")

    web = kubernetes.config.new_client_from_config(config_file=str(kubeconfigs["haptic-web"]))
    mirror = mirror_module.Mirror(web, NS, watch_timeout=5)
    mirror.start()
    try:
        assert mirror.wait_synced(timeout=60)
        wait_for(lambda: Checkpoint.objects.filter(promoted=True).exists(), 60, what="mirrored")
    finally:
        mirror.stop()

    # Recovery: rendering breaks, the leader is lost, a replacement pod starts from the
    # retained checkpoint the intent names.
    break_rendering(system)
    leader = wait_for(lambda: system.leader() in system.controllers and system.leader(), 60)
    standby = next(n for n in system.controllers if n != leader)
    system.controllers[leader].signal(signal.SIGTERM)
    system.controllers[leader].stop(grace=30)
    wait_for(lambda: system.leader() == standby, 90, what="standby leads")
    system.scale("haproxy", 3)
    wait_for(lambda: len(system.haproxy_pods(ready_only=True)) == 3, 180, what="replacement")
    assert system.serves("x.example", "echo-")
    for proc in system.controllers.values():
        proc.stop(grace=30)

    events = audit.read_events(system.api.audit_log)
    docs = rbac_docs()
    report = {}
    for sa in ("haptic-controller", "haptic-web"):
        mine = audit.of_user(events, audit.service_account_user(NS, sa))
        granted, used = audit.granted(docs, NS, sa), audit.used(mine)
        report[sa] = {
            "requests": len(mine),
            "refused": [(e["verb"], e.get("requestURI")) for e in audit.forbidden(mine)],
            "used": sorted(used),
            "used_not_granted": sorted(used - granted),
            "unused": sorted(granted - used),
        }
    (system.log_dir / "rbac-report.json").write_text(json.dumps(report, indent=1))
    for sa, facts in report.items():
        assert facts["requests"], f"{sa} made no request"
        assert facts["refused"] == [], f"{sa} was refused: {facts['refused']}"
        unused = {audit.Permission(*p) for p in facts["unused"]}
        listed = NOT_IN_THIS_FLOW[sa]
        assert unused - set(listed) == set(), f"{sa}: granted, never used, not listed"
        assert set(listed) - unused == set(), f"{sa}: listed as unused, but used or not granted"

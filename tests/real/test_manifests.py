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
from haptic_site import stack
from haptic_site.stack import wait_for
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
    for sa in ("haptic-controller", "haptic-web"):
        mine = audit.of_user(events, audit.service_account_user(NS, sa))
        assert mine, f"{sa} made no request"
        refused = [(e["verb"], e.get("requestURI")) for e in audit.forbidden(mine)]
        assert refused == [], f"{sa} was refused: {refused}"
        unused = audit.granted(docs, NS, sa) - audit.used(mine)
        assert unused == set(), f"{sa} is granted verbs the flow never used: {sorted(unused)}"

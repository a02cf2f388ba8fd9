"""deploy/rbac-standby.yaml on the real API server: the hub's Standby mirror
(controller/hub/mirror.py) runs under the ServiceAccounts the manifests bind, never as admin,
and copies the Active's template config, checkpoint, child and Secrets into the Standby's
namespace while the Active's template is created, given a status, changed and deleted.

The Active's cluster and the Standby's are two namespaces of one real API server here: the
grants are namespaced Roles, so each is checked as in its own cluster (`haptic` is the
Standby's, with rbac.yaml and rbac-standby.yaml; `haptic-active` the Active's, with
rbac-hub.yaml moved there). The audit log then shows no 403 for either ServiceAccount, and
rbac-standby.yaml grants no verb the mirror did not use (the check
tests/real/test_manifests.py makes for the controller).

Skipped when the real control plane is not built (`make kube`, which needs Go).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import kubernetes
import pytest
import yaml

from controller.hub.kube import CFG, MAP, SECRET, TEMPLATE, Kube
from controller.hub.mirror import Mirror
from controller.kubeclient import bounded_copy
from devstack.stack import wait_for
from localcluster.real import audit
from tests.e2e.harness import LOG_ROOT
from tests.hub.scenario import seed_active_cluster
from tests.real import NEEDS_REAL_CONTROL_PLANE
from tests.real.test_manifests import DEPLOY, NS, kubectl

pytestmark = [
    NEEDS_REAL_CONTROL_PLANE,
    pytest.mark.timeout(600),
]

ACTIVE_NS = "haptic-active"
CONTROLLER, HUB_READER = "haptic-controller", "haptic-hub-standby"
LOG_DIR = LOG_ROOT / "real_standby_mirror"


def docs(path: Path, namespace: str | None = None) -> list[dict]:
    """The manifest's documents, moved to `namespace` when given (objects and subjects)."""
    out = [d for d in yaml.safe_load_all(path.read_text()) if d]
    if namespace is not None:
        for doc in out:
            doc["metadata"]["namespace"] = namespace
            for subject in doc.get("subjects") or []:
                subject["namespace"] = namespace
    return out


@pytest.fixture
def planes(tmp_path: Path) -> Iterator[tuple[Kube, Kube, Kube, Path]]:
    """(admin, the mirror's remote, the mirror's local) clients and the audit log."""
    from localcluster.real.testing import RealApiServer

    api = RealApiServer.start(tmp_path / "cluster", install_crds=False)
    clients = []
    try:
        manifests = [DEPLOY / "namespace.yaml", DEPLOY / "crds", DEPLOY / "rbac.yaml",
                     DEPLOY / "rbac-standby.yaml"]  # fmt: skip
        kubectl(api.kubeconfig, "apply", *[a for m in manifests for a in ("-f", str(m))])
        kubectl(api.kubeconfig, "wait", "--for=condition=Established", "crd", "--all")
        kubectl(api.kubeconfig, "create", "namespace", ACTIVE_NS)
        hub = tmp_path / "rbac-hub.yaml"
        hub.write_text(yaml.safe_dump_all(docs(DEPLOY / "rbac-hub.yaml", ACTIVE_NS)))
        kubectl(api.kubeconfig, "apply", "-f", str(hub))
        for namespace, sa in ((NS, CONTROLLER), (ACTIVE_NS, HUB_READER)):
            config = api.plane.service_account_kubeconfig(namespace, sa)
            clients.append(bounded_copy(kubernetes.config.new_client_from_config(str(config))))
        admin = bounded_copy(api.api_client())
        clients.append(admin)
        yield Kube(admin, 5.0), Kube(clients[1], 5.0), Kube(clients[0], 5.0), api.audit_log
    finally:
        for c in clients:
            c.close()
        api.stop()


def test_standby_mirror_under_its_service_accounts(planes) -> None:
    admin, remote, local, audit_log = planes
    seed_active_cluster(admin, ACTIVE_NS)
    mirror = Mirror(remote, local, remote_namespace=ACTIVE_NS, local_namespace=NS,
                    template_name="haptic", source="active", prune_interval=1.0,
                    watch_read_timeout=5.0)  # fmt: skip
    mirror.start()
    try:
        assert wait_for(lambda: mirror.synced, 60)

        def copied(kind, name: str) -> dict | None:
            items = admin.list(kind.collection(NS)).get("items") or []
            return next((o for o in items if o["metadata"]["name"] == name), None)

        wait_for(lambda: copied(TEMPLATE, "haptic") and copied(CFG, "cp-1") and
                 copied(MAP, "map-1") and copied(SECRET, "tls-1"), 60)  # fmt: skip
        # The Active's template gets a status (its hub publisher names the Active) and a
        # new spec: the copy's status and spec are replaced.
        template = admin.get(TEMPLATE.item(ACTIVE_NS, "haptic"))
        body = {**template, "status": {"activeController": {"activeIdentity": "hub-a"}}}
        status = admin.replace(TEMPLATE.item(ACTIVE_NS, "haptic") + "/status", body)["status"]
        wait_for(lambda: (copied(TEMPLATE, "haptic") or {}).get("status") == status, 60)
        template = admin.get(TEMPLATE.item(ACTIVE_NS, "haptic"))
        template["spec"]["podSelector"]["matchLabels"]["tier"] = "edge"
        admin.replace(TEMPLATE.item(ACTIVE_NS, "haptic"), template)
        wait_for(lambda: "tier" in copied(TEMPLATE, "haptic")["spec"]["podSelector"]["matchLabels"])
        # A child's status is nothing haptic writes or reads: its copy carries none, so the
        # Standby needs no grant for it.
        child = admin.get(MAP.item(ACTIVE_NS, "map-1"))
        admin.replace(MAP.item(ACTIVE_NS, "map-1") + "/status",
                      {**child, "status": {"observedGeneration": 1}})  # fmt: skip
        passes = mirror.passes
        wait_for(lambda: mirror.passes >= passes + 2, 60)
        assert "status" not in (copied(MAP, "map-1") or {"status": "missing copy"})
        # The Active's template goes: so does its copy.
        meta = admin.get(TEMPLATE.item(ACTIVE_NS, "haptic"))["metadata"]
        admin.delete(TEMPLATE.item(ACTIVE_NS, "haptic"), meta["uid"], meta["resourceVersion"])
        wait_for(lambda: copied(TEMPLATE, "haptic") is None, 60)
        assert mirror.last_error is None, mirror.last_error
    finally:
        assert mirror.stop(30.0)

    events = audit.read_events(audit_log)
    report = {}
    for namespace, sa in ((NS, CONTROLLER), (ACTIVE_NS, HUB_READER)):
        mine = audit.of_user(events, audit.service_account_user(namespace, sa))
        report[sa] = {
            "requests": len(mine),
            "refused": [(e["verb"], e.get("requestURI")) for e in audit.forbidden(mine)],
            "used": sorted(audit.used(mine)),
        }
    granted = audit.granted(docs(DEPLOY / "rbac-standby.yaml"), NS, CONTROLLER)
    unused = sorted(granted - set(report[CONTROLLER]["used"]))
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    (LOG_DIR / "rbac-report.json").write_text(json.dumps({**report, "unused": unused}, indent=1))
    for sa, facts in report.items():
        assert facts["requests"], f"{sa} made no request"
        assert facts["refused"] == [], f"{sa} was refused: {facts['refused']}"
    assert unused == [], "rbac-standby.yaml: granted, never used by the mirror"

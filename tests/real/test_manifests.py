"""deploy/ on the real API server: the CRDs, the RBAC and the readiness-gate RBAC are applied
with kubectl, then the controller and the mirror run under their own ServiceAccount tokens
(not as admin) through deploy, publish, the readiness gate, the loss of the leader and the
recovery of a replacement pod from the retained checkpoint (ADR-0033), with HAProxy pods and
their agents run by the local node as the cluster's kubelet. On the way a TLS Ingress, a
general file and a user map file come, change and go, each step awaited by its own bytes,
so outputs and the certificate Secret change in place, a dropped map file is deleted and
old checkpoints are collected. The audit log then shows no 403 for either ServiceAccount,
and RBAC grants no verb the flow did not use. The agent is not among them: it never calls the
API, and its pods mount no token (tests/test_manifests.py checks both).

Skipped when the real control plane is not built (`make kube`, which needs Go).
"""

from __future__ import annotations

import base64
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
from contract import CERT_KEY, CHECKPOINT_ROLE, ROLE_LABEL, unpack
from devstack import stack
from devstack.stack import wait_for
from localcluster.real import audit
from tests.conftest import REPO_ROOT
from tests.e2e.harness import System, start_system
from tests.e2e.test_retained_configuration import break_rendering, checkpoint_for_intent
from tests.real import NEEDS_REAL_CONTROL_PLANE

pytestmark = [
    NEEDS_REAL_CONTROL_PLANE,
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


def tls_secret(name: str, tmp: Path, host: str) -> dict:
    """A kubernetes.io/tls Secret with a fresh self-signed certificate for `host`."""
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
         "-subj", f"/CN={host}", "-keyout", str(tmp / "tls.key"), "-out", str(tmp / "tls.crt")],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {"name": name, "namespace": NS},
        "data": {
            key: base64.b64encode((tmp / key).read_bytes()).decode()
            for key in ("tls.crt", "tls.key")
        },
    }


def tls_ingress(hosts: list[str]) -> dict:
    """Ingress `secure`: a rule per host (the host maps) and one TLS entry (the crt-list)."""
    ingress = stack.ingress("secure", hosts[0], "echo")
    rule = ingress["spec"]["rules"][0]
    ingress["spec"]["rules"] = [dict(rule, host=host) for host in hosts]
    ingress["spec"]["tls"] = [{"hosts": hosts, "secretName": "secure-tls"}]
    return ingress


def user_files(system: System, note: str | None, map_entries: str | None) -> None:
    """spec.files and spec.maps of the template config: one general file and one user map
    file, or none (a merge patch with null drops them)."""
    files = {"note": {"template": note}} if note is not None else None
    maps = {"extra.map": {"template": map_entries}} if map_entries is not None else None
    system.custom().patch_namespaced_custom_object(
        "haproxy-haptic.org", "v1alpha1", NS, "haproxytemplateconfigs", "haptic",
        {"spec": {"files": files, "maps": maps}},
    )  # fmt: skip


CHILD_REFS = {
    "generalFiles": "haproxygeneralfiles",
    "crtListFiles": "haproxycrtlistfiles",
    "mapFiles": "haproxymapfiles",
}
CERT = "certs/haptic_secure-tls.pem"
CRT_LIST = "crt-lists/crt-list.txt"


def published_files(system: System) -> dict[str, bytes]:
    """Path -> bytes of the published output's children and certificate Secrets, read
    back from the API as a new leader would (controller/publish/ordinary.py)."""
    aux = ((system.published() or {}).get("spec") or {}).get("auxiliaryFiles") or {}
    files = {}
    for ref_list, plural in CHILD_REFS.items():
        for ref in aux.get(ref_list) or []:
            spec = system.custom().get_namespaced_custom_object(
                "haproxy-haptic.org", "v1alpha1", NS, plural, ref["name"]
            )["spec"]
            content = spec["content"]
            files[ref["path"]] = unpack(content) if spec.get("compressed") else content.encode()
    for ref in aux.get("certificates") or []:
        data = system.core().read_namespaced_secret(ref["secretName"], NS).data
        files[ref["path"]] = base64.b64decode(data[ref.get("key") or CERT_KEY])
    return files


def settled(system: System, want: dict[str, bytes | None]) -> bool:
    """The published output holds `want` (path -> bytes the file contains; None: no such
    file) and its checkpoint is promoted (garbage collection follows promotion). Each step
    waits for its own bytes, so no step is folded into the next one's render."""
    try:
        files = published_files(system)
    except kubernetes.client.ApiException:
        return False  # a child replaced or collected between the two reads
    for path, part in want.items():
        if (path in files) != (part is not None) or (part is not None and part not in files[path]):
            return False
    published, checkpoint = system.published() or {}, checkpoint_for_intent(system)
    return checkpoint is not None and checkpoint["checksum"] == published["spec"]["checksum"]


def checkpoint_names(system: System) -> set[str]:
    listing = system.custom().list_namespaced_custom_object(
        "haproxy-haptic.org", "v1alpha1", NS, "haproxycfgs",
        label_selector=f"{ROLE_LABEL}={CHECKPOINT_ROLE}",
    )  # fmt: skip
    return {item["metadata"]["name"] for item in listing["items"]}


def change_outputs_in_place(system: System, tmp: Path) -> None:
    """A TLS Ingress, a general file and a user map file arrive (outputs and the
    certificate Secret created), change (the certificate Secret, the crt-list, the general
    and the map file replaced in place; the second new checkpoint collects the first one),
    then go (the children deleted: the map file no render keeps among them)."""
    networking = kubernetes.client.NetworkingV1Api(system.client)
    first = checkpoint_names(system)
    steps = [("s.example", ["s.example"], "one"), ("t.example", ["s.example", "t.example"], "two")]
    for step, (secret_host, hosts, note) in enumerate(steps):
        (tmp / str(step)).mkdir()
        secret, ingress = tls_secret("secure-tls", tmp / str(step), secret_host), tls_ingress(hosts)
        if step == 0:
            system.apply([secret, ingress])
        else:
            system.core().patch_namespaced_secret("secure-tls", NS, secret)
            networking.patch_namespaced_ingress("secure", NS, ingress)
        user_files(system, note, f"{note}.example {note}\n")
        want = {
            "general/note": note.encode(),
            "maps/extra.map": f"{note}.example".encode(),
            CRT_LIST: " ".join(hosts).encode(),
            CERT: base64.b64decode(secret["data"]["tls.crt"]).strip(),
        }
        wait_for(lambda w=want: settled(system, w), 120, what=f"TLS output {step} checkpointed")
    # Retention keeps the newest checkpoint and its predecessor (controller/retained/
    # retention.py), so the two TLS outputs' checkpoints have collected the first one.
    wait_for(lambda: not first & checkpoint_names(system), 60, what="first checkpoint collected")
    networking.delete_namespaced_ingress("secure", NS)
    user_files(system, None, None)
    gone: dict[str, bytes | None] = dict.fromkeys(("general/note", "maps/extra.map", CERT))
    gone[CRT_LIST] = None
    wait_for(lambda: settled(system, gone), 120, what="output without TLS checkpointed")
    assert system.serves("x.example", "echo-")


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
        controllers=0,
        api=api,
        controller_kubeconfig=kubeconfigs["haptic-controller"],
    )
    try:
        # As deployed: the controllers read the agent token from the Secret the template
        # config names, not from the environment.
        for i in range(2):
            system.start_controller(f"controller-{i}", {"HAPTIC_AGENT_TOKEN": ""})
        yield system, kubeconfigs
    finally:
        system.stop()


def test_controller_and_mirror_under_their_service_accounts(
    real_system: tuple[System, dict[str, Path]], tmp_path: Path
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

    change_outputs_in_place(system, tmp_path)

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
        assert facts["unused"] == [], f"{sa}: granted, never used by the flow"

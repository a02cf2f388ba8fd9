"""The real kubectl binary against the local API server and node: what an operator types
works as on a real cluster (no `--validate=false`)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from localcluster.node.agent import DEFAULT_NODE_NAME
from localcluster.testing import cluster_with_node
from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed")


@dataclass
class Kubectl:
    kubeconfig: Path
    cache_dir: Path
    core: client.CoreV1Api
    apps: client.AppsV1Api

    def run(
        self, *args: str, stdin: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        cmd = ["kubectl", "--kubeconfig", str(self.kubeconfig), "--cache-dir", str(self.cache_dir)]
        proc = subprocess.run(
            [*cmd, *args], input=stdin, capture_output=True, text=True, timeout=60
        )
        if check:
            assert proc.returncode == 0, f"kubectl {' '.join(args)}:\n{proc.stdout}{proc.stderr}"
        return proc


@pytest.fixture(scope="module")
def kubectl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kubectl]:
    with cluster_with_node(tmp_path_factory.mktemp("cluster")) as (api, _node):
        ac = api.api_client()
        yield Kubectl(
            api.kubeconfig,
            tmp_path_factory.mktemp("kubectl-cache"),
            client.CoreV1Api(ac),
            client.AppsV1Api(ac),
        )


@pytest.fixture
def ns(kubectl: Kubectl) -> str:
    name = f"k-{uuid.uuid4().hex[:8]}"
    kubectl.core.create_namespace({"metadata": {"name": name}})
    return name


def _wait(check: Callable[[], Any], what: str, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def _deployment(name: str, version: str = "1") -> dict[str, Any]:
    sleeper = [sys.executable, "-c", "import time; time.sleep(3600)"]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "terminationGracePeriodSeconds": 1,
                    "containers": [
                        {
                            "name": "main",
                            "image": f"sleeper:{version}",
                            "command": sleeper,
                        }
                    ],
                },
            },
        },
    }


_TEMPLATE_CONFIG = {
    "apiVersion": "haproxy-haptic.org/v1alpha1",
    "kind": "HAProxyTemplateConfig",
    "metadata": {"name": "fleet"},
    "spec": {"podSelector": {"matchLabels": {"app": "haproxy"}}},
}


def test_apply_validates_against_openapi(kubectl: Kubectl, ns: str) -> None:
    docs = [
        _deployment("web"),
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "b"}},
        _TEMPLATE_CONFIG,
    ]
    out = kubectl.run("apply", "-n", ns, "-f", "-", stdin=yaml.safe_dump_all(docs))
    assert "deployment.apps/web created" in out.stdout
    assert "haproxytemplateconfig.haproxy-haptic.org/fleet created" in out.stdout
    # A second apply computes a patch (client-side apply) and changes nothing.
    again = kubectl.run("apply", "-n", ns, "-f", "-", stdin=json.dumps(docs[1]))
    assert "configmap/c unchanged" in again.stdout
    # Validation is on: an unknown field is refused, for a built-in kind and a custom one.
    typo = _deployment("typo")
    typo["spec"]["replicaz"] = 2
    bad = kubectl.run("apply", "-n", ns, "-f", "-", stdin=json.dumps(typo), check=False)
    assert bad.returncode != 0
    assert 'unknown field "spec.replicaz"' in bad.stderr
    bad_cr = json.loads(json.dumps(_TEMPLATE_CONFIG))
    bad_cr["spec"]["podSelectr"] = {}
    bad = kubectl.run("apply", "-n", ns, "-f", "-", stdin=json.dumps(bad_cr), check=False)
    assert bad.returncode != 0
    assert 'unknown field "spec.podSelectr"' in bad.stderr


def test_apply_list_validates_on_the_client_with_openapi_v2(kubectl: Kubectl, ns: str) -> None:
    """A `kind: List` file is validated by kubectl itself, against /openapi/v2 in protobuf."""
    items = [_deployment("listed"), _TEMPLATE_CONFIG]
    listing = {"apiVersion": "v1", "kind": "List", "items": items}
    out = kubectl.run("apply", "-n", ns, "-f", "-", stdin=json.dumps(listing))
    assert "deployment.apps/listed created" in out.stdout
    items[0]["spec"]["replicas"] = "three"
    bad = kubectl.run("apply", "-n", ns, "-f", "-", stdin=json.dumps(listing), check=False)
    assert bad.returncode != 0
    assert (
        'invalid type for io.k8s.api.apps.v1.DeploymentSpec.replicas: got "string", '
        'expected "integer"' in bad.stderr
    )
    explained = kubectl.run("explain", "deployment.spec.paused", "--output=plaintext-openapiv2")
    assert "Indicates that the deployment is paused." in explained.stdout


def test_apply_server_side(kubectl: Kubectl, ns: str) -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"a": "1"}}
    out = kubectl.run("apply", "--server-side", "-n", ns, "-f", "-", stdin=json.dumps(cm))
    assert "configmap/ssa serverside-applied" in out.stdout
    got = kubectl.core.read_namespaced_config_map("ssa", ns)
    assert got.data == {"a": "1"}
    assert [m.manager for m in got.metadata.managed_fields] == ["kubectl"]
    typo = {**cm, "dta": {"b": "2"}}
    bad = kubectl.run(
        "apply", "--server-side", "-n", ns, "-f", "-", stdin=json.dumps(typo), check=False
    )
    assert bad.returncode != 0
    assert ".dta: field not declared in schema" in bad.stderr


def test_explain_builtin_and_custom_fields(kubectl: Kubectl) -> None:
    out = kubectl.run("explain", "deployment.spec").stdout
    assert "GROUP:      apps" in out
    assert "KIND:       Deployment" in out
    assert "Number of desired pods" in out
    assert "replicas\t<integer>" in out
    custom = kubectl.run("explain", "haproxytemplateconfig.spec.agent").stdout
    assert "How the controller reaches the agent beside each HAProxy pod." in custom
    assert "scheme\t<string>" in custom


def test_scale_deployment(kubectl: Kubectl, ns: str) -> None:
    kubectl.run("apply", "-n", ns, "-f", "-", stdin=json.dumps(_deployment("scaled")))
    out = kubectl.run("scale", "-n", ns, "deployment/scaled", "--replicas=3")
    assert "deployment.apps/scaled scaled" in out.stdout
    assert kubectl.apps.read_namespaced_deployment("scaled", ns).spec.replicas == 3
    _wait(
        lambda: len(kubectl.core.list_namespaced_pod(ns, label_selector="app=scaled").items) == 3,
        "three pods",
    )


def test_scale_custom_resource_that_declares_it(kubectl: Kubectl, ns: str) -> None:
    from .test_openapi import CRD

    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.org"},
        **json.loads(json.dumps(CRD)),
    }
    kubectl.run("apply", "-f", "-", stdin=json.dumps(crd))
    widget = {"apiVersion": "example.org/v1", "kind": "Widget", "metadata": {"name": "w"}}
    widget["spec"] = {"size": 1}
    _wait(
        lambda: (
            kubectl.run(
                "apply", "-n", ns, "-f", "-", stdin=json.dumps(widget), check=False
            ).returncode
            == 0
        ),
        "the Widget kind served",
    )
    out = kubectl.run("scale", "-n", ns, "widget/w", "--replicas=4")
    assert "widget.example.org/w scaled" in out.stdout
    got = kubectl.run("get", "-n", ns, "widget/w", "-o", "jsonpath={.spec.size}")
    assert got.stdout == "4"


def _revisions(kubectl: Kubectl, ns: str, name: str) -> list[str]:
    out = kubectl.run("rollout", "history", "-n", ns, f"deployment/{name}").stdout
    return [line.split()[0] for line in out.splitlines()[2:] if line.strip()]


def test_rollout_history_and_undo(kubectl: Kubectl, ns: str) -> None:
    kubectl.run("apply", "-n", ns, "-f", "-", stdin=json.dumps(_deployment("roll", "1")))
    _wait(lambda: _revisions(kubectl, ns, "roll") == ["1"], "revision 1")
    kubectl.run("apply", "-n", ns, "-f", "-", stdin=json.dumps(_deployment("roll", "2")))
    _wait(lambda: _revisions(kubectl, ns, "roll") == ["1", "2"], "revision 2")
    one = kubectl.run("rollout", "history", "-n", ns, "deployment/roll", "--revision=1")
    assert "sleeper:1" in one.stdout
    out = kubectl.run("rollout", "undo", "-n", ns, "deployment/roll")
    assert "deployment.apps/roll rolled back" in out.stdout
    dep = kubectl.apps.read_namespaced_deployment("roll", ns)
    assert dep.spec.template.spec.containers[0].image == "sleeper:1"
    # Revision 1 comes back as revision 3, as the real Deployment controller numbers it.
    _wait(lambda: _revisions(kubectl, ns, "roll") == ["2", "3"], "revision 3")
    _wait(
        lambda: (
            {
                p.spec.containers[0].image
                for p in kubectl.core.list_namespaced_pod(ns, label_selector="app=roll").items
                if not p.metadata.deletion_timestamp
            }
            == {"sleeper:1"}
        ),
        "pods of revision 1 again",
    )


def test_get_all_lists_the_workload_kinds(kubectl: Kubectl, ns: str) -> None:
    kubectl.run("apply", "-n", ns, "-f", "-", stdin=json.dumps(_deployment("every")))
    _wait(
        lambda: "replicaset.apps/every-" in kubectl.run("get", "all", "-n", ns).stdout,
        "the ReplicaSet listed",
    )
    out = kubectl.run("get", "all", "-n", ns).stdout
    assert "deployment.apps/every" in out
    assert "pod/every-" in out


def test_get_nodes(kubectl: Kubectl) -> None:
    def ready() -> str:
        out = kubectl.run("get", "nodes").stdout
        return out if " Ready " in out else ""

    out = _wait(ready, "the node Ready")
    header, row = out.splitlines()[:2]
    assert header.split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert row.split()[:2] == [DEFAULT_NODE_NAME, "Ready"]


def test_auth_can_i(kubectl: Kubectl) -> None:
    assert kubectl.run("auth", "can-i", "create", "pods").stdout.strip() == "yes"
    assert kubectl.run("auth", "can-i", "delete", "deployments", "-A").stdout.strip() == "yes"
    rules = kubectl.run("auth", "can-i", "--list").stdout.splitlines()
    assert rules[0].split() == ["Resources", "Non-Resource", "URLs", "Resource", "Names", "Verbs"]
    assert rules[1].split() == ["*.*", "[]", "[]", "[*]"]
    whoami = kubectl.run("auth", "whoami").stdout
    assert "localcluster-admin" in whoami and "system:masters" in whoami


def test_get_events_and_ingresses_show_columns(kubectl: Kubectl, ns: str) -> None:
    kubectl.core.create_namespaced_event(
        ns,
        {
            "metadata": {"name": "e1"},
            "involvedObject": {"kind": "Pod", "name": "p1", "namespace": ns},
            "reason": "Started",
            "message": "started container main",
            "type": "Normal",
            "lastTimestamp": "2026-01-01T00:00:00Z",
        },
    )
    lines = kubectl.run("get", "events", "-n", ns).stdout.splitlines()
    assert lines[0].split() == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert lines[1].split()[1:] == ["Normal", "Started", "pod/p1", "started", "container", "main"]
    ingress = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": "ing"},
        "spec": {
            "rules": [
                {
                    "host": "a.example",
                    "http": {
                        "paths": [
                            {
                                "path": "/",
                                "pathType": "Prefix",
                                "backend": {"service": {"name": "s", "port": {"number": 80}}},
                            }
                        ]
                    },
                }
            ]
        },
    }
    kubectl.run("apply", "-n", ns, "-f", "-", stdin=json.dumps(ingress))
    lines = kubectl.run("get", "ingress", "-n", ns).stdout.splitlines()
    assert lines[0].split() == ["NAME", "CLASS", "HOSTS", "ADDRESS", "PORTS", "AGE"]
    # ADDRESS is empty until a controller writes status.loadBalancer.
    assert lines[1].split()[:4] == ["ing", "<none>", "a.example", "80"]


def test_get_ingressclasses(kubectl: Kubectl) -> None:
    """Issue 16, item 6: the shipped class applied with kubectl and listed as on a real
    cluster (NAME, CONTROLLER, PARAMETERS, AGE)."""
    kubectl.run("apply", "-f", str(REPO_ROOT / "deploy" / "ingressclass.yaml"))
    lines = kubectl.run("get", "ingressclasses").stdout.splitlines()
    assert lines[0].split() == ["NAME", "CONTROLLER", "PARAMETERS", "AGE"]
    row = next(line.split() for line in lines[1:] if line.split()[0] == "haptic")
    assert row[1:3] == ["haproxy-haptic.org/controller", "<none>"]

"""The whole system on one machine: local cluster, HAProxy pods, controller replicas.

Used by `make run`, the end-to-end tests and the benchmarks, so all three exercise the same
stack. Manifests are built here as plain dicts and installed through the official
kubernetes client, exactly as they would be on a real cluster.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kubernetes
from kubernetes.client.exceptions import ApiException

REPO_ROOT = Path(__file__).resolve().parent.parent
NAMESPACE = "haptic"
HAPROXY_LABELS = {"app.kubernetes.io/name": "haproxy"}
GATE_CONDITION = "haproxy-haptic.org/load-balancer-ready"


# -- manifests ------------------------------------------------------------------------------


def haproxy_deployment(replicas: int, token_file: Path, python: str = sys.executable) -> dict:
    """HAProxy pods: the agent supervises haproxy; each pod has its own loopback IP."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "haproxy", "namespace": NAMESPACE, "labels": dict(HAPROXY_LABELS)},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": dict(HAPROXY_LABELS)},
            "template": {
                "metadata": {"labels": dict(HAPROXY_LABELS)},
                "spec": {
                    "terminationGracePeriodSeconds": 10,
                    "containers": [
                        {
                            "name": "haproxy",
                            "image": "haptic-haproxy",
                            "command": [python, "-m", "agents", "serve"],
                            "args": [
                                "--listen",
                                "$(POD_IP):8405",
                                "--token-file",
                                str(token_file),
                                "--data-dir",
                                "agent-data",
                                "--drain-seconds",
                                "1",
                            ],
                            "env": [{"name": "PYTHONPATH", "value": str(REPO_ROOT)}],
                            "readinessProbe": {
                                "httpGet": {"path": "/healthz", "port": 8406},
                                "periodSeconds": 1,
                            },
                        }
                    ],
                },
            },
        },
    }


def backend(
    name: str, replicas: int = 1, gated: bool = False, python: str = sys.executable
) -> list[dict]:
    """A sample backend Deployment and its Service (answers with its pod name)."""
    labels = {"app": name}
    pod_spec: dict[str, Any] = {
        "terminationGracePeriodSeconds": 2,
        "containers": [
            {
                "name": "web",
                "image": "sample-backend",
                "command": [python, "-m", "localcluster.sample_backend", "--port", "8080"],
                "env": [{"name": "PYTHONPATH", "value": str(REPO_ROOT)}],
                "readinessProbe": {
                    "httpGet": {"path": "/healthz", "port": 8080},
                    "periodSeconds": 1,
                },
            }
        ],
    }
    if gated:
        pod_spec["readinessGates"] = [{"conditionType": GATE_CONDITION}]
    return [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": labels},
                "strategy": {
                    "type": "RollingUpdate",
                    "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
                },
                "template": {"metadata": {"labels": labels}, "spec": pod_spec},
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {
                "selector": labels,
                "ports": [{"name": "http", "port": 80, "targetPort": 8080}],
            },
        },
    ]


def ingress(name: str, host: str, service: str) -> dict:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "rules": [
                {
                    "host": host,
                    "http": {
                        "paths": [
                            {
                                "path": "/",
                                "pathType": "Prefix",
                                "backend": {"service": {"name": service, "port": {"number": 80}}},
                            }
                        ]
                    },
                }
            ]
        },
    }


@dataclass
class Timings:
    lease_duration: str = "30s"
    renew_deadline: str = "20s"
    retry_period: str = "5s"
    publish_interval: str = "10s"
    drift_interval: str = "60s"
    deployment_min_interval: str = "100ms"

    @classmethod
    def short(cls) -> Timings:
        """Test timings: fast hand-over and publication."""
        return cls("4s", "3s", "500ms", "1s", "30s", "50ms")


def template_config(timings: Timings, gate: bool = False) -> dict:
    return {
        "apiVersion": "haproxy-haptic.org/v1alpha1",
        "kind": "HAProxyTemplateConfig",
        "metadata": {"name": "haptic", "namespace": NAMESPACE},
        "spec": {
            "podSelector": {"matchLabels": dict(HAPROXY_LABELS)},
            "agent": {
                "port": 8405,
                "tokenSecretRef": {"name": "haptic-agent-token", "key": "token"},
            },
            "controller": {
                "leaderElection": {
                    "enabled": True,
                    "leaseDuration": timings.lease_duration,
                    "renewDeadline": timings.renew_deadline,
                    "retryPeriod": timings.retry_period,
                },
                "configPublishInterval": timings.publish_interval,
                "driftPreventionInterval": timings.drift_interval,
                "deploymentMinInterval": timings.deployment_min_interval,
            },
            "templateLibraries": {
                "base": {"enabled": True},
                "ingress": {"enabled": True},
                "kubernetesBackends": {"enabled": True, "podReadinessGate": {"enabled": gate}},
            },
        },
    }


# -- installing ------------------------------------------------------------------------------


def apply_objects(api_client: kubernetes.client.ApiClient, objects: list[dict]) -> None:
    """Create each object, replacing it when it exists (idempotent install)."""
    dynamic = kubernetes.utils
    custom = kubernetes.client.CustomObjectsApi(api_client)
    for obj in objects:
        if obj["apiVersion"].startswith("haproxy-haptic.org/"):
            group, version = obj["apiVersion"].split("/")
            plural = obj["kind"].lower() + "s"
            ns = obj["metadata"]["namespace"]
            try:
                custom.create_namespaced_custom_object(group, version, ns, plural, obj)
            except ApiException as exc:
                if exc.status != 409:
                    raise
                current = custom.get_namespaced_custom_object(
                    group, version, ns, plural, obj["metadata"]["name"]
                )
                obj = {
                    **obj,
                    "metadata": {
                        **obj["metadata"],
                        "resourceVersion": current["metadata"]["resourceVersion"],
                    },
                }
                custom.replace_namespaced_custom_object(
                    group, version, ns, plural, obj["metadata"]["name"], obj
                )
            continue
        try:
            dynamic.create_from_dict(api_client, obj)
        except dynamic.FailToCreateError as exc:
            if not all(getattr(e, "status", None) == 409 for e in exc.api_exceptions):
                raise


def base_objects(token: str) -> list[dict]:
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "haptic-agent-token", "namespace": NAMESPACE},
            "type": "Opaque",
            "stringData": {"token": token},
        },
    ]


# -- processes ------------------------------------------------------------------------------


@dataclass
class Process:
    name: str
    argv: list[str]
    env: dict[str, str]
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Process:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        self.proc = subprocess.Popen(
            self.argv,
            cwd=REPO_ROOT,
            env={**os.environ, **self.env},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        return self

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: int) -> None:
        if self.running:
            assert self.proc is not None
            os.killpg(self.proc.pid, sig)

    def stop(self, grace: float = 20.0) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                self.signal(signal.SIGKILL)
                self.proc.wait()
        # Children the process left in its group (never expected) go too.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        return self.proc.returncode


def controller_process(
    index: int, kubeconfig: Path, log_dir: Path, redis_url: str | None, extra_env: dict | None
) -> Process:
    name = f"controller-{index}"
    env = {
        "POD_NAME": name,
        "HAPTIC_KUBECONFIG": str(kubeconfig),
        "HAPTIC_NAMESPACE": NAMESPACE,
        "HAPTIC_HEALTH_PORT": "0",
        "DJANGO_SETTINGS_MODULE": "haptic_site.settings",
        **({"REDIS_URL": redis_url} if redis_url else {}),
        **(extra_env or {}),
    }
    argv = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "haptic_site",
        "worker",
        "--leader-election",
        "--pool",
        "threads",
        "--concurrency",
        "4",
        "-Q",
        "celery",
        "-n",
        f"{name}@%h",
        "--without-gossip",
        "--without-mingle",
        "--loglevel",
        "INFO",
    ]
    return Process(name, argv, env, log_dir / f"{name}.log")


@dataclass
class Stack:
    state_dir: Path
    kubeconfig: Path
    token: str
    processes: list[Process] = field(default_factory=list)

    def api_client(self) -> kubernetes.client.ApiClient:
        return kubernetes.config.new_client_from_config(config_file=str(self.kubeconfig))


def new_token() -> str:
    return secrets.token_urlsafe(32)


def wait_for(predicate, timeout: float, interval: float = 0.2, what: str = "condition"):
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = predicate()
        except Exception as exc:  # retried until the deadline
            last_error = exc
            value = None
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError(f"timed out waiting for {what}" + (f": {last_error}" if last_error else ""))

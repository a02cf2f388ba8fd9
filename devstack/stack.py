"""The whole system on one machine: local cluster, HAProxy pods, controller replicas.

Used by `make run`, the end-to-end tests and the benchmarks, so all three exercise the same
stack. Manifests are built here as plain dicts and installed through the official
kubernetes client, exactly as they would be on a real cluster.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import kubernetes
from kubernetes.client.exceptions import ApiException

from config.env import child_environ, prepend_path
from contract import API_VERSION, GATE_CONDITION, GROUP, INGRESS_CONTROLLER
from controller.kubeclient import from_kubeconfig
from localcluster.node.processes import end

REPO_ROOT = Path(__file__).resolve().parent.parent
NAMESPACE = "haptic"
HAPROXY_LABELS = {"app.kubernetes.io/name": "haproxy"}


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
        "apiVersion": API_VERSION,
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
        if obj["apiVersion"].startswith(f"{GROUP}/"):
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
        ingress_class(),
    ]


def ingress_class() -> dict:
    """deploy/ingressclass.yaml (a test keeps them equal): the default class, haptic's."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "IngressClass",
        "metadata": {
            "name": "haptic",
            "annotations": {"ingressclass.kubernetes.io/is-default-class": "true"},
        },
        "spec": {"controller": INGRESS_CONTROLLER},
    }


# -- processes ------------------------------------------------------------------------------


def _death_signal(sig: int | None) -> Callable[[], None] | None:
    """A preexec_fn setting PR_SET_PDEATHSIG (async-signal-safe: one syscall, no locks)."""
    if sig is None or not sys.platform.startswith("linux"):
        return None
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_pdeathsig = 1

    def setup() -> None:
        libc.prctl(pr_set_pdeathsig, int(sig), 0, 0, 0)

    return setup


@dataclass
class Process:
    name: str
    argv: list[str]
    env: dict[str, str]
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None
    # Signal the child gets when its parent dies (Linux), so a supervisor that is killed
    # outright leaves no orphans; None for processes meant to outlive their starter. Linux
    # sends it when the *thread* that started the child ends: start it from one that lasts.
    parent_death_signal: int | None = None

    def start(self) -> Process:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        self.proc = subprocess.Popen(
            self.argv,
            cwd=REPO_ROOT,
            env=child_environ(self.env),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_death_signal(self.parent_death_signal),
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
        end(self.proc, grace, send=self.signal)
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
        return from_kubeconfig(str(self.kubeconfig))


def new_token() -> str:
    return secrets.token_urlsafe(32)


T = TypeVar("T")

# The poll of wait_for without a fixed interval: 20 ms at first, doubling to 200 ms, so a
# quick condition is seen at once and a long wait costs little CPU on a 2-core machine.
FIRST_POLL, LAST_POLL = 0.02, 0.2


def wait_for(
    predicate: Callable[[], T],
    timeout: float = 30.0,
    interval: float | None = None,
    what: str = "condition",
) -> T:
    """Poll `predicate` until it returns something truthy, and return that: the one wait of
    `make run`, the tests, the soak and the bench. An error it raises counts as "not yet"
    (the thing polled may not be up). `interval`: a fixed pause between polls, else 20 ms
    doubling to 200 ms. On timeout, TimeoutError names `what` and the last value or error."""
    deadline = time.monotonic() + timeout
    pause = interval if interval is not None else FIRST_POLL
    last: object = None
    while True:
        try:
            value = predicate()
        except Exception as exc:  # retried until the deadline
            last = exc
        else:
            if value:
                return value
            last = value
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout} s waiting for {what} (last: {last!r})")
        time.sleep(pause)
        if interval is None:
            pause = min(pause * 2, LAST_POLL)


# -- helpers shared by `make run`, the operator commands and their tests ---------------------


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def list_haproxy_pods(
    api_client: kubernetes.client.ApiClient, namespace: str = NAMESPACE, timeout: float = 5.0
) -> list[Any]:
    """HAProxy pods with an address, not being deleted, sorted by name."""
    selector = ",".join(f"{k}={v}" for k, v in HAPROXY_LABELS.items())
    pods = (
        kubernetes.client.CoreV1Api(api_client)
        .list_namespaced_pod(namespace, label_selector=selector, _request_timeout=timeout)
        .items
    )
    return sorted(
        (p for p in pods if not p.metadata.deletion_timestamp and p.status.pod_ip),
        key=lambda p: p.metadata.name,
    )


def sync_secret_token(api_client: kubernetes.client.ApiClient, token: str) -> bool:
    """Make the agent-token Secret hold `token` (a resumed cluster may hold an older one).

    True when it had to be changed.
    """
    core = kubernetes.client.CoreV1Api(api_client)
    secret = core.read_namespaced_secret("haptic-agent-token", NAMESPACE)
    current = base64.b64decode((secret.data or {}).get("token", "")).decode().strip()
    if current == token:
        return False
    core.patch_namespaced_secret("haptic-agent-token", NAMESPACE, {"stringData": {"token": token}})
    return True


def scale_deployment(api_client: kubernetes.client.ApiClient, name: str, replicas: int) -> None:
    """Set replicas when they differ (apply_objects leaves existing Deployments alone)."""
    apps = kubernetes.client.AppsV1Api(api_client)
    current = apps.read_namespaced_deployment(name, NAMESPACE)
    if (current.spec.replicas or 0) != replicas:
        apps.patch_namespaced_deployment(name, NAMESPACE, {"spec": {"replicas": replicas}})


def web_command(port: int, python: str = sys.executable) -> list[str]:
    """gunicorn serving the site on 127.0.0.1:port, as `make run` starts it.

    The request line is not capped at gunicorn's 4094 bytes: the API's schema lets every
    filter of a list be given at once, and a query it allows must not be refused as 414.
    """
    return [
        python, "-m", "gunicorn", "haptic_site.wsgi", "--bind", f"127.0.0.1:{port}",
        "--workers", "2", "--graceful-timeout", "10", "--limit-request-line", "0",
        "--access-logfile", "-",
    ]  # fmt: skip


def cluster_process(
    state_dir: Path, port: int, log_path: Path, admin_port: int = 0, real: bool = False
) -> Process:
    """`python -m localcluster up`: the API server plus the local node that runs the pods;
    with `real`, the real control plane (`make kube`) with the node as its kubelet."""
    argv = [
        sys.executable, "-m", "localcluster", "up", "--port", str(port),
        "--admin-port", str(admin_port), "--state-dir", str(state_dir),
        *(["--real"] if real else []),
    ]  # fmt: skip
    env = {"PYTHONPATH": prepend_path("PYTHONPATH", str(REPO_ROOT))}
    return Process("localcluster", argv, env, log_path)


def wait_for_log_line(
    proc: Process,
    offset: int,
    prefixes: tuple[str, ...],
    final: str,
    timeout: float,
    interrupted: Callable[[], bool] = lambda: False,
) -> dict[str, str]:
    """Follow the process's log from `offset` until the line `final`; returns the first
    line starting with each prefix (prefix -> rest of the line). Raises when the process
    exits or the deadline passes first."""
    found: dict[str, str] = {}
    deadline = time.monotonic() + timeout
    buffer = b""
    with open(proc.log_path, "rb") as log:
        log.seek(offset)
        while True:
            chunk = log.read()
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for raw in lines:
                line = raw.decode(errors="replace").strip()
                for prefix in prefixes:
                    if line.startswith(prefix) and prefix not in found:
                        found[prefix] = line[len(prefix) :].strip()
                if line == final:
                    return found
            if interrupted():
                raise InterruptedError(f"stopped waiting for {proc.name}")
            if not proc.running:
                raise RuntimeError(f"{proc.name} exited early; see {proc.log_path}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{proc.name} not {final!r} after {timeout:.0f}s")
            if not chunk:
                time.sleep(0.1)


def sweep_pods(state_dir: Path) -> list[int]:
    """Kill pod processes a local node under `state_dir` left behind (after a crash)."""
    from localcluster.node.processes import sweep

    return sweep(str(Path(state_dir).resolve()))


# -- the local cluster's pid file (shared by `make run` and `manage.py localcluster`) ---------

CLUSTER_PIDFILE = "localcluster.pid"


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def process_alive(pid: int) -> bool:
    """Alive and not a zombie (a zombie has exited; only its parent has not reaped it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def record_cluster_when_ready(
    var_dir: Path,
    proc: Process,
    offset: int,
    state_dir: Path,
    started_by: str,
    timeout: float,
    interrupted: Callable[[], bool] = lambda: False,
) -> dict[str, Any]:
    """Wait for a `cluster_process` to say it serves (its log from `offset`), then record it
    in var/ for `read_cluster_pidfile`; the record (pid, url, admin_url, state_dir)."""
    found = wait_for_log_line(
        proc,
        offset,
        ("apiserver listening on ", "admin listening on "),
        "ready",
        timeout=timeout,
        interrupted=interrupted,
    )
    assert proc.proc is not None
    info = {
        "pid": proc.proc.pid,
        "url": found["apiserver listening on "],
        "admin_url": found.get("admin listening on ", ""),
        "state_dir": str(state_dir),
        "started_by": started_by,
    }
    write_cluster_pidfile(var_dir, info)
    return info


def read_cluster_pidfile(var_dir: Path) -> dict[str, Any] | None:
    """The running local cluster recorded in var/, or None (no file, or a stale one).

    The pid must still be `python -m localcluster up` on the same state dir, so a pid the
    kernel reused for something else is never mistaken for (or signalled as) the cluster.
    """
    path = var_dir / CLUSTER_PIDFILE
    try:
        info = json.loads(path.read_text())
        pid = int(info["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    argv = _cmdline(pid)
    state_dir = str(info.get("state_dir", ""))
    if not process_alive(pid) or "localcluster" not in argv or state_dir not in argv:
        return None
    return info


def write_cluster_pidfile(var_dir: Path, info: dict[str, Any]) -> None:
    path = var_dir / CLUSTER_PIDFILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(info, indent=1) + "\n")
    tmp.replace(path)


def remove_cluster_pidfile(var_dir: Path, pid: int) -> None:
    """Remove the pid file only when it still names `pid` (never someone else's)."""
    path = var_dir / CLUSTER_PIDFILE
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        if int(json.loads(path.read_text())["pid"]) == pid:
            path.unlink()


def stop_group(pid: int, grace: float, should_hurry: Callable[[], bool] = lambda: False) -> bool:
    """SIGTERM a process group led by `pid`, SIGKILL it after `grace` seconds (or as soon
    as should_hurry() says so). True when it stopped within the grace period."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and not should_hurry():
        if not process_alive(pid):
            return True
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    return False

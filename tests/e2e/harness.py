"""The running system for end-to-end tests: a local cluster with its node, HAProxy pods
(agent + real haproxy), sample backends, and controller replicas as real Celery workers."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import kubernetes

from agents.client import AgentClient, AgentState
from contract import pod_ready
from devstack import stack
from localcluster.node import NodeAgent
from localcluster.ports import free_port
from localcluster.testing import ApiServer, start_cluster

LOG_ROOT = Path(os.environ.get("HAPTIC_TEST_ARTIFACTS", stack.REPO_ROOT / "test-artifacts"))


@dataclass
class System:
    api: ApiServer
    token: str
    token_file: Path
    log_dir: Path
    queue_suffix: str
    node: NodeAgent
    controllers: dict[str, stack.Process] = field(default_factory=dict)
    redis_url: str | None = None
    health_ports: dict[str, int] = field(default_factory=dict)
    # The controllers' credentials (the cluster's admin kubeconfig unless given).
    controller_kubeconfig: Path | None = None

    # -- Kubernetes ---------------------------------------------------------------------

    @property
    def client(self) -> kubernetes.client.ApiClient:
        return self.api.api_client()

    def core(self) -> kubernetes.client.CoreV1Api:
        return kubernetes.client.CoreV1Api(self.client)

    def apps(self) -> kubernetes.client.AppsV1Api:
        return kubernetes.client.AppsV1Api(self.client)

    def custom(self) -> kubernetes.client.CustomObjectsApi:
        return kubernetes.client.CustomObjectsApi(self.client)

    def apply(self, objects: Iterable[dict]) -> None:
        stack.apply_objects(self.client, list(objects))

    def haproxy_pods(self, ready_only: bool = True) -> list:
        pods = (
            self.core()
            .list_namespaced_pod(stack.NAMESPACE, label_selector="app.kubernetes.io/name=haproxy")
            .items
        )
        out = []
        for pod in pods:
            if pod.metadata.deletion_timestamp or not pod.status.pod_ip:
                continue
            if pod_ready(pod) or not ready_only:
                out.append(pod)
        return sorted(out, key=lambda p: p.metadata.name)

    def scale(self, name: str, replicas: int) -> None:
        self.apps().patch_namespaced_deployment(
            name, stack.NAMESPACE, {"spec": {"replicas": replicas}}
        )

    def leader_lease(self):
        return kubernetes.client.CoordinationV1Api(self.client).read_namespaced_lease(
            "haptic-leader", stack.NAMESPACE
        )

    def leader(self) -> str | None:
        try:
            return self.leader_lease().spec.holder_identity
        except kubernetes.client.ApiException:
            return None

    def published(self) -> dict | None:
        try:
            return self.custom().get_namespaced_custom_object(
                "haproxy-haptic.org", "v1alpha1", stack.NAMESPACE, "haproxycfgs", "haptic"
            )
        except kubernetes.client.ApiException:
            return None

    # -- agents and traffic --------------------------------------------------------------

    def agent(self, pod) -> AgentClient:
        return AgentClient(f"http://{pod.status.pod_ip}:8405", self.token, timeout=10)

    def agent_state(self, pod, verify: bool = False) -> AgentState:
        with self.agent(pod) as client:
            return client.state(verify=verify)

    def file_digests(self, path: str) -> set[str | None]:
        """The sha256 each HAProxy pod's agent reports for one of its files (None: absent)."""
        return {
            (self.agent_state(p).files.get(path) or {}).get("sha256")
            for p in self.haproxy_pods(ready_only=False)
        }

    def get(self, pod, host: str, path: str = "/", timeout: float = 5) -> httpx.Response:
        return httpx.get(
            f"http://{pod.status.pod_ip}:8080{path}", headers={"Host": host}, timeout=timeout
        )

    def serves(self, host: str, expect: str | None = None, pods=None) -> bool:
        """Every (ready) HAProxy pod answers 200 for host (with `expect` in the body)."""
        pods = pods if pods is not None else self.haproxy_pods(ready_only=False)
        if not pods:
            return False
        for pod in pods:
            try:
                response = self.get(pod, host, timeout=2)
            except httpx.HTTPError:
                return False
            if response.status_code != 200 or (expect and expect not in response.text):
                return False
        return True

    # -- controllers ---------------------------------------------------------------------

    def start_controller(
        self, name: str, extra_env: dict | None = None, kubeconfig: Path | None = None
    ) -> stack.Process:
        """A controller replica (a Celery worker); `kubeconfig` names another cluster for its
        template config, Leases and checkpoints (this system's cluster by default)."""
        port = free_port()
        self.health_ports[name] = port
        env = {
            "HAPTIC_HEALTH_PORT": str(port),
            "HAPTIC_LEADER_QUEUE": f"leader-{self.queue_suffix}",
            "HAPTIC_AGENT_TOKEN": self.token,
            **(extra_env or {}),
        }
        index = name.rsplit("-", 1)[-1]
        proc = stack.controller_process(
            int(index) if index.isdigit() else 0,
            kubeconfig or self.controller_kubeconfig or self.api.kubeconfig,
            self.log_dir,
            self.redis_url,
            env,
        )
        proc.name = name
        proc.env["POD_NAME"] = name
        proc.log_path = self.log_dir / f"{name}.log"
        proc.argv[proc.argv.index("-Q") + 1] = f"celery-{self.queue_suffix}"
        proc.argv[proc.argv.index("-n") + 1] = f"{name}-{self.queue_suffix}@%h"
        self.controllers[name] = proc.start()
        return proc

    def health(self, name: str, path: str = "/healthz", startup: float = 60.0) -> httpx.Response:
        """`startup`: how long a replica that runs but does not listen yet (a Celery worker
        still booting) may refuse the connection; a follower starts its health server only
        once its worker is up, which can trail the leader's by seconds on a loaded machine."""
        url = f"http://127.0.0.1:{self.health_ports[name]}{path}"
        deadline = time.monotonic() + startup
        while True:
            try:
                return httpx.get(url, timeout=5)
            except httpx.ConnectError:
                proc = self.controllers.get(name)
                if time.monotonic() > deadline or proc is None or not proc.running:
                    raise
                time.sleep(0.25)

    def stop(self) -> None:
        for proc in self.controllers.values():
            proc.stop(grace=30)
        self.node.stop(timeout=30)
        self.api.stop()
        shutil.rmtree(self.api.state_dir, ignore_errors=True)


def start_system(
    name: str,
    haproxy_replicas: int = 2,
    timings: stack.Timings | None = None,
    gate: bool = False,
    controllers: int = 2,
    template: bool = True,
    api: ApiServer | None = None,
    controller_kubeconfig: Path | None = None,
) -> System:
    """`template=False` leaves out the HAProxyTemplateConfig: the cluster is then only the
    workload of control planes that keep their configuration elsewhere. `api`: a cluster
    already started (the system owns it from here on; its node is started here)."""
    state_dir = api.state_dir if api is not None else Path(tempfile.mkdtemp(prefix="haptic-e2e-"))
    log_dir = LOG_ROOT / name
    shutil.rmtree(log_dir, ignore_errors=True)
    log_dir.mkdir(parents=True, exist_ok=True)
    if api is None:
        api = start_cluster(state_dir)
    # The node runs in this process (its pods are process groups it kills on stop).
    node = api.node(state_dir)
    try:
        node.start()
    except BaseException:
        api.stop()
        raise
    token = stack.new_token()
    token_file = state_dir / "agent-token"
    token_file.write_text(token + "\n")
    system = System(
        api,
        token,
        token_file,
        log_dir,
        uuid.uuid4().hex[:8],
        node,
        redis_url=os.environ.get("REDIS_URL"),
        controller_kubeconfig=controller_kubeconfig,
    )
    try:
        system.apply(stack.base_objects(token))
        if template:
            system.apply([stack.template_config(timings or stack.Timings.short(), gate=gate)])
        system.apply([stack.haproxy_deployment(haproxy_replicas, token_file)])
        for i in range(controllers):
            system.start_controller(f"controller-{i}")
    except Exception:
        system.stop()
        raise
    return system

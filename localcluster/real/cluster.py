"""The real control plane on one machine: etcd, kube-apiserver, kube-controller-manager and
kube-scheduler built by `make kube`, bound to 127.0.0.1, with their certificates, keys,
kubeconfigs, data and logs under one state dir."""

from __future__ import annotations

import base64
import json
import os
import signal
import ssl
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from config.env import kube_bin_dir
from localcluster.ports import free_port, free_ports

from . import pki

REPO_ROOT = Path(__file__).resolve().parents[2]
# `make kube` builds here (kube/build.sh); HAPTIC_KUBE_BIN points elsewhere.
BIN_DIR = kube_bin_dir(REPO_ROOT / "kube" / "bin")
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")
# What the controller manager runs: the controllers a haptic cluster relies on (the node
# plays the kubelet; nothing else of a full cluster is needed on one machine).
CONTROLLERS = (
    "deployment-controller",
    "replicaset-controller",
    "endpointslice-controller",
    "garbage-collector-controller",
    "namespace-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "root-ca-certificate-publisher-controller",
    "pod-garbage-collector-controller",
    "clusterrole-aggregation-controller",
    "service-cidr-controller",
    # Admission taints every new Node not-ready; this controller lifts the taint once the
    # node reports Ready (a node may not change its own taints), and watches its Lease.
    "node-lifecycle-controller",
)
# ClusterIPs are allocated from here; nothing routes to them (pods are reached directly).
SERVICE_CIDR = "198.19.0.0/16"
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [{"level": "Metadata"}],
}


def missing_binaries(bin_dir: Path = BIN_DIR) -> list[str]:
    """The control-plane programs not built yet (empty when `make kube` ran)."""
    return [name for name in BINARIES if not os.access(bin_dir / name, os.X_OK)]


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def client_certificate(pki_dir: Path, stem: str) -> dict[str, str]:
    """A kubeconfig user that authenticates with the client certificate `stem`."""
    return {
        "client-certificate-data": _b64(pki_dir / f"{stem}.crt"),
        "client-key-data": _b64(pki_dir / f"{stem}.key"),
    }


def write_kubeconfig(
    path: Path, server: str, ca_file: Path, user: dict[str, str], namespace: str = "default"
) -> None:
    """A self-contained kubeconfig (certificates inline) for `user` (certificate or token)."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "localcluster",
                "cluster": {"server": server, "certificate-authority-data": _b64(ca_file)},
            }
        ],
        "users": [{"name": "user", "user": user}],
        "contexts": [
            {
                "name": "localcluster",
                "context": {"cluster": "localcluster", "user": "user", "namespace": namespace},
            }
        ],
        "current-context": "localcluster",
    }
    tmp = path.with_suffix(".tmp")
    tmp.write_text(yaml.safe_dump(config))
    tmp.chmod(0o600)
    os.replace(tmp, path)


@dataclass
class ControlPlane:
    """Start with `start()`, stop with `stop()`; `url` and `kubeconfig` (admin) once up."""

    state_dir: Path
    port: int = 0
    node_name: str = "localnode"
    bin_dir: Path = BIN_DIR
    # Installed at start, as the local server installs them (None: the caller applies them).
    crd_dir: Path | None = REPO_ROOT / "deploy" / "crds"
    processes: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.state_dir = Path(self.state_dir).resolve()
        self.pki = self.state_dir / "pki"
        self.log_dir = self.state_dir / "logs"
        self.kubeconfig = self.state_dir / "kubeconfig"
        self.audit_log = self.log_dir / "audit.log"
        if not self.port:
            self.port = free_port()
        self.url = f"https://127.0.0.1:{self.port}"

    def kubeconfig_for(self, stem: str) -> Path:
        return self.state_dir / f"{stem}.kubeconfig"

    # -- start ------------------------------------------------------------------------------

    def start(self, timeout: float = 120.0) -> None:
        for _ in self.stages(time.monotonic() + timeout):
            pass

    def stages(self, deadline: float) -> Iterator[None]:
        """start() in steps: each yield leaves a process starting up. Stepping several planes
        in turn starts them in parallel from one thread (start_many); threads would not do,
        as a child's parent-death signal fires when the thread that started it ends."""
        missing = missing_binaries(self.bin_dir)
        if missing:
            raise RuntimeError(f"not built: {', '.join(missing)} (run `make kube`)")
        node = pki.node_identity(self.node_name)
        identities = [pki.ADMIN, pki.CONTROLLER_MANAGER, pki.SCHEDULER, node]
        pki.ensure_pki(self.pki, [*identities, pki.KUBELET_CLIENT])
        self.log_dir.mkdir(parents=True, exist_ok=True)
        ca = self.pki / "ca.crt"
        write_kubeconfig(self.kubeconfig, self.url, ca, client_certificate(self.pki, "admin"))
        for ident in identities[1:]:
            stem = ident.file_stem
            user = client_certificate(self.pki, stem)
            write_kubeconfig(self.kubeconfig_for(stem), self.url, ca, user)
        try:
            self.etcd_url = self._start_etcd()
            yield
            _wait_http(f"{self.etcd_url}/health", deadline, self._alive("etcd"))
            self._start_apiserver(self.etcd_url)
            yield
            self._wait_apiserver(deadline)
            # The garbage collector watches the kinds discovery shows when it starts and
            # looks again only every 30 s: the CRDs first, so their children are collected
            # from the first second (tests/real/test_garbage_collection.py).
            if self.crd_dir is not None:
                self.install_crds(self.crd_dir, deadline)
            self._start_controllers()
        except BaseException:
            self.stop()
            raise
        (self.state_dir / "apiserver.json").write_text(
            json.dumps({"url": self.url, "admin_url": "", "pid": os.getpid(), "real": True}) + "\n"
        )

    def _spawn(self, name: str, argv: list[str]) -> None:
        from devstack.stack import Process

        proc = Process(name, argv, {}, self.log_dir / f"{name}.log", None, signal.SIGKILL)
        self.processes[name] = proc.start()

    def _alive(self, name: str):
        proc = self.processes[name]

        def check() -> None:
            if not proc.running:
                tail = proc.log_path.read_text(errors="replace")[-3000:]
                raise RuntimeError(f"{name} exited ({proc.proc.returncode}):\n{tail}")

        return check

    def _start_etcd(self) -> str:
        client, peer = free_ports(count=2)
        etcd_url = f"http://127.0.0.1:{client}"
        peer_url = f"http://127.0.0.1:{peer}"
        self._spawn(
            "etcd",
            [
                str(self.bin_dir / "etcd"),
                "--name", "localcluster",
                "--data-dir", str(self.state_dir / "etcd"),
                "--listen-client-urls", etcd_url,
                "--advertise-client-urls", etcd_url,
                "--listen-peer-urls", peer_url,
                "--initial-advertise-peer-urls", peer_url,
                "--initial-cluster", f"localcluster={peer_url}",
                # One machine, throwaway data: skipping fsync keeps a loaded machine fast.
                "--unsafe-no-fsync",
                "--log-level", "warn",
            ],
        )  # fmt: skip
        return etcd_url

    def _start_apiserver(self, etcd_url: str) -> None:
        policy = self.state_dir / "audit-policy.yaml"
        policy.write_text(yaml.safe_dump(AUDIT_POLICY))
        p = self.pki
        self._spawn(
            "kube-apiserver",
            [
                str(self.bin_dir / "kube-apiserver"),
                "--etcd-servers", etcd_url,
                "--bind-address", "127.0.0.1",
                "--advertise-address", "127.0.0.1",
                "--secure-port", str(self.port),
                "--tls-cert-file", str(p / "apiserver.crt"),
                "--tls-private-key-file", str(p / "apiserver.key"),
                "--client-ca-file", str(p / "ca.crt"),
                "--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
                "--service-account-key-file", str(p / "sa.pub"),
                "--service-account-signing-key-file", str(p / "sa.key"),
                "--service-cluster-ip-range", SERVICE_CIDR,
                "--authorization-mode", "Node,RBAC",
                # Pod logs: the API server dials the node's InternalIP (its kubelet endpoint,
                # localcluster/node/kubeletapi.py) with this client certificate and checks
                # the node's serving certificate against the cluster CA.
                "--kubelet-client-certificate", str(p / f"{pki.KUBELET_CLIENT.file_stem}.crt"),
                "--kubelet-client-key", str(p / f"{pki.KUBELET_CLIENT.file_stem}.key"),
                "--kubelet-certificate-authority", str(p / "ca.crt"),
                "--kubelet-preferred-address-types", "InternalIP",
                "--enable-admission-plugins", "NodeRestriction",
                # The `kubernetes` Service's endpoints would be 127.0.0.1, which validation
                # refuses for Endpoints; nothing here reaches the API through that Service.
                "--endpoint-reconciler-type", "none",
                "--audit-policy-file", str(policy),
                "--audit-log-path", str(self.audit_log),
                "--audit-log-format", "json",
                "--event-ttl", "1h",
                "--profiling=false",
            ],
        )  # fmt: skip

    def _wait_apiserver(self, deadline: float) -> None:
        ctx = self.ssl_context()
        _wait_http(f"{self.url}/readyz", deadline, self._alive("kube-apiserver"), ctx)

    def service_account_kubeconfig(self, namespace: str, name: str, seconds: int = 7200) -> Path:
        """A kubeconfig with a bound token of ServiceAccount namespace/name (TokenRequest),
        as a pod of that ServiceAccount would get it."""
        import kubernetes

        api = kubernetes.config.new_client_from_config(config_file=str(self.kubeconfig))
        try:
            response = kubernetes.client.CoreV1Api(api).create_namespaced_service_account_token(
                name, namespace, {"spec": {"expirationSeconds": seconds}}
            )
        finally:
            api.close()
        path = self.state_dir / f"sa-{namespace}-{name}.kubeconfig"
        user = {"token": response.status.token}
        write_kubeconfig(path, self.url, self.pki / "ca.crt", user, namespace)
        return path

    def install_crds(self, crd_dir: Path, deadline: float) -> None:
        """Create (or leave) every CRD under crd_dir and wait until each is Established."""
        import kubernetes

        api = kubernetes.config.new_client_from_config(config_file=str(self.kubeconfig))
        ext = kubernetes.client.ApiextensionsV1Api(api)
        names = []
        for path in sorted(crd_dir.glob("*.yaml")):
            for doc in yaml.safe_load_all(path.read_text()):
                if not doc or doc.get("kind") != "CustomResourceDefinition":
                    continue
                names.append(doc["metadata"]["name"])
                try:
                    ext.create_custom_resource_definition(doc)
                except kubernetes.client.ApiException as exc:
                    if exc.status != 409:
                        raise
        served: dict[tuple[str, str], set[str]] = {}
        for name in names:
            while not _established(crd := ext.read_custom_resource_definition(name)):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"CRD {name} not Established")
                time.sleep(0.2)
            for version in crd.spec.versions:
                key = (crd.spec.group, version.name)
                served.setdefault(key, set()).add(crd.spec.names.plural)
        # Established comes a moment before discovery lists the resource; the controllers
        # started next read discovery once.
        objects = kubernetes.client.CustomObjectsApi(api)
        for (group, version), plurals in served.items():
            while not plurals <= _discovered(objects, group, version):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{group}/{version} not in discovery: {sorted(plurals)}")
                time.sleep(0.2)
        api.close()

    def ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.pki / "ca.crt"))
        ctx.load_cert_chain(self.pki / "admin.crt", self.pki / "admin.key")
        return ctx

    def _start_controllers(self) -> None:
        cm = str(self.kubeconfig_for(pki.CONTROLLER_MANAGER.file_stem))
        self._spawn(
            "kube-controller-manager",
            [
                str(self.bin_dir / "kube-controller-manager"),
                "--kubeconfig", cm,
                "--authentication-kubeconfig", cm,
                "--authorization-kubeconfig", cm,
                "--bind-address", "127.0.0.1",
                "--secure-port", "0",
                "--leader-elect=false",
                "--controllers", ",".join(CONTROLLERS),
                # Every controller acts as its own ServiceAccount, under RBAC, as in a cluster.
                "--use-service-account-credentials",
                "--service-account-private-key-file", str(self.pki / "sa.key"),
                "--root-ca-file", str(self.pki / "ca.crt"),
                "--concurrent-deployment-syncs", "5",
            ],
        )  # fmt: skip
        sched = str(self.kubeconfig_for(pki.SCHEDULER.file_stem))
        self._spawn(
            "kube-scheduler",
            [
                str(self.bin_dir / "kube-scheduler"),
                "--kubeconfig", sched,
                "--authentication-kubeconfig", sched,
                "--authorization-kubeconfig", sched,
                "--bind-address", "127.0.0.1",
                "--secure-port", "0",
                "--leader-elect=false",
            ],
        )  # fmt: skip

    def restart_apiserver(self, timeout: float = 120.0) -> None:
        proc = self.processes.pop("kube-apiserver", None)
        if proc is not None:
            proc.stop(grace=10)
        self._start_apiserver(self.etcd_url)
        self._wait_apiserver(time.monotonic() + timeout)

    # -- stop -------------------------------------------------------------------------------

    def stop(self) -> None:
        """Controllers first, then the API server, then etcd (each SIGTERM, then SIGKILL)."""
        for name in ("kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"):
            proc = self.processes.pop(name, None)
            if proc is not None:
                proc.stop(grace=10)


def _wait_http(url: str, deadline: float, alive, ctx: ssl.SSLContext | None = None) -> None:
    last = ""
    while time.monotonic() < deadline:
        alive()
        try:
            with urllib.request.urlopen(url, timeout=3, context=ctx) as resp:
                if resp.status == 200:
                    return
        except Exception as exc:  # not listening yet, or not ready (500 from /readyz)
            last = str(exc)
        time.sleep(0.2)
    raise RuntimeError(f"{url} not ready: {last}")


def _discovered(objects, group: str, version: str) -> set[str]:
    import kubernetes

    try:
        resources = objects.get_api_resources(group, version).resources
    except kubernetes.client.ApiException as exc:
        if exc.status == 404:
            return set()
        raise
    return {r.name for r in resources}


def _established(crd) -> bool:
    return any(c.type == "Established" and c.status == "True" for c in crd.status.conditions or [])


def start_many(planes: list[ControlPlane], timeout: float = 120.0) -> None:
    """Start every plane, their stages interleaved (the waits overlap); if one fails, the
    others are stopped too."""
    deadline = time.monotonic() + timeout
    steps = [plane.stages(deadline) for plane in planes]
    try:
        while steps:
            steps = [s for s in steps if next(s, StopIteration) is not StopIteration]
    except BaseException:
        for plane in planes:
            plane.stop()
        raise

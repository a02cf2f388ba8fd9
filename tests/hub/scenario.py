"""Two hubs on two local clusters: the Active's cluster (A) and the Standby's (B).

Shared by the end-to-end tests and bench/bench_hub.py. Everything talks to real local API
servers over HTTP; the only stand-in is the reconcile kick, a recording hook.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client
from prometheus_client import CollectorRegistry

from agents.manifest import build_manifest
from controller.hub.config import HaMode, HubConfig
from controller.hub.hub import Hub, build_hub
from controller.hub.kube import CFG, MAP, SECRET, TEMPLATE, Kube
from controller.hub.leases import EPOCH_ANNOTATION
from controller.hub.metrics import HubMetrics
from controller.hub.mirror_rules import CHECKPOINT_ROLE, ROLE_LABEL
from controller.kubeclient import bounded_copy

FAST: dict[str, float] = {
    "lease_duration": 2.0,
    "renew_deadline": 1.5,
    "retry_period": 0.5,
    "padding_seconds": 0.5,
    "promotion_dial_timeout": 0.3,
    "promotion_grace_period": 2.0,
    "publish_interval": 5.0,
    "mirror_prune_interval": 1.0,
}
ACTIVE_EPOCH = 41
GROUP_VERSION = "haproxy-haptic.org/v1alpha1"


def budget(config: HubConfig) -> float:
    """Issue 10's bound from the moment the Active dies: lease + padding + one poll + 1 s."""
    return config.lease_duration + config.padding_seconds + config.poll_interval + 1.0


def reload_manifest(cfg: bytes, token: dict[str, Any], previous: str | None) -> dict[str, Any]:
    """An agent apply manifest (reload mode) for one haproxy.cfg, carrying `token`."""
    digest = hashlib.sha256(cfg).hexdigest()
    return build_manifest(
        plan_id=digest,
        files={"haproxy.cfg": ("config", cfg)},
        structure_digest=digest,
        token=token,
        expected_previous_plan_id=previous,
        mode="reload",
    )


def secret(name: str, value: bytes = b"s3cret") -> dict[str, Any]:
    import base64

    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name},
        "data": {"token": base64.b64encode(value).decode()},
    }


def checkpoint(name: str, maps: list[str], certs: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": GROUP_VERSION,
        "kind": "HAProxyCfg",
        "metadata": {"name": name, "labels": {ROLE_LABEL: CHECKPOINT_ROLE}},
        "spec": {
            "path": "haproxy.cfg",
            "content": f"# {name}\nglobal\n",
            "checksum": "sha256:" + "0" * 64,
            "auxiliaryFiles": {
                "mapFiles": [
                    {"name": m, "path": f"maps/{m}.map", "checksum": "sha256:1"} for m in maps
                ],
                "certificates": [
                    {"secretName": c, "path": f"certs/{c}.pem", "checksum": "sha256:2"}
                    for c in certs
                ],
            },
        },
    }


def map_file(name: str, owner: dict[str, Any] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if owner is not None:
        meta["ownerReferences"] = [
            {
                "apiVersion": GROUP_VERSION,
                "kind": owner["kind"],
                "name": owner["metadata"]["name"],
                "uid": owner["metadata"]["uid"],
            }
        ]
    return {
        "apiVersion": GROUP_VERSION,
        "kind": "HAProxyMapFile",
        "metadata": meta,
        "spec": {"path": f"maps/{name}.map", "content": "example.com be\n", "checksum": "sha256:1"},
    }


def seed_active_cluster(kube: Kube, ns: str) -> dict[str, Any]:
    """The Active's configuration, one checkpoint with a child and Secrets, and its
    controller's leader Lease carrying the fencing epoch."""
    template = kube.create(
        TEMPLATE.collection(ns),
        {
            "apiVersion": GROUP_VERSION,
            "kind": "HAProxyTemplateConfig",
            "metadata": {"name": "haptic"},
            "spec": {
                "podSelector": {"matchLabels": {"app": "haproxy"}},
                "agent": {"tokenSecretRef": {"name": "agent-token"}},
            },
        },
    )
    kube.create(SECRET.collection(ns), secret("agent-token"))
    kube.create(SECRET.collection(ns), secret("tls-1", b"cert"))
    kube.create(SECRET.collection(ns), secret("unrelated"))
    cp = kube.create(CFG.collection(ns), checkpoint("cp-1", ["map-1"], ["tls-1"]))
    kube.create(MAP.collection(ns), map_file("map-1", cp))
    kube.create(
        CFG.collection(ns),
        {
            **checkpoint("haptic-published", [], []),
            "metadata": {"name": "haptic-published", "labels": {ROLE_LABEL: "published"}},
        },
    )
    client.CoordinationV1Api(kube.api_client).create_namespaced_lease(
        ns,
        client.V1Lease(
            metadata=client.V1ObjectMeta(
                name="haptic-leader", annotations={EPOCH_ANNOTATION: str(ACTIVE_EPOCH)}
            ),
            spec=client.V1LeaseSpec(holder_identity="controller-a-0", lease_duration_seconds=30),
        ),
    )
    return template


@dataclass
class Pair:
    a_client: client.ApiClient
    b_client: client.ApiClient
    remote_client: client.ApiClient
    ns: str
    active: Hub
    standby: Hub
    metrics: HubMetrics
    kicks: list[bool] = field(default_factory=list)

    def stop(self) -> None:
        self.standby.stop(release=False)
        self.active.stop(release=False)
        self.remote_client.close()


def start_pair(
    a_api: Any,
    b_api: Any,
    a_client: client.ApiClient,
    b_client: client.ApiClient,
    ns: str,
    tmp_path: Path,
    *,
    remote_namespace: str = "",
    **timing: float,
) -> Pair:
    ca = tmp_path / "ca.crt"
    ca.write_bytes(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    values = {**FAST, **timing}
    common = {"namespace": ns, "self_ca_bundle_path": str(ca), **values}
    active = build_hub(
        HubConfig(mode=HaMode.ACTIVE, identity="hub-a", self_endpoint=a_api.url, **common),
        a_client,
    )
    remote = bounded_copy(a_api.api_client())
    metrics = HubMetrics(CollectorRegistry())
    kicks: list[bool] = []
    standby_config = HubConfig(
        mode=HaMode.STANDBY,
        identity="hub-b",
        self_endpoint=b_api.url,
        active_kubeconfig=str(a_api.kubeconfig),
        active_namespace=remote_namespace,
        **common,
    )
    holder: dict[str, Hub] = {}
    standby = build_hub(
        standby_config,
        b_client,
        remote,
        kick=lambda: kicks.append(holder["hub"].fence.is_open()),
        metrics=metrics,
        mirror_watch_timeout=1.0,
    )
    holder["hub"] = standby
    pair = Pair(a_client, b_client, remote, ns, active, standby, metrics, kicks)
    active.start()
    standby.start()
    return pair

"""Fixtures for the hub tests: the Active's and the Standby's clusters (local API servers, or
real control planes with HAPTIC_TEST_CLUSTER=real), a fresh namespace per test, and helpers
that build hub parts against them."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from controller.hub.kube import TEMPLATE, Kube
from controller.kubeclient import bounded_copy
from localcluster.testing import ApiServer, api_servers, test_cluster_kind

REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Cluster:
    api: ApiServer
    client: client.ApiClient
    kube: Kube

    @property
    def url(self) -> str:
        return self.api.url


def _cluster(api: ApiServer) -> Cluster:
    c = bounded_copy(api.api_client())
    return Cluster(api=api, client=c, kube=Kube(c, 5.0))


def _servers_scope(fixture_name: str, config: pytest.Config) -> str:
    """Every test works in a fresh namespace, so the pair may outlive a module: on the real
    cluster (tens of seconds to start) one pair serves a whole worker session."""
    return "session" if test_cluster_kind() == "real" else "module"


@pytest.fixture(scope=_servers_scope)
def servers() -> Iterator[tuple[ApiServer, ApiServer]]:
    with api_servers(2) as (a, b):
        yield a, b


@pytest.fixture
def clusters(servers: tuple[ApiServer, ApiServer]) -> Iterator[tuple[Cluster, Cluster]]:
    a, b = (_cluster(s) for s in servers)
    try:
        yield a, b
    finally:
        for s in servers:
            s.clear_faults()
        a.client.close()
        b.client.close()


@pytest.fixture
def ns(clusters: tuple[Cluster, Cluster]) -> str:
    """A fresh namespace, created in both clusters."""
    name = f"hub-{uuid.uuid4().hex[:8]}"
    for c in clusters:
        client.CoreV1Api(c.client).create_namespace(
            client.V1Namespace(metadata=client.V1ObjectMeta(name=name))
        )
    return name


def template_body(name: str = "haptic", token_secret: str | None = "agent-token") -> dict[str, Any]:
    spec: dict[str, Any] = {"podSelector": {"matchLabels": {"app": "haproxy"}}}
    if token_secret:
        spec["agent"] = {"tokenSecretRef": {"name": token_secret}}
    return {
        "apiVersion": "haproxy-haptic.org/v1alpha1",
        "kind": "HAProxyTemplateConfig",
        "metadata": {"name": name},
        "spec": spec,
    }


def create_template(cluster: Cluster, ns: str, name: str = "haptic", **kw: Any) -> dict[str, Any]:
    return cluster.kube.create(TEMPLATE.collection(ns), template_body(name, **kw))


def get_template(cluster: Cluster, ns: str, name: str = "haptic") -> dict[str, Any]:
    return cluster.kube.get(TEMPLATE.item(ns, name))


@pytest.fixture(autouse=True)
def no_leaked_threads() -> Iterator[None]:
    """Every hub thread a test started has ended by the end of the test."""
    before = set(threading.enumerate())
    yield
    deadline = time.monotonic() + 10.0
    while True:
        leaked = [
            t
            for t in threading.enumerate()
            if t not in before and t.is_alive() and t.name.startswith(("hub-", "mirror-"))
        ]
        if not leaked or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert not leaked, f"threads left running: {[t.name for t in leaked]}"

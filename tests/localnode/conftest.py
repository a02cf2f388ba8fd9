"""One API server and one node per test module; a namespace per test, cleaned up with a check
that none of its processes survive."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kubernetes import client

from devstack.stack import wait_for
from localcluster.node import NodeAgent
from localcluster.node.processes import MARKER_ENV, marked_pids
from localcluster.testing import ApiServer, cluster_with_node

from .support import pids_with_env


@dataclass
class Cluster:
    api: ApiServer
    node: NodeAgent
    state_dir: Path
    core: client.CoreV1Api
    apps: client.AppsV1Api
    discovery: client.DiscoveryV1Api


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with cluster_with_node(tmp_path_factory.mktemp("cluster")) as (api, node):
        state_dir = node.state_dir
        ac = api.api_client()
        yield Cluster(
            api,
            node,
            state_dir,
            client.CoreV1Api(ac),
            client.AppsV1Api(ac),
            client.DiscoveryV1Api(ac),
        )
    # Nothing the node started may outlive it, and its workers stopped everything
    # themselves (the final sweep found nothing).
    assert node.swept == []
    assert marked_pids(str(state_dir)) == []
    assert pids_with_env(**{MARKER_ENV: str(state_dir)}) == []


@pytest.fixture
def ns(cluster: Cluster) -> Iterator[str]:
    name = f"t-{uuid.uuid4().hex[:8]}"
    cluster.core.create_namespace(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    yield name
    for dep in cluster.apps.list_namespaced_deployment(name).items:
        cluster.apps.delete_namespaced_deployment(dep.metadata.name, name)
    wait_for(
        lambda: not cluster.apps.list_namespaced_deployment(name).items, what="deployments gone"
    )
    for pod in cluster.core.list_namespaced_pod(name).items:
        try:
            cluster.core.delete_namespaced_pod(pod.metadata.name, name, grace_period_seconds=0)
        except client.ApiException as exc:
            if exc.status != 404:  # already removed by the Deployment's own cleanup
                raise
    wait_for(lambda: not cluster.core.list_namespaced_pod(name).items, what="pods gone")
    wait_for(
        lambda: not pids_with_env(**{MARKER_ENV: str(cluster.state_dir), "POD_NAMESPACE": name}),
        what=f"no processes left in {name}",
    )

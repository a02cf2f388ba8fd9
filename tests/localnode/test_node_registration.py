"""The node's Node object: registered Ready at start, NotReady once the node stops."""

from __future__ import annotations

from pathlib import Path

from kubernetes import client

from localcluster.node import NodeAgent
from localcluster.node.agent import DEFAULT_NODE_NAME
from localcluster.testing import ApiServer


def test_node_reports_ready_at_start_and_not_ready_when_it_stops(tmp_path: Path) -> None:
    with ApiServer.start(tmp_path / "cluster") as api:
        node = NodeAgent(api_url=api.url, state_dir=tmp_path / "node", kubeconfig=api.kubeconfig)
        node.start()
        core = client.CoreV1Api(api.api_client())
        got = core.read_node(DEFAULT_NODE_NAME)
        ready = got.status.conditions[0]
        assert (ready.type, ready.status) == ("Ready", "True")
        assert got.status.addresses[0].address == "127.0.0.1"
        node.stop(timeout=10)
        ready = core.read_node(DEFAULT_NODE_NAME).status.conditions[0]
        assert (ready.type, ready.status, ready.reason) == ("Ready", "False", "KubeletStopped")

"""The real control plane collects haptic's children from its first second: deleting a
checkpoint right after the cluster started removes its map file at once. The controller
manager's garbage collector watches the kinds its discovery found when it started and looks
again only every 30 s, so the CRDs must be Established before it starts
(localcluster/real/cluster.py, ControlPlane.stages). Started the other way round, a child of a
custom kind outlived its owner for up to 30 s, and the hub's mirror test timed out on it.

Skipped when the real control plane is not built (`make kube`, which needs Go).
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from kubernetes import client

from controller.hub.kube import CFG, MAP, Kube
from controller.kubeclient import from_kubeconfig
from devstack.stack import wait_for
from tests.hub.scenario import checkpoint, map_file
from tests.real import NEEDS_REAL_CONTROL_PLANE

pytestmark = [
    NEEDS_REAL_CONTROL_PLANE,
    pytest.mark.timeout(300),
]


def test_a_checkpoints_child_goes_with_it_right_after_the_cluster_starts(tmp_path: Path) -> None:
    from localcluster.real.testing import RealApiServer

    with RealApiServer.start(tmp_path / "cluster") as api:
        api_client = from_kubeconfig(str(api.plane.kubeconfig))
        try:
            kube = Kube(api_client, timeout=10)
            ns = f"gc-{uuid.uuid4().hex[:8]}"
            client.CoreV1Api(api_client).create_namespace({"metadata": {"name": ns}})
            cp = kube.create(CFG.collection(ns), checkpoint("cp-1", ["map-1"], []))
            kube.create(MAP.collection(ns), map_file("map-1", cp))
            meta = cp["metadata"]
            kube.delete(CFG.item(ns, "cp-1"), meta["uid"], meta["resourceVersion"])

            def map_gone() -> bool:
                names = {m["metadata"]["name"] for m in kube.list(MAP.collection(ns))["items"]}
                return "map-1" not in names

            # Collected in well under a second once the collector watches the kind; 10 s
            # leaves room for a loaded machine and stays far below the 30 s rediscovery.
            wait_for(map_gone, timeout=10)
        finally:
            api_client.close()

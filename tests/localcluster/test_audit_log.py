"""The API server's audit log attributes writes to the replica that sent them (issue 15:
the soak's "no HAProxyCfg write after the writer's Lease was released"), through the
clients the controller really uses: its User-Agent survives the bounded copies the elector
and the publisher make."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import kubernetes
import pytest

from controller.election import decisions
from controller.election.identity import replica_user_agent
from controller.election.lease_store import KubeLeaseStore
from controller.kubeclient import bounded_copy
from localcluster.testing import ApiServer
from soak import invariants as inv

NS = "default"
LEASE = "audit-leader"


@pytest.fixture()
def audited(tmp_path: Path) -> Iterator[tuple[ApiServer, Path]]:
    log = tmp_path / "audit.jsonl"
    with ApiServer.start(tmp_path / "state", extra_args=["--audit-log", str(log)]) as api:
        yield api, log


def replica_client(api: ApiServer, identity: str) -> kubernetes.client.ApiClient:
    c = api.api_client()
    c.user_agent = replica_user_agent(identity)  # as controller/replica_runtime.py names its client
    return c


def write_map(api_client: kubernetes.client.ApiClient, name: str) -> None:
    kubernetes.client.CustomObjectsApi(bounded_copy(api_client)).create_namespaced_custom_object(
        "haproxy-haptic.org",
        "v1alpha1",
        NS,
        "haproxymapfiles",
        {
            "apiVersion": "haproxy-haptic.org/v1alpha1",
            "kind": "HAProxyMapFile",
            "metadata": {"name": name},
            "spec": {"path": f"/maps/{name}", "content": "", "checksum": "sha256:0"},
        },
    )


def test_a_write_after_the_writers_release_is_attributed_and_flagged(
    audited: tuple[ApiServer, Path],
) -> None:
    api, log = audited
    c0 = replica_client(api, "controller-0")
    store = KubeLeaseStore(c0, NS, LEASE)  # its own bounded client, as the elector's
    wall = datetime.now(UTC)
    nothing = decisions.observe(None, None, 0.0)
    first = decisions.decide("controller-0", None, nothing, 0.0, wall, 15)
    assert first.record is not None
    held = store.create(first.record, timeout=5)
    write_map(c0, "while-held")
    store.update(decisions.release_record(held, wall), timeout=5)
    writes = inv.parse_audit(log.read_text().splitlines())
    assert [(w.writer, w.holder) for w in writes if w.holder is not None] == [
        ("controller-0", "controller-0"),
        ("controller-0", ""),
    ]
    assert inv.check_no_write_after_release(writes, LEASE).ok

    write_map(c0, "after-release")  # what a drained term must never do
    writes = inv.parse_audit(log.read_text().splitlines())
    result = inv.check_no_write_after_release(writes, LEASE)
    assert result.checked == 2
    assert len(result.violations) == 1, result.violations
    assert "controller-0 sent POST" in result.violations[0]
    assert "after-release" not in result.violations[0]  # the path is the collection's
    assert "released" in result.violations[0]

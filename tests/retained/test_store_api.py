"""The retained-state Lease adapter against the local API server over HTTP."""

from __future__ import annotations

import json
from collections.abc import Iterator

import kubernetes
import pytest
from kubernetes.client.exceptions import ApiException

from controller.retained.checkpoint import TemplateRef
from controller.retained.intent import INTENT_ANNOTATION, Term
from controller.retained.store import IntentRefused, RetainedStateStore
from localcluster.testing import ApiServer, start_cluster

NS = "haptic"
LEADER = "haptic-leader"


@pytest.fixture(scope="module")
def api() -> Iterator[ApiServer]:
    with start_cluster() as server:
        yield server


@pytest.fixture
def env(api: ApiServer, request: pytest.FixtureRequest):
    client = api.api_client()
    core = kubernetes.client.CoreV1Api(client)
    try:
        core.create_namespace({"metadata": {"name": NS}})
    except ApiException as exc:
        assert exc.status == 409
    name = f"t{abs(hash(request.node.name)) % 10**8}"
    custom = kubernetes.client.CustomObjectsApi(client)
    template = custom.create_namespaced_custom_object(
        "haproxy-haptic.org",
        "v1alpha1",
        NS,
        "haproxytemplateconfigs",
        {
            "apiVersion": "haproxy-haptic.org/v1alpha1",
            "kind": "HAProxyTemplateConfig",
            "metadata": {"name": name},
            "spec": {"podSelector": {"matchLabels": {"a": "b"}}},
        },
    )
    ref = TemplateRef(name, NS, template["metadata"]["uid"])
    leases = kubernetes.client.CoordinationV1Api(client)
    leader_name = f"{name}-leader"
    leases.create_namespaced_lease(NS, {"metadata": {"name": leader_name}, "spec": {}})
    yield ref, leases, leader_name, RetainedStateStore(client, ref, leader_name)


def set_leader(leases, name: str, holder: str | None, epoch: int, extra: dict | None = None):
    lease = leases.read_namespaced_lease(name, NS)
    annotations = dict(lease.metadata.annotations or {})
    annotations["haproxy-haptic.org/epoch"] = str(epoch)
    annotations.update(extra or {})
    lease.metadata.annotations = annotations
    lease.spec.holder_identity = holder
    leases.replace_namespaced_lease(name, NS, lease)


def test_claim_then_record_then_successor_preserves_the_intent(env) -> None:
    ref, leases, leader, store = env
    a = Term("replica-a", 1)
    set_leader(leases, leader, "replica-a", 1)
    store.claim(a)
    intent = store.record_intent(a, "plan-1", "sha256:1")
    assert intent.plan_id == "plan-1" and intent.epoch == 1
    lease = leases.read_namespaced_lease(store.name, NS)
    assert lease.metadata.owner_references[0].uid == ref.uid

    b = Term("replica-b", 2)
    set_leader(leases, leader, "replica-b", 2)
    result = store.claim(b)
    assert result.state.intent == intent  # preserved across the claim
    # The deposed term can no longer record.
    with pytest.raises(IntentRefused):
        store.record_intent(a, "plan-x", "sha256:x")
    assert store.read_intent() == intent
    assert store.record_intent(b, "plan-2", "sha256:2").holder == "replica-b"


def test_record_refused_when_the_leader_lease_moved_before_the_write(env) -> None:
    _, leases, leader, store = env
    a = Term("replica-a", 3)
    set_leader(leases, leader, "replica-a", 3)
    store.claim(a)
    set_leader(leases, leader, "replica-b", 4)  # the successor bumped the epoch, not claimed
    with pytest.raises(IntentRefused):
        store.record_intent(a, "plan-1", "sha256:1")
    assert store.read_intent() is None


def test_reclaim_after_the_leader_lease_was_recreated(env) -> None:
    _, leases, leader, store = env
    set_leader(leases, leader, "replica-a", 7)
    store.claim(Term("replica-a", 7))
    store.record_intent(Term("replica-a", 7), "plan-7", "sha256:7")
    # The leader Lease is deleted and recreated: its counter restarts.
    leases.delete_namespaced_lease(leader, NS)
    leases.create_namespaced_lease(NS, {"metadata": {"name": leader}, "spec": {}})
    set_leader(leases, leader, "replica-b", 1)
    result = store.claim(Term("replica-b", 1))
    assert result.term.epoch == 8
    lease = leases.read_namespaced_lease(leader, NS)
    assert lease.metadata.annotations["haproxy-haptic.org/epoch"] == "8"
    assert result.state.intent is not None and result.state.intent.plan_id == "plan-7"
    # Reclaim refuses when the leader Lease names someone else.
    set_leader(leases, leader, "replica-c", 1)
    with pytest.raises(IntentRefused):
        store.claim(Term("replica-b", 1))


def test_upgraded_leader_adopts_moves_and_removes_the_earlier_release_copy(env) -> None:
    ref, leases, leader, store = env
    copy = json.dumps(
        {
            "planID": "plan-old",
            "checksum": "sha256:old",
            "holder": "replica-a",
            "epoch": 2,
            "templateUID": ref.uid,
        }
    )
    set_leader(leases, leader, "replica-b", 3, {INTENT_ANNOTATION: copy})
    result = store.claim(Term("replica-b", 3))
    assert result.adopted_legacy_intent
    assert store.read_intent().plan_id == "plan-old"
    lease = leases.read_namespaced_lease(leader, NS)
    assert INTENT_ANNOTATION not in (lease.metadata.annotations or {})


def _legacy_copy(ref: TemplateRef, plan: str) -> str:
    return json.dumps(
        {
            "planID": plan,
            "checksum": f"sha256:{plan}",
            "holder": "replica-a",
            "epoch": 2,
            "templateUID": ref.uid,
        }
    )


def test_a_copy_whose_removal_failed_is_never_adopted_again(env, api: ApiServer) -> None:
    """Issue 15, 2.9: the removal of the copy fails (a renewal raced it); the next claim
    must remove it without adopting it over the newer intent recorded since."""
    ref, leases, leader, store = env
    set_leader(leases, leader, "replica-b", 3, {INTENT_ANNOTATION: _legacy_copy(ref, "plan-old")})
    # Every removal attempt conflicts, as if renewals kept racing it.
    api.add_fault(path_regex=f"/leases/{leader}$", methods=["PUT"], status=409)
    try:
        result = store.claim(Term("replica-b", 3))
    finally:
        api.clear_faults()
    assert result.adopted_legacy_intent and result.legacy_copy_pending
    assert INTENT_ANNOTATION in leases.read_namespaced_lease(leader, NS).metadata.annotations
    store.record_intent(Term("replica-b", 3), "plan-new", "sha256:new")

    set_leader(leases, leader, "replica-c", 4)  # the copy is still there
    result = store.claim(Term("replica-c", 4))
    assert not result.adopted_legacy_intent and not result.legacy_copy_pending
    assert store.read_intent().plan_id == "plan-new"
    assert INTENT_ANNOTATION not in (leases.read_namespaced_lease(leader, NS).metadata.annotations)


def test_a_removal_that_meets_a_renewal_is_retried_within_the_claim(env, api: ApiServer) -> None:
    ref, leases, leader, store = env
    set_leader(leases, leader, "replica-b", 3, {INTENT_ANNOTATION: _legacy_copy(ref, "plan-old")})
    api.add_fault(path_regex=f"/leases/{leader}$", methods=["PUT"], status=409, times=1)
    try:
        result = store.claim(Term("replica-b", 3))
    finally:
        api.clear_faults()
    assert result.adopted_legacy_intent and not result.legacy_copy_pending
    assert INTENT_ANNOTATION not in (leases.read_namespaced_lease(leader, NS).metadata.annotations)


def test_read_intent_does_not_create_the_retained_state_lease(env) -> None:
    """Issue 15, 2.12: a recovery read (no claim yet) reads; it never creates the Lease."""
    _, leases, _, store = env
    assert store.read_intent() is None
    with pytest.raises(ApiException) as missing:
        leases.read_namespaced_lease(store.name, NS)
    assert missing.value.status == 404


def test_the_first_claim_adopts_the_mirrored_intent_as_a_floor_once(env) -> None:
    """Issue 15, 2.10: the Active's last intent, mirrored onto this (Standby's) retained
    Lease, is adopted by the claim and consumed in the same write."""
    from controller.retained.intent import MIRRORED_INTENT_ANNOTATION

    ref, leases, leader, store = env
    set_leader(leases, leader, "ctl-b-0", 1)
    store.claim(Term("ctl-b-0", 1))  # the fenced pre-promotion term: nothing mirrored yet
    floor = {"planID": "plan-p", "checksum": "sha256:p", "holder": "ctl-a-0", "epoch": 7,
             "templateUID": ref.uid, "recordedAt": "t"}  # fmt: skip
    lease = leases.read_namespaced_lease(store.name, NS)
    lease.metadata.annotations[MIRRORED_INTENT_ANNOTATION] = json.dumps(floor)
    leases.replace_namespaced_lease(store.name, NS, lease)

    set_leader(leases, leader, "ctl-b-0", 8)  # promoted: above the Active's epoch
    result = store.claim(Term("ctl-b-0", 8))
    assert result.state.intent is not None and result.state.intent.plan_id == "plan-p"
    annotations = leases.read_namespaced_lease(store.name, NS).metadata.annotations
    assert MIRRORED_INTENT_ANNOTATION not in annotations
    # The promoted side's own newer intent is never replaced by a floor carried late.
    store.record_intent(Term("ctl-b-0", 8), "plan-q", "sha256:q")
    lease = leases.read_namespaced_lease(store.name, NS)
    lease.metadata.annotations[MIRRORED_INTENT_ANNOTATION] = json.dumps(floor)
    leases.replace_namespaced_lease(store.name, NS, lease)
    set_leader(leases, leader, "ctl-b-0", 9)
    assert store.claim(Term("ctl-b-0", 9)).state.intent.plan_id == "plan-q"


def _count_reads(store: RetainedStateStore) -> list[str]:
    """The names of the Leases the store reads, in order (the real call still runs)."""
    reads: list[str] = []
    real = store._api.read_namespaced_lease

    def counted(name: str, namespace: str, **kwargs):
        reads.append(name)
        return real(name, namespace, **kwargs)

    store._api.read_namespaced_lease = counted  # type: ignore[method-assign]
    return reads


def test_an_intent_record_writes_on_the_lease_the_store_last_wrote_without_reading_it(env):
    """Issue 19: each endpoint change records an intent; after the term's own claim or
    record, the next record is a compare-and-swap on the Lease as it was written, so it
    reads only the leader Lease (before and after), not the retained-state Lease.

    Failed before: every record read the retained-state Lease first."""
    _, leases, leader, store = env
    a = Term("replica-a", 1)
    set_leader(leases, leader, "replica-a", 1)
    store.claim(a)
    reads = _count_reads(store)
    for n in range(3):
        assert store.record_intent(a, f"plan-{n}", f"sha256:{n}").plan_id == f"plan-{n}"
    assert reads == [leader, leader] * 3
    stored = json.loads(
        leases.read_namespaced_lease(store.name, NS).metadata.annotations[INTENT_ANNOTATION]
    )
    assert stored["planID"] == "plan-2"


def test_a_lease_written_by_someone_else_since_is_read_again_never_overwritten(env):
    """The copy the store keeps is only ever a compare-and-swap's base: a write by another
    party since (here an annotation another writer added, and then a successor's claim)
    makes that write fail with 409; the record reads the Lease again and decides on it, so
    the other write stays and a claim by another term refuses the record."""
    _, leases, leader, store = env
    a = Term("replica-a", 1)
    set_leader(leases, leader, "replica-a", 1)
    store.claim(a)
    store.record_intent(a, "plan-1", "sha256:1")
    lease = leases.read_namespaced_lease(store.name, NS)
    lease.metadata.annotations["example.test/other-writer"] = "kept"
    leases.replace_namespaced_lease(store.name, NS, lease)
    reads = _count_reads(store)
    store.record_intent(a, "plan-2", "sha256:2")
    assert store.name in reads  # the 409 made it read the Lease again
    after = leases.read_namespaced_lease(store.name, NS).metadata.annotations
    assert after["example.test/other-writer"] == "kept"
    assert json.loads(after[INTENT_ANNOTATION])["planID"] == "plan-2"

    # A successor claims with another store (its own process); a's copy is now stale.
    b = Term("replica-b", 2)
    set_leader(leases, leader, "replica-b", 2)
    RetainedStateStore(store._api.api_client, store.template, leader).claim(b)
    set_leader(leases, leader, "replica-a", 1)  # even a Lease naming a again: the claim wins
    with pytest.raises(IntentRefused, match="claimed by another term"):
        store.record_intent(a, "plan-3", "sha256:3")
    final = json.loads(
        leases.read_namespaced_lease(store.name, NS).metadata.annotations[INTENT_ANNOTATION]
    )
    assert final["planID"] == "plan-2"

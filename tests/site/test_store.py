"""Mirror writes against PostgreSQL: idempotent, keyed by uid + resourceVersion, append-only."""

from __future__ import annotations

import copy

import pytest

from checkpoints import store
from checkpoints.models import (
    AuxiliaryObject,
    Checkpoint,
    CheckpointFile,
    DeploymentIntent,
    HubStatus,
    KubeEvent,
    LeadershipTerm,
    PodReceipt,
)
from tests.site import factories as f

pytestmark = pytest.mark.django_db


def test_replaying_the_same_objects_writes_nothing_new(history: dict) -> None:
    counts = [
        m.objects.count()
        for m in (
            Checkpoint,
            CheckpointFile,
            PodReceipt,
            DeploymentIntent,
            LeadershipTerm,
            KubeEvent,
        )
    ]
    store.apply_haproxycfg(history["old"])
    store.apply_haproxycfg(history["new"])
    store.apply_lease(f.retained_lease(history["plan"], history["checksum"], 3, rv="2"))
    assert counts == [
        m.objects.count()
        for m in (
            Checkpoint,
            CheckpointFile,
            PodReceipt,
            DeploymentIntent,
            LeadershipTerm,
            KubeEvent,
        )
    ]
    assert counts[:2] == [2, 5]  # 2 checkpoints; files: cfg+map+cert and cfg+map


def test_checkpoint_files_get_child_bytes_in_either_order() -> None:
    m = f.map_file("maps/x.map", "k v\n")
    cp = f.checkpoint("global\n", [m])
    store.apply_haproxycfg(cp)  # child not mirrored yet
    row = CheckpointFile.objects.get(path="maps/x.map")
    assert row.content is None
    store.apply_auxiliary(m)
    row.refresh_from_db()
    assert row.content == "k v\n"
    config = CheckpointFile.objects.get(path="haproxy.cfg", checkpoint__uid=cp["metadata"]["uid"])
    assert config.content == "global\n"


def test_certificate_bytes_are_never_stored(history: dict) -> None:
    cert = CheckpointFile.objects.get(kind="certificate")
    assert cert.content is None
    assert cert.checksum == f.sha("PRIVATE")


def test_older_resource_version_never_overwrites_newer() -> None:
    cp = f.checkpoint("global\n", rv="10")
    store.apply_haproxycfg(cp)
    stale = copy.deepcopy(cp)
    stale["metadata"]["resourceVersion"] = "9"
    stale["spec"]["planID"] = "stale"
    store.apply_haproxycfg(stale)
    assert Checkpoint.objects.get().plan_id == cp["spec"]["planID"]
    newer = copy.deepcopy(cp)
    newer["metadata"]["resourceVersion"] = "11"
    newer["spec"]["planID"] = "newer"
    store.apply_haproxycfg(newer)
    assert Checkpoint.objects.get().plan_id == "newer"


def test_deleted_checkpoint_stays_marked_collected(history: dict) -> None:
    store.delete_haproxycfg(history["old"])
    old = Checkpoint.objects.get(uid=history["old"]["metadata"]["uid"])
    assert old.collected and old.collected_at is not None
    assert old.files.count() == 3
    assert Checkpoint.objects.filter(collected=False).count() == 1


def test_relist_marks_what_disappeared_while_away(history: dict) -> None:
    present = {history["new"]["metadata"]["uid"], "published-uid"}
    assert store.relist_haproxycfgs(f.NS, present) == 1
    assert Checkpoint.objects.get(collected=True).uid == history["old"]["metadata"]["uid"]
    assert store.relist_auxiliary("map", f.NS, set()) == 2
    assert AuxiliaryObject.objects.filter(collected=True, kind="map").count() == 2


def test_receipts_accumulate_and_track_current(history: dict) -> None:
    assert PodReceipt.objects.filter(current=True).count() == 2
    # haproxy-1 moves to the new plan: a new row, the old receipt stays as history.
    store.apply_haproxycfg(
        f.published(
            [
                f.receipt(
                    "haproxy-0", history["plan"], history["checksum"], "2026-11-30T08:06:00Z"
                ),
                f.receipt(
                    "haproxy-1", history["plan"], history["checksum"], "2026-11-30T08:07:00Z"
                ),
            ],
            retained=[history["new"]],
            rv="2",
        )
    )
    assert PodReceipt.objects.count() == 3
    assert PodReceipt.objects.filter(current=True).count() == 2
    assert set(
        PodReceipt.objects.filter(current=True).values_list("applied_plan_id", flat=True)
    ) == {history["plan"]}


def test_promoted_follows_retained_configs(history: dict) -> None:
    assert list(Checkpoint.objects.filter(promoted=True).values_list("uid", flat=True)) == [
        history["new"]["metadata"]["uid"]
    ]
    store.apply_haproxycfg(f.published([], retained=[history["old"]], rv="3"))
    assert list(Checkpoint.objects.filter(promoted=True).values_list("uid", flat=True)) == [
        history["old"]["metadata"]["uid"]
    ]


def test_every_distinct_intent_and_term_is_kept() -> None:
    store.apply_lease(f.leader_lease("a", 1, "2026-11-30T08:00:00Z", "2026-11-30T08:00:10Z"))
    store.apply_lease(f.retained_lease("p1", "c1", 1, holder="a"))
    store.apply_lease(
        f.leader_lease("a", 1, "2026-11-30T08:00:00Z", "2026-11-30T08:00:40Z", rv="2")
    )
    store.apply_lease(
        f.leader_lease("b", 2, "2026-11-30T08:01:00Z", "2026-11-30T08:01:00Z", rv="3")
    )
    store.apply_lease(f.retained_lease("p2", "c2", 2, holder="b", rv="2"))
    store.apply_lease(f.retained_lease("p2", "c2", 2, holder="b", rv="3"))  # same intent again
    terms = list(LeadershipTerm.objects.order_by("epoch"))
    assert [(t.holder, t.epoch) for t in terms] == [("a", 1), ("b", 2)]
    assert terms[0].ended_at is not None and terms[1].ended_at is None
    assert terms[0].last_renew_at.second == 40
    assert list(DeploymentIntent.objects.order_by("epoch").values_list("plan_id", flat=True)) == [
        "p1",
        "p2",
    ]
    # A released Lease ends the current term.
    released = f.leader_lease("", 2, "2026-11-30T08:01:00Z", "2026-11-30T08:02:00Z", rv="4")
    store.apply_lease(released)
    assert LeadershipTerm.objects.filter(ended_at__isnull=True).count() == 0


def test_events_update_in_place_and_hub_status() -> None:
    ev = f.event("RetainedConfigActive", "first", count=1, uid="ev-1", rv="1")
    store.apply_event(ev)
    ev2 = f.event("RetainedConfigActive", "again", count=2, uid="ev-1", rv="2")
    store.apply_event(ev2)
    row = KubeEvent.objects.get()
    assert (row.count, row.message) == (2, "again")
    store.delete_event(ev2)
    assert KubeEvent.objects.get().collected
    store.apply_template_config(
        {
            "metadata": {"name": "haptic", "namespace": f.NS, "uid": f.TEMPLATE_UID},
            "status": {
                "activeController": {"activeIdentity": "hub-a", "endpoint": "https://a:6443"}
            },
        }
    )
    store.apply_lease(f.leader_lease("a", 1, "2026-11-30T08:00:00Z", "2026-11-30T08:09:00Z"))
    hub = HubStatus.objects.get()
    assert (hub.mode, hub.active_identity) == ("ha", "hub-a")
    assert hub.lease_renew_time.minute == 9


def test_replaying_an_older_lease_state_never_reopens_an_ended_term() -> None:
    first = f.leader_lease("a", 1, "2026-11-30T08:00:00Z", "2026-11-30T08:00:10Z", rv="1")
    second = f.leader_lease("b", 2, "2026-11-30T08:01:00Z", "2026-11-30T08:01:00Z", rv="2")
    store.apply_lease(first)
    store.apply_lease(second)
    store.apply_lease(first)  # a lagging mirror delivers the old state again
    open_terms = LeadershipTerm.objects.filter(ended_at__isnull=True)
    assert [(t.holder, t.epoch) for t in open_terms] == [("b", 2)]
    a = LeadershipTerm.objects.get(holder="a")
    assert a.ended_at == LeadershipTerm.objects.get(holder="b").acquired_at
    assert LeadershipTerm.objects.count() == 2

"""The mirror's pure decisions: selection, conflict guard, prune, owner re-pointing."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from controller.hub import mirror_rules as r

SRC = "active"


def obj(name: str, *, uid: str = "", rv: str = "1", labels=None, owners=(), spec=None, **kw):
    meta = {"name": name, "uid": uid or f"uid-{name}", "resourceVersion": rv}
    if labels:
        meta["labels"] = dict(labels)
    if owners:
        meta["ownerReferences"] = [
            {"apiVersion": "haproxy-haptic.org/v1alpha1", "kind": k, "name": n, "uid": u}
            for k, n, u in owners
        ]
    return {"metadata": meta, "spec": spec or {}, **kw}


def checkpoint(name: str, maps=(), certs=()):
    spec = {"auxiliaryFiles": {"mapFiles": [{"name": m} for m in maps],
                               "certificates": [{"secretName": c} for c in certs]}}  # fmt: skip
    return obj(name, labels={r.ROLE_LABEL: r.CHECKPOINT_ROLE}, spec=spec)


def test_wanted_selects_template_checkpoints_children_and_secrets() -> None:
    template = obj("haptic", spec={"agent": {"tokenSecretRef": {"name": "agent-token"}}})
    snapshot = {
        r.TEMPLATE: {"haptic": template, "other": obj("other")},
        r.CFG: {
            "cp-1": checkpoint("cp-1", maps=["map-shared"], certs=["tls-a"]),
            "published": obj("published", labels={r.ROLE_LABEL: "published"}),
        },
        r.MAP: {
            "map-shared": obj("map-shared"),
            "map-owned": obj("map-owned", owners=[("HAProxyCfg", "cp-1", "uid-cp-1")]),
            "map-pub": obj("map-pub", owners=[("HAProxyCfg", "published", "uid-published")]),
        },
        r.SECRET: {"agent-token": obj("agent-token"), "tls-a": obj("tls-a"), "db": obj("db")},
    }  # fmt: skip
    w = r.wanted(snapshot, "haptic")
    assert set(w[r.TEMPLATE]) == {"haptic"}
    assert set(w[r.CFG]) == {"cp-1"}
    assert set(w[r.MAP]) == {"map-shared", "map-owned"}
    assert set(w[r.SECRET]) == {"agent-token", "tls-a"}
    assert w[r.GENERAL] == {} and w[r.CRTLIST] == {}


def test_to_local_labels_annotates_and_repoints_owners() -> None:
    src = obj("map-owned", uid="src-uid", rv="77", labels={"a": "b"},
              owners=[("HAProxyCfg", "cp-1", "src-cp"), ("HAProxyCfg", "gone", "src-gone")],
              status={"observedGeneration": 1})  # fmt: skip
    src["metadata"]["managedFields"] = [{"manager": "x"}]
    local = r.to_local(src, SRC, "standby-ns", {"src-cp": "local-cp"})
    m = local["metadata"]
    assert m["namespace"] == "standby-ns"
    assert m["labels"] == {"a": "b", r.MIRROR_LABEL: SRC}
    assert m["annotations"][r.SOURCE_RV_ANNOTATION] == "77"
    assert m["annotations"][r.SOURCE_UID_ANNOTATION] == "src-uid"
    # A foreign uid would make local garbage collection delete the copy: re-point or drop.
    assert [o["uid"] for o in m["ownerReferences"]] == ["local-cp"]
    assert "uid" not in m and "resourceVersion" not in m and "managedFields" not in m
    assert "status" not in local


def test_unlabelled_local_object_is_never_overwritten() -> None:
    desired = r.to_local(obj("haptic", rv="9"), SRC, "ns", {})
    unlabelled = obj("haptic", rv="3")
    other_source = obj("haptic", labels={r.MIRROR_LABEL: "someone-else"})
    for local in (unlabelled, other_source):
        assert r.decide(local, desired, None, SRC, True) is r.Action.FOREIGN


def test_decide_create_update_status_unchanged() -> None:
    desired = r.to_local(obj("x", rv="9"), SRC, "ns", {})
    assert r.decide(None, desired, None, SRC, True) is r.Action.CREATE
    ours_old = {"metadata": {**desired["metadata"],
                             "annotations": {r.SOURCE_RV_ANNOTATION: "8"}}}  # fmt: skip
    assert r.decide(ours_old, desired, None, SRC, True) is r.Action.UPDATE
    ours_same = {"metadata": dict(desired["metadata"]), "status": {"a": 1}}
    assert r.decide(ours_same, desired, {"a": 1}, SRC, True) is r.Action.UNCHANGED
    assert r.decide(ours_same, desired, {"a": 2}, SRC, True) is r.Action.UPDATE_STATUS
    assert r.decide(ours_same, desired, {"a": 2}, SRC, False) is r.Action.UNCHANGED


def test_prune_waits_for_sync_and_deletes_only_our_labelled_objects() -> None:
    ours_gone = obj("gone", labels={r.MIRROR_LABEL: SRC})
    ours_kept = obj("kept", labels={r.MIRROR_LABEL: SRC})
    unlabelled = obj("local-only")
    foreign = obj("foreign", labels={r.MIRROR_LABEL: "other"})
    items = [ours_gone, ours_kept, unlabelled, foreign]
    assert r.prune(items, {"kept"}, SRC, synced=False) == []
    assert r.prune(items, {"kept"}, SRC, synced=True) == [ours_gone]


names = st.text(alphabet="abcdef", min_size=1, max_size=3)
label_values = st.sampled_from([None, SRC, "other"])


@given(
    local=st.dictionaries(names, label_values), wanted_names=st.sets(names), synced=st.booleans()
)
def test_prune_never_touches_what_is_not_ours(local, wanted_names, synced) -> None:
    items = [obj(n, labels={r.MIRROR_LABEL: v} if v else None) for n, v in local.items()]
    pruned = {o["metadata"]["name"] for o in r.prune(items, wanted_names, SRC, synced)}
    expected = (
        {n for n, v in local.items() if v == SRC and n not in wanted_names} if synced else set()
    )
    assert pruned == expected


@given(label=label_values, rv=st.text(alphabet="0123456789", min_size=1, max_size=4))
def test_only_our_label_allows_a_write(label, rv) -> None:
    desired = r.to_local(obj("x", rv=rv), SRC, "ns", {})
    local = obj("x", labels={r.MIRROR_LABEL: label} if label else None)
    action = r.decide(local, desired, None, SRC, True)
    assert (action is r.Action.FOREIGN) == (label != SRC)


def test_uid_map_from_our_copies_only() -> None:
    ours = obj("a", uid="local-a", labels={r.MIRROR_LABEL: SRC})
    ours["metadata"]["annotations"] = {r.SOURCE_UID_ANNOTATION: "src-a"}
    theirs = obj("b", uid="local-b")
    theirs["metadata"]["annotations"] = {r.SOURCE_UID_ANNOTATION: "src-b"}
    assert r.uid_map([ours, theirs], SRC) == {"src-a": "local-a"}


@given(
    roles=st.dictionaries(names, st.sampled_from([r.CHECKPOINT_ROLE, "published", None])),
    maps=st.dictionaries(names, st.tuples(st.sets(names, max_size=2), st.sets(names, max_size=2))),
)
def test_wanted_children_belong_to_a_mirrored_checkpoint(roles, maps) -> None:
    # maps: name -> (checkpoints referencing it by name, checkpoints owning it)
    cfgs = {}
    for name, role in roles.items():
        refs = [m for m, (by_ref, _) in maps.items() if name in by_ref]
        cfg = checkpoint(name, maps=refs) if role == r.CHECKPOINT_ROLE else obj(name)
        if role == "published":
            cfg = obj(name, labels={r.ROLE_LABEL: "published"},
                      spec=checkpoint(name, maps=refs)["spec"])  # fmt: skip
        cfgs[name] = cfg
    children = {
        m: obj(m, owners=[("HAProxyCfg", o, f"uid-{o}") for o in sorted(owned)])
        for m, (_, owned) in maps.items()
    }
    w = r.wanted({r.CFG: cfgs, r.MAP: children}, "haptic")
    checkpoints = {n for n, role in roles.items() if role == r.CHECKPOINT_ROLE}
    assert set(w[r.CFG]) == checkpoints
    expected = {m for m, (by_ref, owned) in maps.items() if (by_ref | owned) & checkpoints}
    assert set(w[r.MAP]) == expected
    assert w[r.TEMPLATE] == {} and w[r.SECRET] == {}

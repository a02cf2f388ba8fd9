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


# -- what recovery needs, re-parented to the local template (issue 15, 2.10) ---------------


def _active_checkpoint():
    """A checkpoint as the Active published it, with the uids its API server assigned."""
    from controller.retained.checkpoint import TemplateRef, encode_checkpoint, with_child_uids
    from controller.retained.receipts import PodReceipt
    from tests.retained.test_publication_api import output

    out = output(1)
    template = TemplateRef("haptic", "haptic", "uid-template-a")
    receipt = PodReceipt(
        "haproxy-0", "uid-pod", "rt", out.checksum, out.plan_id, out.plan_id, out.plan_id, "reload"
    )
    objs = encode_checkpoint(template, out.files, receipt, "t")
    children = [dict(c, metadata={**c["metadata"], "uid": f"a-{c['metadata']['name']}",
                                  "resourceVersion": "5"}) for c in objs.children]  # fmt: skip
    secrets = [dict(s, metadata={**s["metadata"], "uid": f"a-{s['metadata']['name']}",
                                 "resourceVersion": "6"}) for s in objs.secrets]  # fmt: skip
    uids = {o["metadata"]["name"]: o["metadata"]["uid"] for o in children + secrets}
    config = with_child_uids(objs.config, uids)
    config["metadata"].update(uid="a-checkpoint", resourceVersion="7")
    return out, children, secrets, config


def test_mirrored_checkpoint_is_re_parented_and_passes_every_integrity_check() -> None:
    from controller.publish.checkpoints import KIND_PLURALS
    from controller.retained.checkpoint import TemplateRef, decode_checkpoint
    from controller.retained.selection import CheckpointPointer

    out, children, secrets, config = _active_checkpoint()
    local_template = TemplateRef("haptic", "standby-ns", "uid-template-b")
    uid_map = {"uid-template-a": local_template.uid}
    local_children, local_secrets = {}, {}
    for src in children + secrets:  # children first (SYNC_ORDER), each gets a local uid
        copy_ = r.to_local(src, SRC, "standby-ns", uid_map)
        copy_["metadata"]["uid"] = "b-" + src["metadata"]["name"]
        uid_map[src["metadata"]["uid"]] = copy_["metadata"]["uid"]
        if src["kind"] == "Secret":
            local_secrets[copy_["metadata"]["name"]] = copy_
        else:
            local_children[(copy_["kind"], copy_["metadata"]["name"])] = copy_
    local_cfg = r.to_local(config, SRC, "standby-ns", uid_map)
    local_cfg["metadata"]["uid"] = "b-checkpoint"
    uid_map["a-checkpoint"] = "b-checkpoint"
    assert local_cfg["spec"]["checksum"] == out.checksum  # integrity preserved
    assert local_cfg["spec"]["content"] == config["spec"]["content"]

    # The pointer travels on the ordinary HAProxyCfg's status, re-pointed at the copy.
    status = {"retainedConfigs": [{"name": config["metadata"]["name"], "uid": "a-checkpoint",
                                   "checksum": out.checksum}]}  # fmt: skip
    (pointer,) = r.local_status(r.CFG, status, uid_map)["retainedConfigs"]
    assert pointer["uid"] == "b-checkpoint"
    decoded = decode_checkpoint(
        local_template,
        CheckpointPointer(pointer["name"], pointer["uid"], pointer["checksum"]),
        local_cfg,
        local_children,
        local_secrets,
    )
    assert decoded.snapshot.integrity_error is None, decoded.snapshot.integrity_error
    assert decoded.snapshot.plan_id == out.plan_id
    assert {f.path for f in decoded.files} == {f.path for f in out.files}
    assert set(KIND_PLURALS)  # the kinds recovery lists are the kinds mirrored
    # A copy left with the Active's uids is refused by recovery (the old mirror's copies).
    stale = r.to_local(config, SRC, "standby-ns", {"uid-template-a": local_template.uid})
    stale["metadata"]["uid"] = "b-checkpoint"
    refused = decode_checkpoint(
        local_template,
        CheckpointPointer(pointer["name"], "b-checkpoint", out.checksum),
        stale,
        local_children,
        local_secrets,
    )
    assert refused.snapshot.integrity_error is not None


def test_a_re_parented_copy_is_rewritten_when_a_local_uid_changes() -> None:
    _, children, _, config = _active_checkpoint()
    child = children[0]
    first = r.to_local(config, SRC, "ns", {"uid-template-a": "t", child["metadata"]["uid"]: "c1"})
    local = {**first, "metadata": {**first["metadata"], "uid": "x", "resourceVersion": "3"}}
    again = r.to_local(config, SRC, "ns", {"uid-template-a": "t", child["metadata"]["uid"]: "c1"})
    assert r.decide(local, again, None, SRC, has_status=False) is r.Action.UNCHANGED
    moved = r.to_local(config, SRC, "ns", {"uid-template-a": "t", child["metadata"]["uid"]: "c2"})
    assert r.decide(local, moved, None, SRC, has_status=False) is r.Action.UPDATE


def test_the_actives_intent_becomes_the_local_floor() -> None:
    import json

    raw = json.dumps({"planID": "p", "checksum": "sha256:c", "holder": "ctl-a-0", "epoch": 4,
                      "templateUID": "uid-template-a", "recordedAt": "t"})  # fmt: skip
    text = r.local_intent(raw, {"uid-template-a": "uid-template-b"})
    assert text is not None
    carried = json.loads(text)
    assert carried["templateUID"] == "uid-template-b"
    assert (carried["planID"], carried["epoch"], carried["holder"]) == ("p", 4, "ctl-a-0")
    assert r.local_intent(raw, {}) is None  # no local template copy yet
    assert r.local_intent("not json", {"uid-template-a": "b"}) is None
    assert r.local_intent(None, {"uid-template-a": "b"}) is None


def test_wanted_carries_the_ordinary_cfg_for_its_pointers() -> None:
    snapshot = {
        r.TEMPLATE: {"haptic": obj("haptic")},
        r.CFG: {
            "haptic": obj("haptic", labels={r.ROLE_LABEL: r.PUBLISHED_ROLE}),
            "other": obj("other", labels={r.ROLE_LABEL: r.PUBLISHED_ROLE}),
        },
    }
    assert set(r.wanted(snapshot, "haptic")[r.CFG]) == {"haptic"}

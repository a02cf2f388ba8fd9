"""Unit tests of the pure parts: selectors, patches, server-side apply, schema, store."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from localcluster import schema, ssa
from localcluster.errors import ApiError
from localcluster.patches import json_patch, merge_patch, strategic_merge
from localcluster.resources import Registry
from localcluster.selectors import (
    Requirement,
    labels_match,
    parse_field_selector,
    parse_label_selector,
)
from localcluster.store import DeleteOptions, Store

names = st.text(alphabet="abcxyz", min_size=1, max_size=3)
labels_st = st.dictionaries(names, names, max_size=4)
json_leaf = st.one_of(st.integers(-5, 5), st.text(alphabet="ab", max_size=2), st.booleans())
json_obj = st.recursive(
    st.dictionaries(names, json_leaf, max_size=3),
    lambda inner: st.dictionaries(names, st.one_of(json_leaf, inner), max_size=3),
    max_leaves=10,
)


# --- selectors ---------------------------------------------------------------------------


@settings(deadline=None)
@given(labels_st, names, names, st.sampled_from(["=", "!=", "in", "notin", "exists", "!exists"]))
def test_parsed_selector_matches_like_its_meaning(labels, key, value, op):
    text = {
        "=": f"{key}={value}",
        "!=": f"{key}!={value}",
        "in": f"{key} in ({value},zz)",
        "notin": f"{key} notin ({value})",
        "exists": key,
        "!exists": f"!{key}",
    }[op]
    [req] = parse_label_selector(text)
    present = key in labels
    expected = {
        "=": present and labels[key] == value,
        "!=": not present or labels[key] != value,
        "in": present and labels[key] in (value, "zz"),
        "notin": not present or labels[key] != value,
        "exists": present,
        "!exists": not present,
    }[op]
    assert labels_match([req], {"metadata": {"labels": labels}}) == expected


def test_selector_parsing_details():
    assert parse_label_selector("a in (x, y),b") == [
        Requirement("a", "In", ("x", "y")),
        Requirement("b", "Exists"),
    ]
    for bad in ("a in (b", "=x", "a=b,,c", "app in ()", "bad key=1"):
        with pytest.raises(ApiError):
            parse_label_selector(bad)
    assert parse_field_selector("status.phase!=Running", "Pod")[0].op == "!="
    with pytest.raises(ApiError):
        parse_field_selector("status.phase=Running", "ConfigMap")


# --- patches -------------------------------------------------------------------------------


def test_merge_patch_rfc7386_examples():
    assert merge_patch({"a": "b"}, {"a": "c"}) == {"a": "c"}
    assert merge_patch({"a": "b"}, {"b": "c"}) == {"a": "b", "b": "c"}
    assert merge_patch({"a": "b"}, {"a": None}) == {}
    assert merge_patch({"a": [{"b": "c"}]}, {"a": [1]}) == {"a": [1]}
    assert merge_patch({"e": None}, {"a": 1}) == {"e": None, "a": 1}


@settings(deadline=None)
@given(json_obj, json_obj)
def test_merge_patch_is_idempotent(target, patch):
    once = merge_patch(target, patch)
    assert merge_patch(once, patch) == once


@settings(deadline=None)
@given(json_obj)
def test_merge_patch_with_itself_and_empty_is_identity(doc):
    assert merge_patch(doc, {}) == doc
    assert merge_patch(doc, doc) == doc


def test_json_patch_operations_and_failed_test():
    doc = {"a": [1, 2], "b": {"c": 1}}
    out = json_patch(
        doc,
        [
            {"op": "add", "path": "/a/-", "value": 3},
            {"op": "move", "from": "/b/c", "path": "/d"},
            {"op": "copy", "from": "/a/0", "path": "/e"},
            {"op": "remove", "path": "/a/1"},
        ],
    )
    assert out == {"a": [1, 3], "b": {}, "d": 1, "e": 1}
    assert doc == {"a": [1, 2], "b": {"c": 1}}
    with pytest.raises(ApiError) as err:
        json_patch(doc, [{"op": "test", "path": "/b/c", "value": 2}])
    assert err.value.code == 422
    with pytest.raises(ApiError):
        json_patch(doc, [{"op": "replace", "path": "/missing", "value": 1}])


def test_a_failed_json_patch_says_what_the_real_server_says() -> None:
    """kube-apiserver answers a patch error as a generic 422: a fixed message and no causes
    (kubectl then prints "The request is invalid: " and the message; make fidelity compares
    that line)."""
    with pytest.raises(ApiError) as err:
        json_patch({"b": {"c": 1}}, [{"op": "test", "path": "/b/c", "value": 2}])
    status = err.value.status()
    assert (status["code"], status["reason"]) == (422, "Invalid")
    assert status["message"] == "the server rejected our request due to an error in our request"
    assert "causes" not in (status.get("details") or {})


@settings(deadline=None)
@given(
    st.lists(st.tuples(names, json_leaf), max_size=5, unique_by=lambda t: t[0]),
    st.lists(st.tuples(names, json_leaf), max_size=5, unique_by=lambda t: t[0]),
)
def test_strategic_merge_list_by_key_keeps_every_name(current, patch):
    keys = {"items": ("name",)}
    target = {"items": [{"name": n, "v": v} for n, v in current]}
    out = strategic_merge(
        target, {"items": [{"name": n, "v": v} for n, v in patch]}, keys, frozenset()
    )
    got = {i["name"]: i["v"] for i in out["items"]}
    assert got == {**dict(current), **dict(patch)}


def test_strategic_merge_directives():
    keys = {"spec.containers": ("name",)}
    target = {"spec": {"containers": [{"name": "a", "image": "1"}, {"name": "b"}]}}
    out = strategic_merge(
        target, {"spec": {"containers": [{"name": "a", "$patch": "delete"}]}}, keys, frozenset()
    )
    assert out["spec"]["containers"] == [{"name": "b"}]
    out = strategic_merge(target, {"spec": {"$patch": "replace", "x": 1}}, keys, frozenset())
    assert out["spec"] == {"x": 1}
    out = strategic_merge(
        {"metadata": {"finalizers": ["a"]}},
        {"metadata": {"finalizers": ["b", "a"]}},
        {},
        frozenset({"metadata.finalizers"}),
    )
    assert out["metadata"]["finalizers"] == ["a", "b"]


# --- server-side apply ---------------------------------------------------------------------

SHAPE = ssa.Shape({"status.conditions": ("type",)}, frozenset({"metadata.finalizers"}))


@settings(deadline=None)
@given(json_obj)
def test_fields_v1_round_trip(doc):
    paths = ssa.field_set(doc, SHAPE)
    assert ssa.from_fields_v1(ssa.to_fields_v1(paths)) == paths


def _cond(t: str, s: str) -> dict:
    return {"status": {"conditions": [{"type": t, "status": s}]}}


def test_two_appliers_share_a_list_map():
    live: dict = {"metadata": {"name": "p"}}
    managers: list[ssa.Manager] = []
    for manager, ctype, status in [("a", "A", "True"), ("b", "B", "False"), ("a", "A", "False")]:
        r = ssa.server_side_apply(
            live, _cond(ctype, status), managers, manager, "status", "v1", "t", False, SHAPE
        )
        assert not r.conflicts
        live, managers = r.obj, r.managers
    assert live["status"]["conditions"] == [
        {"type": "A", "status": "False"},
        {"type": "B", "status": "False"},
    ]
    r = ssa.server_side_apply(
        live, _cond("A", "True"), managers, "b", "status", "v1", "t", False, SHAPE
    )
    assert r.conflicts == [("a", ("f:status", "f:conditions", 'k:{"type":"A"}', "f:status"))]
    assert ssa.describe_path(r.conflicts[0][1]) == '.status.conditions[type="A"].status'
    # Dropping a condition from the applied config removes it (nobody else owns it).
    r = ssa.server_side_apply(
        live, {"status": {"conditions": []}}, managers, "b", "status", "v1", "t", False, SHAPE
    )
    assert r.obj["status"]["conditions"] == [{"type": "A", "status": "False"}]


def test_update_takes_ownership_from_appliers():
    live = {"data": {"x": "1"}}
    managers = ssa.server_side_apply({}, live, [], "a", "", "v1", "t", False, SHAPE).managers
    new = {"data": {"x": "2"}}
    after = ssa.record_update(live, new, managers, "editor", "", "v1", "t", SHAPE)
    assert [(m.manager, m.operation) for m in after] == [("editor", "Update")]


# --- schema --------------------------------------------------------------------------------

SCHEMA = {
    "type": "object",
    "properties": {
        "metadata": {"type": "object"},
        "spec": {
            "type": "object",
            "required": ["port"],
            "properties": {
                "port": {"type": "integer", "minimum": 1, "default": 80},
                "mode": {"type": "string", "enum": ["a", "b"], "default": "a"},
                "opts": {
                    "type": "object",
                    "properties": {"on": {"type": "boolean", "default": True}},
                },
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            },
        },
    },
}


def test_schema_defaults_prune_and_validate():
    obj = schema.apply_defaults(
        SCHEMA,
        {
            "metadata": {"name": "x", "labels": {"a": "b"}},
            "spec": {"opts": {}, "junk": 1, "free": {"k": 1}},
        },
    )
    assert obj["spec"] == {"port": 80, "mode": "a", "opts": {"on": True}, "free": {"k": 1}}
    assert obj["metadata"]["labels"] == {"a": "b"}
    assert schema.validate(SCHEMA, obj) == []
    causes = schema.validate(SCHEMA, {"spec": {"port": 0, "mode": "c"}})
    assert {c["field"] for c in causes} == {"spec.port", "spec.mode"}
    causes = schema.validate(SCHEMA, {"spec": {}})
    assert causes == [
        {"field": "spec.port", "reason": "FieldValueRequired", "message": "Required value"}
    ]


# --- store, without a server ---------------------------------------------------------------


class ListWatcher:
    def __init__(self, key: str) -> None:
        self.key, self.namespace, self.events = key, None, []

    def push(self, event) -> None:
        self.events.append(event)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.sampled_from(["create", "update", "delete"]), min_size=1, max_size=30))
def test_store_history_replays_to_current_state(ops):
    store = Store(Registry(), history_limit=1000)
    store.ensure_namespaces()
    rt = store.registry.get("", "v1", "configmaps")
    start = store.rv
    n = 0
    for op in ops:
        existing = sorted(store.objects.get(rt.key, {}))
        if op == "create" or not existing:
            store.create(rt, "default", {"metadata": {"name": f"c{n}"}}, "t")
            n += 1
        elif op == "update":
            ns, name = existing[0]
            store.patch(rt, ns, name, "merge", {"data": {"v": str(store.rv)}}, "", "t")
        else:
            ns, name = existing[-1]
            store.delete(rt, ns, name, DeleteOptions())
    w = ListWatcher(rt.key)
    replay: dict = {}
    for e in store.watch(rt, None, str(start), w):
        if e.type == "DELETED":
            replay.pop(e.obj["metadata"]["name"])
        else:
            replay[e.obj["metadata"]["name"]] = e.obj
    current = {k[1]: v for k, v in store.objects.get(rt.key, {}).items()}
    assert replay == current
    rvs = [e.rv for e in store.history]
    assert rvs == sorted(rvs) and len(set(rvs)) == len(rvs)


def test_store_history_limit_gives_410():
    store = Store(Registry(), history_limit=5)
    store.ensure_namespaces()
    rt = store.registry.get("", "v1", "configmaps")
    first = store.create(rt, "default", {"metadata": {"name": "a"}}, "t")
    for i in range(10):
        store.create(rt, "default", {"metadata": {"name": f"b{i}"}}, "t")
    with pytest.raises(ApiError) as err:
        store.watch(rt, None, first["metadata"]["resourceVersion"], ListWatcher(rt.key))
    assert err.value.code == 410


def test_store_gc_runs_when_pending_work_is_processed():
    store = Store(Registry())
    store.ensure_namespaces()
    rt = store.registry.get("", "v1", "configmaps")
    owner = store.create(rt, "default", {"metadata": {"name": "o"}}, "t")
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": owner["metadata"]["uid"]}
    store.create(rt, "default", {"metadata": {"name": "d", "ownerReferences": [ref]}}, "t")
    store.delete(rt, "default", "o", DeleteOptions())
    assert ("default", "d") in store.objects[rt.key]
    store.run_pending()
    assert ("default", "d") not in store.objects[rt.key]


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["m1", "m2", "m3"]), st.sampled_from(["True", "False"])),
        min_size=1,
        max_size=12,
    )
)
def test_appliers_owning_their_own_condition_never_clobber_each_other(steps):
    """Each manager applies only its own condition type: whatever the order, the result holds
    every manager's latest value and no apply conflicts."""
    live: dict = {"metadata": {"name": "p"}}
    managers: list[ssa.Manager] = []
    latest: dict[str, str] = {}
    for manager, status in steps:
        r = ssa.server_side_apply(
            live,
            _cond(f"type-{manager}", status),
            managers,
            manager,
            "status",
            "v1",
            "t",
            False,
            SHAPE,
        )
        assert not r.conflicts
        live, managers = r.obj, r.managers
        latest[f"type-{manager}"] = status
    got = {c["type"]: c["status"] for c in live["status"]["conditions"]}
    assert got == latest
    owners = {m.manager for m in managers}
    assert owners == {m for m, _ in steps}


def test_tables_for_kubectl_get():
    from localcluster import tables

    registry = Registry()
    pod_rt = registry.get("", "v1", "pods")
    pod = {
        "metadata": {"name": "p", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"containers": [{"name": "a"}, {"name": "b"}], "nodeName": "n"},
        "status": {
            "phase": "Running",
            "podIP": "127.0.0.2",
            "containerStatuses": [{"ready": True, "restartCount": 2}],
        },
    }
    table = tables.to_table(pod_rt, [pod], {"resourceVersion": "5"})
    assert [c["name"] for c in table["columnDefinitions"]][:3] == ["Name", "Ready", "Status"]
    assert table["rows"][0]["cells"][:4] == ["p", "1/2", "Running", 2]
    assert tables.age("2026-01-01T00:00:00Z", now=1767225600 + 300) == "5m"
    from localcluster.resources import resource_types_from_crd

    [cfg_rt] = resource_types_from_crd(
        {
            "spec": {
                "group": "g",
                "names": {"plural": "xs", "kind": "X"},
                "versions": [
                    {
                        "name": "v1",
                        "served": True,
                        "additionalPrinterColumns": [
                            {
                                "name": "Role",
                                "type": "string",
                                "jsonPath": ".metadata.labels.haproxy-haptic\\.org/role",
                            }
                        ],
                    }
                ],
            }
        }
    )
    obj = {"metadata": {"name": "x", "labels": {"haproxy-haptic.org/role": "checkpoint"}}}
    row = tables.to_table(cfg_rt, [obj], {})["rows"][0]
    assert row["cells"][:2] == ["x", "checkpoint"]


def test_journal_round_trip_with_torn_tail(tmp_path):
    from localcluster.persist import Journal

    j = Journal(tmp_path)
    j.compact(3, {("/configmaps", "default", "a"): {"metadata": {"name": "a"}}})
    j.append(4, ("/configmaps", "default", "b"), {"metadata": {"name": "b"}})
    j.append(5, ("/configmaps", "default", "a"), None)
    j.close()
    with (tmp_path / "journal.jsonl").open("a") as f:
        f.write('{"rv": 6, "k": ["/config')  # a crash mid-write
    rv, objects, records = Journal(tmp_path).load()
    assert rv == 3 and list(objects) == [("/configmaps", "default", "a")]
    assert [(r[0], r[2] is None) for r in records] == [(4, False), (5, True)]
    store = Store(Registry())
    store.restore(rv, objects, records)
    assert store.rv == 5 and store.history_start == 3
    assert [e.type for e in store.history] == ["ADDED", "DELETED"]
    assert sorted(store.objects["/configmaps"]) == [("default", "b")]


@settings(max_examples=30, deadline=None)
@given(
    st.sets(st.text(alphabet="abc", min_size=1, max_size=4), max_size=15),
    st.integers(1, 6),
    st.sets(st.text(alphabet="abc", min_size=1, max_size=4), max_size=5),
)
def test_paged_lists_concatenate_to_the_snapshot_even_with_concurrent_writes(names, page, later):
    store = Store(Registry())
    store.ensure_namespaces()
    rt = store.registry.get("", "v1", "configmaps")
    for n in sorted(names):
        store.create(rt, "default", {"metadata": {"name": n}}, "t")
    full, list_rv, _, _ = store.list(rt, "default")
    got, _, token, _ = store.list(rt, "default", limit=page)
    # Writes between pages do not leak into the paged result.
    for n in sorted(later - names):
        store.create(rt, "default", {"metadata": {"name": n}}, "t")
    for n in sorted(names & later):
        store.delete(rt, "default", n, DeleteOptions())
    while token:
        more, rv, token, _ = store.list(rt, "default", limit=page, continue_token=token)
        assert rv == list_rv
        got += more
    assert [o["metadata"]["name"] for o in got] == [o["metadata"]["name"] for o in full]


def _slow_diff(old, new, shape):
    """Reference: compare the full field sets path by path."""
    new_paths, old_paths = ssa.field_set(new, shape), ssa.field_set(old, shape)
    changed = {
        p
        for p in new_paths
        if p not in old_paths or ssa.get_path(old, p, shape) != ssa.get_path(new, p, shape)
    }
    return changed, old_paths - new_paths


cond_st = st.fixed_dictionaries(
    {"type": st.sampled_from(["A", "B", "C"])},
    optional={"status": st.sampled_from(["True", "False"]), "reason": json_leaf},
)
obj_st = st.fixed_dictionaries(
    {
        "metadata": st.fixed_dictionaries(
            {"name": st.just("x")},
            optional={
                "labels": st.dictionaries(names, names, max_size=3),
                "finalizers": st.lists(names, max_size=3, unique=True),
                "resourceVersion": st.sampled_from(["1", "2"]),
            },
        )
    },
    optional={
        "spec": json_obj,
        "status": st.fixed_dictionaries(
            {},
            optional={
                "conditions": st.lists(cond_st, max_size=3, unique_by=lambda c: c["type"]),
                "phase": json_leaf,
            },
        ),
    },
)


@settings(max_examples=200, deadline=None)
@given(obj_st, obj_st)
def test_fast_diff_paths_equals_full_field_set_comparison(old, new):
    assert ssa.diff_paths(old, new, SHAPE) == _slow_diff(old, new, SHAPE)


def test_events_expire_after_their_ttl():
    store = Store(Registry())
    store.ensure_namespaces()
    rt = store.registry.get("", "v1", "events")
    store.create(rt, "default", {"metadata": {"name": "ev"}, "reason": "X"}, "t")
    watcher = ListWatcher(rt.key)
    store.watch(rt, None, str(store.rv), watcher)
    assert store.expire_events(3600) == 0
    assert store.expire_events(3600, now=time.time() + 3601) == 1
    assert ("default", "ev") not in store.objects[rt.key]
    assert [e.type for e in watcher.events] == ["DELETED"]


def test_ingress_table_has_kubectls_columns_with_the_address():
    # Issue 18: `kubectl get ingress` shows CLASS, HOSTS, ADDRESS, PORTS as the real server.
    from localcluster import tables

    rt = Registry().get("networking.k8s.io", "v1", "ingresses")
    ing = {
        "metadata": {"name": "web", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {
            "ingressClassName": "haptic",
            "rules": [{"host": "a.test"}, {"host": "b.test"}, {}],
            "tls": [{"hosts": ["a.test"]}],
        },
        "status": {"loadBalancer": {"ingress": [{"ip": "127.0.0.5"}, {"hostname": "lb.test"}]}},
    }
    bare = {"metadata": {"name": "bare"}, "spec": {}}
    table = tables.to_table(rt, [ing, bare], {})
    names = [c["name"] for c in table["columnDefinitions"]]
    assert names == ["Name", "Class", "Hosts", "Address", "Ports", "Age"]
    assert table["rows"][0]["cells"][:5] == [
        "web",
        "haptic",
        "a.test,b.test",  # rules without a host add nothing
        "127.0.0.5,lb.test",
        "80, 443",
    ]
    assert table["rows"][1]["cells"][:5] == ["bare", "<none>", "*", "", "80"]


def test_date_time_format_is_validated_as_the_real_server_does() -> None:
    """kube-apiserver refuses a `format: date-time` string that is no timestamp (found when
    tests/retained ran on the real cluster with acknowledgedAt "t")."""
    at = {"type": "object", "properties": {"at": {"type": "string", "format": "date-time"}}}
    for good in (
        "2026-12-01T10:00:00Z",
        "2026-12-01T10:00:00.123456Z",
        "2026-12-01T10:00:00+01:00",
    ):
        assert schema.validate(at, {"at": good}) == [], good
    (cause,) = schema.validate(at, {"at": "t"})
    assert cause["field"] == "at" and cause["reason"] == "FieldValueTypeInvalid"
    assert cause["message"] == 'Invalid value: "t": at in body must be of type date-time: "t"'

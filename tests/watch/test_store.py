"""Store: applying watch events with resourceVersion ordering, relist, indexes (no I/O)."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.watch.store import (
    ADDED,
    DELETED,
    MODIFIED,
    SERVICE_NAME_LABEL,
    Store,
    index_by_label,
    index_by_namespace,
    index_by_readiness_gate,
    object_key,
    rv_compare,
)

NAMES = ["a", "b", "c", "d"]
NAMESPACES = ["ns1", "ns2"]
SERVICES = ["web", "api", None]


def obj(ns: str, name: str, rv: int, service: str | None = None, payload: int = 0) -> dict:
    labels = {SERVICE_NAME_LABEL: service} if service else {}
    return {
        "metadata": {"namespace": ns, "name": name, "resourceVersion": str(rv), "labels": labels},
        "data": payload,
    }


def slice_store() -> Store:
    return Store({"svc": index_by_label(SERVICE_NAME_LABEL), "ns": index_by_namespace})


# A history: per step, pick a key and an action; resourceVersions increase globally, as a
# single API server hands them out.
step = st.tuples(
    st.sampled_from(NAMESPACES),
    st.sampled_from(NAMES),
    st.sampled_from(["upsert", "delete"]),
    st.sampled_from(SERVICES),
)


def history(steps) -> list[tuple[str, dict]]:
    """Turn steps into the event stream a watch would deliver (ADDED/MODIFIED/DELETED)."""
    live: dict = {}
    events = []
    for rv, (ns, name, action, svc) in enumerate(steps, start=10):
        key = (ns, name)
        if action == "upsert":
            o = obj(ns, name, rv, svc, payload=rv)
            events.append((MODIFIED if key in live else ADDED, o))
            live[key] = o
        elif key in live:
            d = dict(live.pop(key))
            d["metadata"] = {**d["metadata"], "resourceVersion": str(rv)}
            events.append((DELETED, d))
    return events


def final_state(events) -> dict:
    state: dict = {}
    for etype, o in events:
        if etype == DELETED:
            state.pop(object_key(o), None)
        else:
            state[object_key(o)] = o
    return state


def assert_indexes_consistent(store: Store) -> None:
    expected: dict[str, set] = {}
    for o in store.list():
        svc = o["metadata"]["labels"].get(SERVICE_NAME_LABEL)
        if svc:
            expected.setdefault(f"{object_key(o)[0]}/{svc}", set()).add(object_key(o))
    assert store.index_values("svc") == sorted(expected)
    for value, keys in expected.items():
        assert [object_key(o) for o in store.by_index("svc", value)] == sorted(keys)
    for ns in NAMESPACES:
        assert store.by_index("ns", ns) == [o for o in store.list() if object_key(o)[0] == ns]


@given(st.lists(step, max_size=40))
def test_in_order_events_give_the_final_state(steps):
    events = history(steps)
    store = slice_store()
    for etype, o in events:
        store.apply(etype, o)
    expected = final_state(events)
    assert store.list_keys() == sorted(expected)
    for key, o in expected.items():
        assert store.get(*key) is o
    assert_indexes_consistent(store)
    if events:
        assert store.resource_version == events[-1][1]["metadata"]["resourceVersion"]


@settings(max_examples=200)
@given(st.lists(step, max_size=30), st.randoms(use_true_random=False), st.integers(0, 10))
def test_replayed_and_reordered_events_never_roll_back(steps, rnd: random.Random, dups: int):
    """Whatever order (and however often) events arrive, each object ends as its newest event
    says: a stale MODIFIED cannot overwrite, a late ADDED cannot resurrect a deleted object."""
    events = history(steps)
    shuffled = list(events) + [rnd.choice(events) for _ in range(dups)] if events else []
    rnd.shuffle(shuffled)
    store = slice_store()
    for etype, o in shuffled:
        store.apply(etype, o)
    assert {k: o["data"] for k, o in final_state(events).items()} == {
        object_key(o): o["data"] for o in store.list()
    }
    assert_indexes_consistent(store)


@given(st.lists(step, max_size=25), st.lists(step, max_size=25))
def test_replace_reports_exactly_the_difference(before_steps, after_steps):
    store = slice_store()
    for etype, o in history(before_steps):
        store.apply(etype, o)
    old = {object_key(o): o for o in store.list()}
    # The fresh list: a later state with higher resourceVersions.
    fresh = [
        obj(o["metadata"]["namespace"], o["metadata"]["name"], 1000 + i, payload=-i)
        for i, (_, o) in enumerate(history(after_steps))
    ]
    fresh_state = {object_key(o): o for o in fresh}
    changes = store.replace(fresh, "5000")
    model = dict(old)
    for c in changes:
        if c.type == DELETED:
            assert object_key(c.obj) in model
            del model[object_key(c.obj)]
        elif c.type == ADDED:
            assert object_key(c.obj) not in model
            model[object_key(c.obj)] = c.obj
        else:
            assert c.old is model[object_key(c.obj)]
            model[object_key(c.obj)] = c.obj
    assert model == fresh_state
    assert {object_key(o): o for o in store.list()} == fresh_state
    assert store.resource_version == "5000"
    assert_indexes_consistent(store)


def test_stale_and_duplicate_events_are_not_reported():
    store = Store()
    assert store.apply(ADDED, obj("n", "a", 5)).type == ADDED
    assert store.apply(ADDED, obj("n", "a", 5)) is None  # duplicate delivery
    assert store.apply(MODIFIED, obj("n", "a", 4)) is None  # older than what we hold
    change = store.apply(MODIFIED, obj("n", "a", 7, payload=1))
    assert change.type == MODIFIED and change.old["metadata"]["resourceVersion"] == "5"
    assert store.apply(DELETED, obj("n", "a", 6)) is None  # deletion of an older incarnation
    assert store.apply(DELETED, obj("n", "a", 8)).type == DELETED
    assert store.apply(ADDED, obj("n", "a", 7)) is None  # late, before the deletion
    assert store.apply(ADDED, obj("n", "a", 9)).type == ADDED  # recreated after it
    assert len(store) == 1


def test_unordered_resource_versions_always_apply():
    # Opaque (non-integer) versions cannot be ordered: trust the stream order.
    store = Store()
    a1 = {"metadata": {"namespace": "n", "name": "a", "resourceVersion": "xyz"}}
    a2 = {"metadata": {"namespace": "n", "name": "a", "resourceVersion": "abc"}}
    assert store.apply(ADDED, a1).type == ADDED
    assert store.apply(MODIFIED, a2).type == MODIFIED
    assert store.get("n", "a") is a2
    assert rv_compare("10", "9") == 1 and rv_compare("x", "9") is None


def test_tombstones_are_bounded():
    store = Store(tombstone_limit=3)
    for i in range(10):
        store.apply(ADDED, obj("n", f"o{i}", 10 + 2 * i))
        store.apply(DELETED, obj("n", f"o{i}", 11 + 2 * i))
    assert len(store._tombstones) == 3
    assert len(store) == 0


def test_readiness_gate_index_and_selector():
    store = Store({"gate": index_by_readiness_gate})
    gated = {
        "metadata": {"namespace": "n", "name": "p1", "resourceVersion": "1", "labels": {"a": "1"}},
        "spec": {"readinessGates": [{"conditionType": "haproxy-haptic.org/load-balancer-ready"}]},
    }
    plain = {
        "metadata": {"namespace": "m", "name": "p2", "resourceVersion": "2", "labels": {"a": "2"}},
        "spec": {},
    }
    store.apply(ADDED, gated)
    store.apply(ADDED, plain)
    assert store.by_index("gate", "haproxy-haptic.org/load-balancer-ready") == [gated]
    assert store.select({"matchLabels": {"a": "2"}}) == [plain]
    assert store.select({"matchExpressions": [{"key": "a", "operator": "Exists"}]}) == [
        plain,
        gated,
    ]
    assert store.select({}, namespace="n") == [gated]


@given(st.lists(step, max_size=40), st.lists(st.integers(0, 39), max_size=10))
def test_every_read_of_all_objects_is_the_store_and_the_same_tuple_until_a_change(
    steps, reads_after
):
    """Issue 19: the store keeps its sorted read (`objects()`) until an object comes, goes or
    is replaced. Read after any step, it is exactly the store's objects in key order; read
    twice with no change between, it is the very same tuple (the incremental render
    compares unchanged kinds by identity); after an accepted change it is a new one."""
    store = slice_store()
    events = history(steps)
    reads = set(reads_after)
    for i, (etype, o) in enumerate(events):
        before = store.objects()
        change = store.apply(etype, o)
        after = store.objects()
        assert (after is before) == (change is None)
        if i in reads or i == len(events) - 1:
            expected = final_state(events[: i + 1])
            assert list(after) == [expected[k] for k in sorted(expected)]
            assert store.list() == list(after) and store.objects() is after
    store.replace([], None)
    assert store.objects() == ()

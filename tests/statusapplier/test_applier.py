"""The status applier against a real local API server over HTTP: server-side apply under the
haptic-deployed field manager, owning only the gate entry of status.conditions."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import kubernetes
import pytest

from controller.fencing import StaleTerm
from controller.statusapplier import FIELD_MANAGER, GATE_CONDITION, StatusApplier
from localcluster.testing import ApiServer

NODE_CONDITIONS = ("PodScheduled", "Initialized", "ContainersReady", "Ready")


@dataclass
class Output:
    gate_ready_pods: tuple[str, ...]
    plan_id: str = "ab" * 32


@pytest.fixture(scope="module")
def api() -> Iterator[ApiServer]:
    with ApiServer.start() as server:
        yield server


@pytest.fixture()
def core(api: ApiServer) -> Iterator[kubernetes.client.CoreV1Api]:
    client = api.api_client()
    yield kubernetes.client.CoreV1Api(client)
    client.close()


@pytest.fixture()
def ns(core: kubernetes.client.CoreV1Api) -> str:
    name = "t-" + uuid.uuid4().hex[:8]
    core.create_namespace({"metadata": {"name": name}})
    return name


def make_pod(core: kubernetes.client.CoreV1Api, ns: str, name: str, gated: bool = True) -> None:
    spec: dict = {"containers": [{"name": "web", "image": "x"}]}
    if gated:
        spec["readinessGates"] = [{"conditionType": GATE_CONDITION}]
    core.create_namespaced_pod(ns, {"metadata": {"name": name}, "spec": spec})
    # What the node writes (its own manager, an Update of the status subresource).
    pod = raw_pod(core, ns, name)
    pod["status"] = {
        "phase": "Running",
        "podIP": "127.0.0.9",
        "conditions": [
            {"type": t, "status": "False" if t == "Ready" else "True"} for t in NODE_CONDITIONS
        ],
    }
    core.replace_namespaced_pod_status(name, ns, pod, field_manager="localnode")


def raw_pod(core: kubernetes.client.CoreV1Api, ns: str, name: str) -> dict:
    response = core.read_namespaced_pod(name, ns, _preload_content=False)
    return json.loads(response.data)


def conditions(pod: dict) -> dict[str, dict]:
    return {c["type"]: c for c in pod["status"].get("conditions") or []}


def applier(core: kubernetes.client.CoreV1Api, **kw) -> StatusApplier:
    return StatusApplier(
        core.api_client,
        lambda namespace, name: raw_pod_or_none(core, namespace, name),
        term_valid=kw.get("term_valid", lambda: True),
        check_term=kw.get("check_term", lambda: True),
    )


def raw_pod_or_none(core: kubernetes.client.CoreV1Api, ns: str, name: str) -> dict | None:
    try:
        return raw_pod(core, ns, name)
    except kubernetes.client.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def test_writes_the_condition_by_server_side_apply_owning_only_that_entry(core, ns) -> None:
    make_pod(core, ns, "web-1")
    before = conditions(raw_pod(core, ns, "web-1"))
    written = applier(core).apply(Output((f"{ns}/web-1",)))
    assert written == [f"{ns}/web-1"]
    pod = raw_pod(core, ns, "web-1")
    after = conditions(pod)
    assert after[GATE_CONDITION]["status"] == "True"
    # The node's conditions are untouched.
    for t in NODE_CONDITIONS:
        assert after[t] == before[t]
    mine = [m for m in pod["metadata"]["managedFields"] if m["manager"] == FIELD_MANAGER]
    assert len(mine) == 1
    entry = mine[0]
    assert (entry["operation"], entry.get("subresource")) == ("Apply", "status")
    owned = entry["fieldsV1"]["f:status"]["f:conditions"]
    key = "k:" + json.dumps({"type": GATE_CONDITION}, separators=(",", ":"))
    assert list(owned) == [key]  # one entry of the list map, nothing else
    # The node's manager still owns its own entries.
    node = [m for m in pod["metadata"]["managedFields"] if m["manager"] == "localnode"]
    assert node, "the node's managedFields entry was dropped"


def test_skips_pods_already_true_and_does_not_rewrite_within_a_term(core, ns) -> None:
    make_pod(core, ns, "web-2")
    a = applier(core)
    assert a.apply(Output((f"{ns}/web-2",))) == [f"{ns}/web-2"]
    rv = raw_pod(core, ns, "web-2")["metadata"]["resourceVersion"]
    assert a.apply(Output((f"{ns}/web-2",))) == []
    assert raw_pod(core, ns, "web-2")["metadata"]["resourceVersion"] == rv
    # A new term (new applier) sees the condition True and writes nothing either.
    assert applier(core).apply(Output((f"{ns}/web-2",))) == []
    assert a.writes == 1


def test_a_stale_cache_view_does_not_cause_a_second_write(core, ns) -> None:
    make_pod(core, ns, "web-3")
    stale = raw_pod(core, ns, "web-3")  # the view before our write, as a lagging cache has it
    a = StatusApplier(
        core.api_client, lambda _ns, _name: stale, term_valid=lambda: True, check_term=lambda: None
    )
    assert a.apply(Output((f"{ns}/web-3",))) == [f"{ns}/web-3"]
    assert a.apply(Output((f"{ns}/web-3",))) == []
    assert a.writes == 1


def test_a_condition_reset_by_someone_else_is_written_again(core, ns) -> None:
    make_pod(core, ns, "web-4")
    a = applier(core)
    a.apply(Output((f"{ns}/web-4",)))
    core.patch_namespaced_pod_status(
        "web-4",
        ns,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "web-4"},
            "status": {"conditions": [{"type": GATE_CONDITION, "status": "False"}]},
        },
        field_manager="someone-else",
        force=True,
        _content_type="application/apply-patch+yaml",
    )
    assert conditions(raw_pod(core, ns, "web-4"))[GATE_CONDITION]["status"] == "False"
    assert a.apply(Output((f"{ns}/web-4",))) == [f"{ns}/web-4"]
    assert conditions(raw_pod(core, ns, "web-4"))[GATE_CONDITION]["status"] == "True"


def test_never_touches_a_pod_without_the_gate_or_a_missing_pod(core, ns) -> None:
    make_pod(core, ns, "plain", gated=False)
    rv = raw_pod(core, ns, "plain")["metadata"]["resourceVersion"]
    assert applier(core).apply(Output((f"{ns}/plain", f"{ns}/gone"))) == []
    pod = raw_pod(core, ns, "plain")
    assert pod["metadata"]["resourceVersion"] == rv
    assert GATE_CONDITION not in conditions(pod)


def test_writes_several_pods_in_one_batch(core, ns) -> None:
    names = [f"web-b{i}" for i in range(6)]
    for name in names:
        make_pod(core, ns, name)
    written = applier(core).apply(Output(tuple(f"{ns}/{n}" for n in names)))
    assert sorted(written) == sorted(f"{ns}/{n}" for n in names)
    for name in names:
        assert conditions(raw_pod(core, ns, name))[GATE_CONDITION]["status"] == "True"


def test_acts_only_while_the_term_is_valid(core, ns) -> None:
    make_pod(core, ns, "web-5")
    assert applier(core, term_valid=lambda: False).apply(Output((f"{ns}/web-5",))) == []

    def stale() -> None:
        from controller.election.term import FencingToken

        raise StaleTerm(FencingToken.of("c-0", 3, "haptic-leader", "haptic"), "lease moved")

    with pytest.raises(StaleTerm):
        applier(core, check_term=stale).apply(Output((f"{ns}/web-5",)))
    assert GATE_CONDITION not in conditions(raw_pod(core, ns, "web-5"))


def test_a_pod_recreated_under_the_same_name_is_not_patched(core, ns) -> None:
    """Issue 15, 2.12: the apply carries the uid of the pod the decision was about, so a
    pod recreated under the same name in between (a new pod, not yet proven) is refused."""
    make_pod(core, ns, "web-6")
    stale = raw_pod(core, ns, "web-6")  # the cache still shows the pod that was replaced
    core.delete_namespaced_pod("web-6", ns, grace_period_seconds=0)
    make_pod(core, ns, "web-6")
    a = StatusApplier(
        core.api_client, lambda _ns, _name: stale, term_valid=lambda: True, check_term=lambda: None
    )
    assert a.apply(Output((f"{ns}/web-6",))) == []
    pod = raw_pod(core, ns, "web-6")
    assert pod["metadata"]["uid"] != stale["metadata"]["uid"]
    assert GATE_CONDITION not in conditions(pod)
    assert a.writes == 0

"""The incremental path (controller.render.incremental; docs/design/incremental.md): an
EndpointSlice change patched into the last output gives the bytes of a full render, and
exactly the runtime operations a full diff would."""

from __future__ import annotations

import copy

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.deploy.diff import Apply, decide_pod
from controller.render import (
    RenderInput,
    apply_runtime_operations,
    render,
    runtime_operations,
    runtime_state,
)
from controller.render import incremental as inc
from controller.render.engine import render_with_basis
from controller.render.model import RenderOutput
from tests.render import builders as b

NS = "shop"
# Two Services with two ports each; "web" is also routed by an annotated Ingress, so one
# Service port feeds two backends.
SERVICES = ("web", "api")
SLOTS = 4


def _objects() -> dict[str, list[dict]]:
    ingresses = [
        b.ingress(NS, "web", rules=[("web.example.test", [b.path("/", "web", 80)])]),
        b.ingress(NS, "api", rules=[("api.example.test", [b.path("/", "api", "admin")])]),
        b.ingress(NS, "both", rules=[("both.example.test", [b.path("/a", "api", 80)])]),
    ]
    annotated = b.ingress(NS, "web-limited", rules=[("lim.example.test", [b.path("/", "web", 80)])])
    annotated["metadata"]["annotations"] = {"haproxy.org/load-balance": "leastconn"}
    ingresses.append(annotated)
    services = [b.service(NS, s, [("http", 80, 8080), ("admin", 9000, 9000)]) for s in SERVICES]
    slices = [
        b.endpointslice(NS, s, [b.endpoint(f"10.0.{i}.1")], [("http", 8080), ("admin", 9000)])
        for i, s in enumerate(SERVICES)
    ]
    return {"ingresses": ingresses, "services": services, "endpointslices": slices}


def _full(objects: dict[str, list], previous: RenderOutput | None = None) -> RenderOutput:
    return render(_input(objects, previous))


def _input(objects: dict[str, list], previous: RenderOutput | None) -> RenderInput:
    return RenderInput(
        b.template_config(slots=SLOTS),
        **{k: tuple(v) for k, v in objects.items()},
        previous_plan=previous.plan if previous else None,
    )


def _replace_slice(objects: dict[str, list], index: int, new: dict | None) -> dict[str, list]:
    """A watch event: the slice at `index` replaced by a new dict (or deleted); the other
    objects stay the very same dicts, as in the watch caches."""
    slices = list(objects["endpointslices"])
    if new is None:
        del slices[index]
    else:
        slices[index] = new
    return {**objects, "endpointslices": slices}


def _basis(objects: dict[str, list]) -> inc.RenderBasis:
    basis = render_with_basis(_input(objects, None))[1]
    assert basis is not None
    return basis


def test_a_ready_endpoint_turning_unready_is_one_set_server_and_the_full_render_bytes() -> None:
    objects = _objects()
    basis = _basis(objects)
    changed = copy.deepcopy(objects["endpointslices"][0])
    changed["endpoints"][0]["conditions"]["ready"] = False
    after = _replace_slice(objects, 0, changed)

    step = inc.update(basis, _input(after, basis.output))

    assert step is not None
    full = _full(after, basis.output)
    assert inc.differences(step.output, full) == []
    assert step.output == full  # every field that makes an output's identity
    assert step.output.config == full.config
    # Service web port http feeds two backends (the plain one and the annotated Ingress').
    assert step.backends == ("shop_web_80", "shop_web_80.web-limited")
    assert [op["state"] for op in step.operations] == ["maint", "maint"]
    assert list(step.operations) == runtime_operations(basis.output.plan, full.plan)
    assert step.output.structure_digest == basis.output.structure_digest


def test_the_deployer_takes_the_incremental_operations_for_a_pod_on_the_basis_plan() -> None:
    objects = _objects()
    basis = _basis(objects)
    changed = copy.deepcopy(objects["endpointslices"][1])
    changed["endpoints"].append(b.endpoint("10.0.1.2"))
    step = inc.update(basis, _input(_replace_slice(objects, 1, changed), basis.output))
    assert step is not None
    old = basis.output
    # The pod runs the basis plan: the delta is used as is (no plan is known to diff with).
    decision = decide_pod(old.plan_id, old.checksum, None, step.output, {old.plan_id: {}})
    assert isinstance(decision, Apply)
    assert decision.runtime_operations == step.operations and step.operations
    # A pod on another plan gets the full diff.
    other = decide_pod("other", "x", None, step.output, {"other": old.plan})
    assert isinstance(other, Apply)
    assert list(other.runtime_operations) == runtime_operations(old.plan, step.output.plan)


def test_a_change_that_renders_nothing_new_keeps_the_output() -> None:
    objects = _objects()
    basis = _basis(objects)
    same = copy.deepcopy(objects["endpointslices"][0])  # a new dict, same content
    same["metadata"]["resourceVersion"] = "7"
    step = inc.update(basis, _input(_replace_slice(objects, 0, same), basis.output))
    assert step is not None
    assert step.output is basis.output and step.operations == ()


def _with(objects: dict[str, list], kind: str, change) -> dict[str, list]:
    items = [copy.deepcopy(o) for o in objects[kind]]
    change(items)
    return {**objects, kind: items}


@pytest.mark.parametrize(
    "kind, change",
    [
        ("ingresses", lambda items: items.pop()),
        ("services", lambda items: items[0]["spec"]["ports"].pop()),
    ],
)
def test_anything_but_endpointslices_takes_the_full_render(kind, change) -> None:
    # Secrets: only those the render looks up count (the test of unread Secrets below).
    objects = {**_objects(), "secrets": []}
    basis = _basis(objects)
    assert inc.update(basis, _input(_with(objects, kind, change), basis.output)) is None


def test_a_new_slot_block_takes_the_full_render() -> None:
    objects = _objects()
    basis = _basis(objects)
    grown = copy.deepcopy(objects["endpointslices"][0])
    grown["endpoints"] = [b.endpoint(f"10.0.0.{i}") for i in range(1, SLOTS + 2)]
    assert inc.update(basis, _input(_replace_slice(objects, 0, grown), basis.output)) is None


def test_a_template_spec_change_takes_the_full_render_a_status_write_does_not() -> None:
    objects = _objects()
    basis = _basis(objects)
    status_only = copy.deepcopy(basis.inputs.template_config)
    status_only["status"] = {"renderWarnings": {"count": 0}}
    base = _input(objects, basis.output)
    assert inc.update(basis, RenderInput(**{**vars(base), "template_config": status_only}))
    respec = copy.deepcopy(status_only)
    respec["spec"]["templateLibraries"]["kubernetesBackends"]["serverSlots"] = SLOTS + 1
    assert inc.update(basis, RenderInput(**{**vars(base), "template_config": respec})) is None


def test_user_templates_and_the_readiness_gate_keep_every_render_full() -> None:
    objects = _objects()
    own = b.template_config(slots=SLOTS, haproxyConfig={"template": "global\n"})
    assert render_with_basis(RenderInput(own, **objects))[1] is None
    maps = b.template_config(slots=SLOTS, maps={"x.map": {"template": "a b\n"}})
    assert render_with_basis(RenderInput(maps, **objects))[1] is None
    gated = b.template_config(slots=SLOTS, gate=True)
    assert render_with_basis(RenderInput(gated, **objects, pods=()))[1] is None


def test_the_plan_json_in_pieces_is_the_canonical_json() -> None:
    from controller.render.plan import PlanJSON, canonical_json, plan_id

    output = _full(_objects())
    pieces = PlanJSON.of(output.plan)
    assert pieces.text() == canonical_json(output.plan)
    assert pieces.plan_id() == plan_id(output.plan) == output.plan_id


# -- random sequences of watch events: the incremental state is the full render -------------

ADDRESSES = [f"10.1.0.{i}" for i in range(1, 8)] + ["not-an-ip"]
endpoint_lists = st.lists(
    st.tuples(st.sampled_from(ADDRESSES), st.sampled_from([True, False, None])),
    max_size=SLOTS + 2,
    unique_by=lambda e: e[0],
)
events = st.lists(
    st.tuples(
        st.sampled_from(SERVICES),
        st.sampled_from(["a", "b"]),  # which slice of the Service
        st.one_of(st.none(), endpoint_lists),  # None: the slice is deleted
        st.sampled_from([("http", 8080), ("other", 8080)]),  # a port the Service lacks
    ),
    min_size=1,
    max_size=12,
)


def _slice(service: str, suffix: str, endpoints: list, port: tuple[str, int]) -> dict:
    eps = [b.endpoint(address, ready) for address, ready in endpoints]
    return b.endpointslice(NS, service, eps, [port, ("admin", 9000)], suffix)


def _apply_event(objects: dict[str, list], event: tuple) -> dict[str, list]:
    service, suffix, endpoints, port = event
    name = f"{service}-{suffix}"
    slices = [s for s in objects["endpointslices"] if s["metadata"]["name"] != name]
    if endpoints is not None:
        slices.append(_slice(service, suffix, endpoints, port))
    slices.sort(key=lambda s: s["metadata"]["name"])
    return {**objects, "endpointslices": slices}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events)
def test_random_endpoint_changes_give_the_full_render_byte_for_byte(sequence) -> None:
    objects = _objects()
    output, basis = render_with_basis(_input(objects, None))
    for event in sequence:
        objects = _apply_event(objects, event)
        inp = _input(objects, output)
        full = render(inp)
        step = inc.update(basis, inp) if basis is not None else None
        if step is None:
            # Only a new slot block (or a removed one) may take the full path here.
            assert basis is None or [len(s) for s in full.plan["backends"].values()] != [
                len(s) for s in output.plan["backends"].values()
            ]
            output, basis = render_with_basis(inp)
            assert output == full
            continue
        assert inc.differences(step.output, full) == []
        assert step.output.files == full.files and step.output.plan == full.plan
        ops = runtime_operations(output.plan, full.plan)
        assert ops is not None and list(step.operations) == ops
        applied = apply_runtime_operations(output.plan, step.operations)
        assert applied == runtime_state(full.plan)
        output, basis = step.output, step.basis


def test_an_ingress_status_write_keeps_the_incremental_path() -> None:
    # The leader publishes load balancer addresses on served Ingresses; that write must not
    # cost a full render, but a spec change must.
    objects = _objects()
    basis = _basis(objects)

    def status_write(items: list) -> None:
        items[0]["status"] = {"loadBalancer": {"ingress": [{"ip": "127.0.0.9"}]}}
        items[0]["metadata"]["resourceVersion"] = "42"

    written = _with(objects, "ingresses", status_write)
    step = inc.update(basis, _input(written, basis.output))
    assert step is not None and step.output is basis.output
    assert render(_input(written, basis.output)) == basis.output
    respec = _with(written, "ingresses", lambda items: items[0]["spec"]["rules"].pop())
    assert inc.update(step.basis, _input(respec, basis.output)) is None


def test_the_structure_key_ignores_server_slots_only() -> None:
    # The gate's verdict on an output stands for a full render with the same key.
    objects = _objects()
    basis = _basis(objects)
    moved = copy.deepcopy(objects["endpointslices"][0])
    moved["endpoints"][0]["addresses"] = ["10.9.9.9"]
    slots_only = _full(_replace_slice(objects, 0, moved), basis.output)
    assert slots_only.checksum != basis.output.checksum
    assert inc.structure_key(slots_only) == inc.structure_key(basis.output)
    routed = _with(objects, "ingresses", lambda items: items[0]["spec"]["rules"].pop())
    assert inc.structure_key(_full(routed)) != inc.structure_key(basis.output)


def test_a_secret_no_render_looks_up_keeps_the_incremental_path() -> None:
    # Publication writes Opaque Secrets of its own; only Secrets the model looked up count.
    objects = {**_objects(), "secrets": [b.tls_secret(NS, "unrelated")]}
    objects["ingresses"][0]["spec"]["tls"] = [{"hosts": ["web.example.test"], "secretName": "tls"}]
    basis = _basis(objects)
    assert (NS, "tls") in basis.secrets_read and (NS, "unrelated") not in basis.secrets_read
    unrelated = _with(objects, "secrets", lambda items: items.append(b.tls_secret(NS, "other")))
    step = inc.update(basis, _input(unrelated, basis.output))
    assert step is not None and step.output == render(_input(unrelated, basis.output))
    named = _with(objects, "secrets", lambda items: items.append(b.tls_secret(NS, "tls")))
    assert inc.update(basis, _input(named, basis.output)) is None

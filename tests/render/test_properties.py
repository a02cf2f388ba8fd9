"""Property tests: random valid Ingress sets render to configs haproxy accepts; runtime
operations between two plans reproduce the new plan's runtime state."""

from __future__ import annotations

import copy
import dataclasses

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.render import (
    RenderError,
    RenderInput,
    apply_runtime_operations,
    render,
    runtime_operations,
    runtime_state,
)
from controller.render.plan import parse_config
from controller.rendergate import check_output
from tests.render import builders as b

NAMESPACES = ["default", "team-a", "team-b"]
SERVICES = ["web", "api", "blog"]
HOSTS = [None, "a.example.test", "b.example.test", "*.wild.example.test", "Mixed.Example.Test"]
SEGMENTS = ["api", "v1", "static", "x-y", "a.b", "%20"]
PORTS = [80, 8080, "http"]
SERVICE_PORTS = [("http", 80, 8080), ("alt", 8080, 9090)]

paths = st.builds(
    lambda segs, slash: "/" + "/".join(segs) + ("/" if slash and segs else ""),
    st.lists(st.sampled_from(SEGMENTS), max_size=3),
    st.booleans(),
)
http_paths = st.lists(
    st.builds(
        b.path,
        paths,
        st.sampled_from(SERVICES),
        st.sampled_from(PORTS),
        st.sampled_from(["Exact", "Prefix", "ImplementationSpecific"]),
    ),
    min_size=1,
    max_size=4,
)
ingress_specs = st.lists(
    st.tuples(
        st.sampled_from(NAMESPACES),
        st.lists(st.tuples(st.sampled_from(HOSTS), http_paths), min_size=1, max_size=3),
        st.booleans(),  # tls
        st.one_of(st.none(), st.tuples(st.sampled_from(SERVICES), st.sampled_from(PORTS))),
    ),
    min_size=1,
    max_size=6,
)
# Per (namespace, service): present?, endpoints as (last octet, ready)
endpoint_sets = st.dictionaries(
    st.tuples(st.sampled_from(NAMESPACES), st.sampled_from(SERVICES)),
    st.tuples(
        st.booleans() | st.just(True),
        st.lists(st.tuples(st.integers(1, 254), st.booleans()), max_size=25),
    ),
)


def _build(specs, endpoints, slots: int = 10) -> RenderInput:
    ingresses, secrets = [], []
    for i, (ns, rules, with_tls, default) in enumerate(specs):
        hosts = sorted({h.lower() for h, _ in rules if h})
        tls = [(f"tls-{i}", hosts)] if with_tls else []
        ingresses.append(b.ingress(ns, f"ing-{i}", rules, default=default, tls=tls))
        if with_tls:
            secrets.append(b.tls_secret(ns, f"tls-{i}"))
    services, slices = [], []
    for n, ((ns, svc), (present, eps)) in enumerate(sorted(endpoints.items())):
        if not present:
            continue
        services.append(b.service(ns, svc, SERVICE_PORTS))
        addresses = [b.endpoint(f"10.{n}.0.{octet}", ready) for octet, ready in eps]
        slices.append(b.endpointslice(ns, svc, addresses, [("http", 8080), ("alt", 9090)]))
    return RenderInput(
        b.template_config(slots=slots),
        ingresses=ingresses,
        services=services,
        endpointslices=slices,
        secrets=secrets,
    )


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(ingress_specs, endpoint_sets)
def test_random_valid_ingress_sets_render_to_configs_haproxy_accepts(specs, endpoints) -> None:
    inp = _build(specs, endpoints)
    out = render(inp)
    # Every route names a backend that exists in the rendered configuration.
    for entries in out.plan["maps"].values():
        for value in entries.values():
            assert value in out.plan["backends"] or "." in value  # hosts map values are hosts
    assert all(len(servers) % 10 == 0 for n, servers in out.plan["backends"].items() if "_" in n)
    verdict = check_output(out)
    assert verdict.accepted, verdict.output + "\n" + out.config.decode()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ingress_specs, endpoint_sets, endpoint_sets)
def test_endpoint_changes_within_capacity_are_runtime_operations(specs, before, after) -> None:
    # Same Services present on both sides, endpoint sets within one block of slots.
    after = {k: (True, v[1][:10]) for k, v in after.items() if k in before}
    before = {k: (True, v[1][:10]) for k, v in before.items()}
    for k in before:
        after.setdefault(k, (True, []))
    old, new = render(_build(specs, before)), render(_build(specs, after))
    ops = runtime_operations(old.plan, new.plan)
    assert ops is not None
    assert apply_runtime_operations(old.plan, ops) == runtime_state(new.plan)
    assert all(op["op"] == "set_server" for op in ops)
    assert runtime_operations(new.plan, new.plan) == []


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ingress_specs, ingress_specs, endpoint_sets, endpoint_sets)
def test_runtime_operations_reproduce_the_new_plan_or_ask_for_a_reload(
    specs_a, specs_b, eps_a, eps_b
) -> None:
    old, new = render(_build(specs_a, eps_a)), render(_build(specs_b, eps_b))
    ops = runtime_operations(old.plan, new.plan)
    if ops is None:
        # A reload is only asked for when something beyond runtime state differs.
        assert (
            old.structure_digest != new.structure_digest
            or any(
                old.plan["files"].get(p) != f
                for p, f in new.plan["files"].items()
                if f["kind"] not in ("map", "config")
            )
            or set(old.plan["files"]) != set(new.plan["files"])
        )
    else:
        assert old.structure_digest == new.structure_digest
        assert apply_runtime_operations(old.plan, ops) == runtime_state(new.plan)


@settings(max_examples=30, deadline=None)
@given(ingress_specs, endpoint_sets, st.randoms(use_true_random=False))
def test_render_is_independent_of_input_order(specs, endpoints, rng) -> None:
    inp = _build(specs, endpoints)
    lists = {
        name: rng.sample(list(getattr(inp, name)), len(getattr(inp, name)))
        for name in ("ingresses", "services", "endpointslices", "secrets")
    }
    a, c = render(inp), render(dataclasses.replace(inp, **lists))
    assert a.files == c.files and a.plan_id == c.plan_id and a.warnings == c.warnings


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ingress_specs, endpoint_sets, endpoint_sets)
def test_with_the_previous_plan_only_changed_endpoints_touch_their_slots(
    specs, before, after
) -> None:
    before = {k: (True, v[1][:10]) for k, v in before.items()}
    after = {k: (True, after.get(k, (True, []))[1][:10]) for k in before}
    old = render(_build(specs, before))
    new = render(dataclasses.replace(_build(specs, after), previous_plan=old.plan))
    # The previous plan moves endpoints between slots, never the structure: a new leader
    # rendering without it reaches the same pods through runtime operations, no reload.
    cold = render(_build(specs, after))
    assert cold.structure_digest == new.structure_digest
    assert runtime_operations(new.plan, cold.plan) is not None
    ops = runtime_operations(old.plan, new.plan)
    assert ops is not None
    assert apply_runtime_operations(old.plan, ops) == runtime_state(new.plan)
    for backend, servers in new.plan["backends"].items():
        was = {
            (s["address"], s["port"]): (n, s["enabled"])
            for n, s in old.plan["backends"][backend].items()
        }
        now = {(s["address"], s["port"]): (n, s["enabled"]) for n, s in servers.items()}
        was.pop(("127.0.0.1", 1), None)
        now.pop(("127.0.0.1", 1), None)
        # Endpoints on both sides keep their server.
        assert all(was[k][0] == now[k][0] for k in was.keys() & now.keys())
        # One operation per added, removed or re-stated endpoint at most.
        changed = len(was.keys() ^ now.keys()) + sum(
            was[k][1] != now[k][1] for k in was.keys() & now.keys()
        )
        assert sum(op["backend"] == backend for op in ops) <= changed


ipv4 = st.tuples(*[st.integers(0, 255)] * 4).map(lambda t: ".".join(map(str, t)))
server_state = st.tuples(ipv4, st.integers(1, 65535), st.integers(0, 256), st.booleans())


def _config(states, option: str) -> str:
    lines = ["global", "    default-path config", "", "backend b", f"    {option}"]
    for i, (addr, port, weight, enabled) in enumerate(states, start=1):
        lines.append(
            f"    server S{i} {addr}:{port} weight {weight}{'' if enabled else ' disabled'}"
        )
    return "\n".join(lines) + "\n"


@settings(max_examples=100, deadline=None)
@given(st.lists(server_state, min_size=1, max_size=8), st.data())
def test_structure_digest_masks_exactly_the_runtime_server_attributes(states, data) -> None:
    other = data.draw(st.lists(server_state, min_size=len(states), max_size=len(states)))
    servers, digest = parse_config(_config(states, "balance roundrobin"))
    servers2, digest2 = parse_config(_config(other, "balance roundrobin"))
    assert digest == digest2  # only runtime attributes differ
    assert len(servers2["b"]) == len(other)
    assert servers["b"]["S1"] == {
        "address": states[0][0],
        "port": states[0][1],
        "weight": states[0][2],
        "enabled": states[0][3],
    }
    assert parse_config(_config(states, "balance leastconn"))[1] != digest
    assert parse_config(_config([*states, states[0]], "balance roundrobin"))[1] != digest


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 70000)
    | st.text(max_size=12)
    | st.sampled_from(["/", "a.example.test", "web", "10.0.0.1", "Prefix", "http"]),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)


def _paths_in(value, path=()):
    yield path
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths_in(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths_in(v, (*path, i))


def _mutated(inp: RenderInput, data, rounds: int) -> RenderInput:
    kinds = ["ingresses", "services", "endpointslices", "secrets"]
    lists = {k: copy.deepcopy(list(getattr(inp, k))) for k in kinds}
    for _ in range(rounds):
        kind = data.draw(st.sampled_from([k for k in kinds if lists[k]] or ["ingresses"]))
        if not lists[kind]:
            lists[kind].append(data.draw(json_values))
            continue
        index = data.draw(st.integers(0, len(lists[kind]) - 1))
        path = data.draw(st.sampled_from(list(_paths_in(lists[kind][index]))))
        value = data.draw(json_values)
        if not path:
            lists[kind][index] = value
            continue
        target = lists[kind][index]
        for step in path[:-1]:
            target = target[step]
        target[path[-1]] = value
    return dataclasses.replace(inp, **lists)


def _render_or_error(inp: RenderInput):
    try:
        return render(inp)
    except RenderError:
        return None


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ingress_specs, endpoint_sets, st.data())
def test_corrupted_watched_objects_never_crash_the_render(specs, endpoints, data) -> None:
    # Objects with arbitrary values in arbitrary places: skipped with warnings, never an
    # exception other than RenderError (and the library raises none for watched objects).
    inp = _mutated(_build(specs, endpoints), data, data.draw(st.integers(1, 4)))
    out = _render_or_error(inp)
    assert out is not None


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(ingress_specs, endpoint_sets, st.data())
def test_corrupted_watched_objects_still_render_configs_haproxy_accepts(
    specs, endpoints, data
) -> None:
    out = render(_mutated(_build(specs, endpoints), data, data.draw(st.integers(1, 3))))
    verdict = check_output(out)
    assert verdict.accepted, verdict.output + "\n" + "\n".join(map(str, out.warnings))


pod_states = st.fixed_dictionaries(
    {
        "ready": st.sampled_from([True, False, None]),
        "terminating": st.booleans(),
        "has_pod": st.booleans(),
        "gate": st.booleans(),
        "containers_ready": st.booleans(),
        "deleting": st.booleans(),
    }
)


@settings(max_examples=80, deadline=None)
@given(st.lists(pod_states, min_size=1, max_size=12), st.booleans())
def test_readiness_gate_model(states, gate_enabled) -> None:
    # ADR-0034 as a model: an endpoint is enabled when ready (nil counts as ready), or, with
    # the gate on, when it is not terminating and its pod holds the gate, reports
    # ContainersReady=True and is not being deleted.
    endpoints, pods, expected, gated = [], [], {}, set()
    for i, s in enumerate(states):
        address = f"10.7.0.{i + 1}"
        ready = s["ready"]
        endpoints.append(
            b.endpoint(address, ready, pod=f"p{i}", terminating=s["terminating"])
            if ready is not None
            else {
                "addresses": [address],
                "conditions": {},
                "targetRef": {"kind": "Pod", "name": f"p{i}"},
            }
        )
        if s["has_pod"]:
            pod = b.pod("default", f"p{i}", gate=s["gate"], containers_ready=s["containers_ready"])
            if s["deleting"]:
                pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
            pods.append(pod)
        admitted = (
            gate_enabled
            and ready is False
            and not s["terminating"]
            and s["has_pod"]
            and s["gate"]
            and s["containers_ready"]
            and not s["deleting"]
        )
        expected[address] = ready is not False or admitted
        if gate_enabled and expected[address] and s["has_pod"] and s["gate"]:
            gated.add(f"default/p{i}")
    inp = RenderInput(
        b.template_config(gate=gate_enabled),
        ingresses=[b.ingress("default", "web", [("w.example.test", [b.path("/", "web")])])],
        services=[b.service("default", "web", [(None, 80, 8080)])],
        endpointslices=[b.endpointslice("default", "web", endpoints, [(None, 8080)])],
        pods=pods,
    )
    out = render(inp)
    servers = out.plan["backends"]["default_web_80"].values()
    got = {s["address"]: s["enabled"] for s in servers if s["address"] != "127.0.0.1"}
    assert got == expected
    assert set(out.gate_ready_pods) == gated

"""Rendering as a pure function: determinism, identities, slots, isolation, errors."""

from __future__ import annotations

import base64
import copy
import dataclasses
import hashlib
import json
import random
import shutil
from typing import Any
from unittest import mock

import jinja2
import pytest

from controller.render import (
    RenderedFile,
    RenderError,
    RenderInput,
    apply_runtime_operations,
    build_plan,
    engine,
    gate_admits,
    plan_id,
    render,
    runtime_operations,
    runtime_state,
)
from controller.render.engine import SETTINGS_TEMPLATE, TEMPLATES_DIR
from controller.rendergate import check_output
from tests.render import builders as b
from tests.render.cases import CASES, multiple_paths, readiness_gated_pod, simple_host, tls


def _servers(out, backend: str) -> list[tuple[str, int, bool]]:
    return [(s["address"], s["port"], s["enabled"]) for s in out.plan["backends"][backend].values()]


def _shuffled(inp: RenderInput, seed: int) -> RenderInput:
    rng = random.Random(seed)

    def mix(seq):
        items = copy.deepcopy(list(seq))
        rng.shuffle(items)
        return items

    return dataclasses.replace(
        inp,
        ingresses=mix(inp.ingresses),
        services=mix(inp.services),
        endpointslices=mix(inp.endpointslices),
        secrets=mix(inp.secrets),
        pods=mix(inp.pods),
    )


@pytest.mark.parametrize("case", sorted(CASES))
def test_same_input_gives_same_bytes_in_any_order(case: str) -> None:
    first = render(CASES[case]())
    for seed in range(3):
        again = render(_shuffled(CASES[case](), seed))
        assert again.files == first.files
        assert again.plan_id == first.plan_id
        assert again.checksum == first.checksum


def test_checksum_and_plan_id_follow_the_contract() -> None:
    out = render(tls())
    h = hashlib.sha256()
    for f in sorted(out.files, key=lambda f: f.path):
        h.update(f.path.encode() + b"\0" + f.content + b"\0")
    assert out.checksum == "sha256:" + h.hexdigest()
    canonical = json.dumps(out.plan, sort_keys=True, separators=(",", ":"))
    assert out.plan_id == hashlib.sha256(canonical.encode()).hexdigest()
    assert out.plan["files"]["certs/secure_site-tls.pem"] == {
        "kind": "certificate",
        "sha256": out.file("certs/secure_site-tls.pem").sha256,
    }
    kinds = {f.path: f.kind for f in out.files}
    assert kinds["haproxy.cfg"] == "config"
    assert kinds["crt-lists/crt-list.txt"] == "crt-list"
    assert kinds["maps/hosts.map"] == "map"
    assert out.plan["maps"]["maps/hosts.map"] == {"www.example.test": "www.example.test"}


def test_certificate_file_is_chain_then_key() -> None:
    pem = render(tls()).file("certs/secure_site-tls.pem").content
    assert pem.index(b"BEGIN CERTIFICATE") < pem.index(b"PRIVATE KEY")


@pytest.mark.parametrize(("count", "slots", "expected"), [(0, 10, 10), (10, 10, 10), (11, 10, 20)])
def test_backends_render_whole_blocks_of_server_slots(count: int, slots: int, expected: int):
    inp = RenderInput(
        b.template_config(slots=slots),
        ingresses=[b.ingress("default", "web", [("w.example.test", [b.path("/", "web")])])],
        services=[b.service("default", "web", [(None, 80, 8080)])],
        endpointslices=[
            b.endpointslice(
                "default",
                "web",
                [b.endpoint(f"10.0.0.{i + 1}") for i in range(count)],
                [(None, 8080)],
            )
        ],
    )
    servers = _servers(render(inp), "default_web_80")
    assert len(servers) == expected
    assert sum(enabled for _, _, enabled in servers) == count
    assert [(a, p) for a, p, _ in servers[:count]] == sorted(
        ((f"10.0.0.{i + 1}", 8080) for i in range(count)),
        key=lambda ap: tuple(int(x) for x in ap[0].split(".")),
    )
    assert all(s == ("127.0.0.1", 1, False) for s in servers[count:])


def test_endpoint_change_within_capacity_is_runtime_only() -> None:
    old = render(simple_host())
    inp = simple_host()
    slices = copy.deepcopy(list(inp.endpointslices))
    slices[0]["endpoints"] = [b.endpoint("10.1.0.99"), b.endpoint("10.1.0.3", ready=False)]
    new = render(dataclasses.replace(inp, endpointslices=slices))
    assert new.structure_digest == old.structure_digest
    assert new.plan_id != old.plan_id and new.checksum != old.checksum
    ops = runtime_operations(old.plan, new.plan)
    assert ops is not None and all(op["op"] == "set_server" for op in ops)
    assert {"op": "set_server", "backend": "default_web_80", "server": "SRV_3",
            "address": "127.0.0.1", "port": 1, "weight": 1, "state": "maint"} in ops  # fmt: skip
    assert apply_runtime_operations(old.plan, ops) == runtime_state(new.plan)
    assert runtime_operations(old.plan, old.plan) == []


def test_endpoints_beyond_capacity_need_a_reload() -> None:
    inp = simple_host()
    slices = copy.deepcopy(list(inp.endpointslices))
    slices[0]["endpoints"] = [b.endpoint(f"10.1.1.{i}") for i in range(1, 12)]
    new = render(dataclasses.replace(inp, endpointslices=slices))
    assert len(new.plan["backends"]["default_web_80"]) == 20
    assert runtime_operations(render(inp).plan, new.plan) is None


def test_new_route_to_an_existing_backend_is_a_map_change() -> None:
    inp = simple_host()
    old = render(inp)
    ing = copy.deepcopy(list(inp.ingresses))
    ing[0]["spec"]["rules"].append(
        {"host": "www.example.test", "http": {"paths": [b.path("/x", "web", 80, "Exact")]}}
    )
    new = render(dataclasses.replace(inp, ingresses=ing))
    ops = runtime_operations(old.plan, new.plan)
    assert ops == [
        {"op": "map_set", "map": "maps/hosts.map", "key": "www.example.test",
         "value": "www.example.test"},
        {"op": "map_set", "map": "maps/path-exact.map", "key": "www.example.test/x",
         "value": "default_web_80"},
    ]  # fmt: skip
    assert apply_runtime_operations(old.plan, ops) == runtime_state(new.plan)
    # and back: the entries are deleted again
    back = runtime_operations(new.plan, old.plan)
    assert back is not None and {op["op"] for op in back} == {"map_del"}


def test_new_backend_or_changed_certificate_needs_a_reload() -> None:
    inp = simple_host()
    ing = copy.deepcopy(list(inp.ingresses))
    ing[0]["spec"]["rules"][0]["http"]["paths"].append(b.path("/other", "other"))
    assert (
        runtime_operations(render(inp).plan, render(dataclasses.replace(inp, ingresses=ing)).plan)
        is None
    )
    t = tls()
    secret = b.tls_secret("secure", "site-tls")
    chain = base64.b64decode(secret["data"]["tls.crt"]) * 2  # same cert twice: new bytes
    secret["data"]["tls.crt"] = base64.b64encode(chain).decode()
    other = render(dataclasses.replace(t, secrets=[secret]))
    assert other.structure_digest == render(t).structure_digest
    assert runtime_operations(render(t).plan, other.plan) is None


def test_structure_digest_sees_everything_but_runtime_server_attributes() -> None:
    base = render(simple_host())
    spec = copy.deepcopy(b.template_config())
    spec["spec"]["extraContext"] = {"timeoutServer": "51s"}
    changed = render(dataclasses.replace(simple_host(), template_config=spec))
    assert changed.structure_digest != base.structure_digest


def test_broken_ingresses_are_isolated_from_the_others() -> None:
    good = b.ingress("default", "good", [("good.example.test", [b.path("/", "web")])])
    broken = [
        b.ingress("default", "bad-host", [("bad_host!", [b.path("/", "web")])]),
        b.ingress("default", "bad-path", [("p.example.test", [b.path("/a b", "web")])]),
        b.ingress("default", "bad-type", [("t.example.test", [b.path("/", "web", 80, "Regex")])]),
        b.ingress("default", "bad-port", [("q.example.test", [b.path("/", "web", 70000)])]),
        {"metadata": {"namespace": "default", "name": "bad-spec"}, "spec": "nonsense"},
        {"metadata": {"namespace": "default", "name": "bad-rules"}, "spec": {"rules": {"a": 1}}},
        {"metadata": {"namespace": "default", "name": "resource"},
         "spec": {"defaultBackend": {"resource": {"kind": "Bucket", "name": "b"}}}},
        {"metadata": {}, "spec": {}},
    ]  # fmt: skip
    # A broken Ingress sharing a host with a good one must not take any of its routes either.
    half = b.ingress(
        "default",
        "half-broken",
        [("good.example.test", [b.path("/half", "web"), b.path("/x", "web", 0)])],
    )
    inp = RenderInput(
        b.template_config(),
        ingresses=[*broken, half, good],
        services=[b.service("default", "web", [(None, 80, 8080)])],
        endpointslices=[
            b.endpointslice("default", "web", [b.endpoint("10.0.0.1")], [(None, 8080)])
        ],
    )
    out = render(inp)
    assert out.plan["maps"]["maps/path-prefix.map"] == {"good.example.test/": "default_web_80"}
    assert len(out.warnings) == len(broken) + 1
    for name in ("bad-host", "bad-path", "bad-type", "bad-port", "bad-spec", "bad-rules",
                 "resource", "half-broken"):  # fmt: skip
        assert any(f"default/{name}" in str(w) for w in out.warnings), name
    reasons = {w.name: w.reason for w in out.warnings}
    assert reasons["resource"] == "UnsupportedBackend"
    assert reasons["bad-host"] == "InvalidObject"
    verdict = check_output(out)
    assert verdict.accepted, verdict.output


def test_missing_or_bad_tls_secret_skips_only_the_certificate() -> None:
    inp = tls()
    bad = [{**b.tls_secret("secure", "site-tls"), "data": {"tls.crt": "!!"}}]
    for secrets, reason in (([], "SecretNotFound"), (bad, "InvalidSecret")):
        out = render(dataclasses.replace(inp, secrets=secrets))
        assert [w.reason for w in out.warnings] == [reason]
        assert "crt-lists/crt-list.txt" not in out.paths()
        assert b"ssl crt-list" not in out.config
        assert out.plan["maps"]["maps/hosts.map"] == {"www.example.test": "www.example.test"}
        assert len(out.warnings) == 1 and "site-tls" in str(out.warnings[0])


def test_conflicting_routes_go_to_the_oldest_ingress() -> None:
    older = b.ingress(
        "b", "old", [("x.example.test", [b.path("/", "one")])], created="2025-01-01T00:00:00Z"
    )
    newer = b.ingress(
        "a", "new", [("x.example.test", [b.path("/", "two")])], created="2026-01-01T00:00:00Z"
    )
    out = render(RenderInput(b.template_config(), ingresses=[newer, older]))
    assert out.plan["maps"]["maps/path-prefix.map"] == {"x.example.test/": "b_one_80"}
    assert "a_two_80" not in out.plan["backends"]
    assert len(out.warnings) >= 1 and "a/new" in str(out.warnings[0])


def test_ingress_class_filter() -> None:
    mine = b.ingress("d", "mine", [("m.example.test", [b.path("/", "s")])], ingress_class="haptic")
    other = b.ingress("d", "other", [("o.example.test", [b.path("/", "s")])], ingress_class="nginx")
    legacy = b.ingress("d", "legacy", [("l.example.test", [b.path("/", "s")])])
    legacy["metadata"]["annotations"] = {"kubernetes.io/ingress.class": "haptic"}
    out = render(
        RenderInput(b.template_config(ingress_class="haptic"), ingresses=[mine, other, legacy])
    )
    assert set(out.plan["maps"]["maps/hosts.map"]) == {"m.example.test", "l.example.test"}
    everything = render(RenderInput(b.template_config(), ingresses=[mine, other, legacy]))
    assert len(everything.plan["maps"]["maps/hosts.map"]) == 3


def test_missing_service_and_bad_slices_leave_disabled_slots() -> None:
    inp = RenderInput(
        b.template_config(),
        ingresses=[
            b.ingress("d", "i", [("a.example.test", [b.path("/", "gone"), b.path("/w", "web")])])
        ],
        services=[b.service("d", "web", [(None, 80, 8080)])],
        endpointslices=[
            b.endpointslice("d", "web", [b.endpoint("not-an-ip")], [(None, 8080)], suffix="x"),
            b.endpointslice("d", "web", [b.endpoint("10.9.0.1")], [(None, 8080)], suffix="y"),
        ],
    )
    out = render(inp)
    assert not any(s[2] for s in _servers(out, "d_gone_80"))
    assert _servers(out, "d_web_80")[0] == ("10.9.0.1", 8080, True)
    assert any("d/gone not found" in str(w) for w in out.warnings)
    assert any("web-x" in str(w) for w in out.warnings)
    assert check_output(out).accepted


def test_readiness_gate_only_counts_with_the_gate_enabled() -> None:
    out = render(readiness_gated_pod())
    gated = _servers(out, "default_web_80")
    assert [s[2] for s in gated[:5]] == [True, True, False, False, False]
    # The pods the status applier may mark load-balancer-ready once this render is deployed.
    assert out.gate_ready_pods == ("default/web-gated", "default/web-ready")
    off = dataclasses.replace(readiness_gated_pod(), template_config=b.template_config(gate=False))
    ungated = render(off)
    assert [s[2] for s in _servers(ungated, "default_web_80")[:5]] == [True] + [False] * 4
    assert ungated.gate_ready_pods == ()


def test_gate_admits_only_gated_pods_with_ready_containers() -> None:
    assert gate_admits(b.pod("d", "p", gate=True, containers_ready=True))
    assert not gate_admits(b.pod("d", "p", gate=True, containers_ready=False))
    assert not gate_admits(b.pod("d", "p", gate=False, containers_ready=True))
    leaving = b.pod("d", "p", gate=True, containers_ready=True)
    leaving["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert not gate_admits(leaving)
    assert not gate_admits(None)


def _with_template(**spec) -> RenderInput:
    return dataclasses.replace(simple_host(), template_config=b.template_config(**spec))


@pytest.mark.parametrize(
    ("template", "line", "needle"),
    [
        ("global\n  maxconn 10\n{% for x in %}\n", 3, "syntax error"),
        ("global\n{{ no_such_variable }}\n", 2, "no_such_variable"),
        ("global\n\n\n{{ 1 // 0 }}\n", 4, "division"),
        ("global\n{{ fail('backend list empty') }}\n", 2, "backend list empty"),
        ("{% include 'base/nope.cfg.j2' %}\n", 1, "nope.cfg.j2"),
    ],
)
def test_bad_main_template_raises_render_error_naming_template_and_line(
    template: str, line: int, needle: str
) -> None:
    with pytest.raises(RenderError) as info:
        render(_with_template(haproxyConfig={"template": template}))
    err = info.value
    assert err.template == "spec.haproxyConfig.template"
    assert err.line == line
    assert needle in str(err)
    assert f"template spec.haproxyConfig.template line {line}" in str(err)


def test_bad_map_template_names_the_map() -> None:
    with pytest.raises(RenderError) as info:
        render(_with_template(maps={"extra.map": {"template": "a b\n{{ extra.missing.key }}\n"}}))
    assert info.value.template == "spec.maps.extra.map.template" and info.value.line == 2


def test_bad_library_template_names_the_library_file(tmp_path) -> None:
    bad = tmp_path / "templates"
    shutil.copytree(TEMPLATES_DIR, bad)
    (bad / "haproxy.cfg.j2").write_text("global\n  {{ libraries.no_such_flag }}\n")
    with pytest.raises(RenderError) as info:
        render(simple_host(), templates_dir=str(bad))
    assert info.value.template == "templates/haproxy.cfg.j2" and info.value.line == 2


def test_bad_template_config_raises_render_error() -> None:
    cfg = b.template_config()
    cfg["spec"]["templateLibraries"]["base"]["enabled"] = False
    with pytest.raises(RenderError, match="base library disabled"):
        render(dataclasses.replace(simple_host(), template_config=cfg))
    cfg = b.template_config(slots=0)
    with pytest.raises(RenderError, match="serverSlots"):
        render(dataclasses.replace(simple_host(), template_config=cfg))
    with pytest.raises(RenderError, match="invalid file name"):
        render(_with_template(files={"../etc": {"template": "x"}}))


def test_user_maps_files_and_main_template_see_the_context() -> None:
    main = (
        '{% include "base/global.cfg.j2" %}\n'
        "frontend http\n"
        '    bind "${POD_IP}:8080"\n'
        "    use_backend %[req.hdr(host),lower,map(maps/custom.map,{{ not_found_backend }})]\n"
        '{% include "base/default-backend.cfg.j2" %}\n'
        '{% include "kubernetes-backends/backends.cfg.j2" %}\n'
    )
    inp = dataclasses.replace(
        multiple_paths(),
        template_config=b.template_config(
            slots=5,
            haproxyConfig={"template": main},
            maps={
                "custom.map": {
                    "template": "{% for i in ingresses %}{% for r in i.spec.rules %}"
                    "{{ r.host }} {{ backends[0].name }}\n{% endfor %}{% endfor %}"
                }
            },
            files={
                "banner.txt": {
                    "template": "{{ extra.greeting }} {{ http.motd }} "
                    "{{ resources.configmaps | length }}\n"
                }
            },
            extraContext={"greeting": "hello"},
        ),
        resources={"configmaps": [{"metadata": {"namespace": "a", "name": "b"}}]},
        http_resources={"motd": "world"},
    )
    out = render(inp)
    assert out.file("maps/custom.map").content == b"shop.example.test shop_api_8000\n"
    assert out.file("general/banner.txt").content == b"hello world 1\n"
    assert out.file("general/banner.txt").kind == "general"
    assert out.plan["maps"]["maps/custom.map"] == {"shop.example.test": "shop_api_8000"}
    verdict = check_output(out)
    assert verdict.accepted, verdict.output


def test_a_render_shares_the_previous_plans_unchanged_backends_and_maps() -> None:
    """The leader keeps the plans of its last outputs (controller/term/plans.py): a full
    render given the previous plan shares what did not change instead of holding a second
    copy of every server slot (issue 19: the controller's memory at 5,000 Ingresses)."""
    inp = RenderInput(b.template_config(), **b.scale_set(20))
    old = render(inp)
    slices = copy.deepcopy(list(inp.endpointslices))
    slices[0]["endpoints"][0]["addresses"] = ["127.255.9.9"]
    moved = slices[0]["metadata"]["labels"]["kubernetes.io/service-name"]
    new = render(dataclasses.replace(inp, endpointslices=slices, previous_plan=old.plan))
    unshared = build_plan(new.files)
    assert new.plan == unshared and new.plan_id == plan_id(unshared)
    changed = [name for name in new.plan["backends"] if moved in name]
    assert len(changed) == 1
    for name, servers in new.plan["backends"].items():
        assert (servers is old.plan["backends"][name]) == (name not in changed), name
    for path, entries in new.plan["maps"].items():
        assert entries is old.plan["maps"][path]
    assert not any(unshared["backends"][n] is s for n, s in old.plan["backends"].items())


def test_previous_plan_keeps_endpoints_in_their_slots() -> None:
    inp = simple_host()  # 10.1.0.3, 10.1.0.7 (not ready), 10.1.0.12
    old = render(inp)
    slices = copy.deepcopy(list(inp.endpointslices))
    slices[0]["endpoints"].append(b.endpoint("10.1.0.1"))  # sorts before all the others
    changed = dataclasses.replace(inp, endpointslices=slices)
    shifted = runtime_operations(old.plan, render(changed).plan)
    assert shifted is not None and len(shifted) == 4  # address order moves every endpoint
    stable = render(dataclasses.replace(changed, previous_plan=old.plan))
    ops = runtime_operations(old.plan, stable.plan)
    assert ops == [
        {"op": "set_server", "backend": "default_web_80", "server": "SRV_4",
         "address": "10.1.0.1", "port": 8080, "weight": 1, "state": "ready"},
    ]  # fmt: skip
    assert apply_runtime_operations(old.plan, ops) == runtime_state(stable.plan)
    again = render(dataclasses.replace(changed, previous_plan=copy.deepcopy(old.plan)))
    assert again.files == stable.files  # still a pure function of its input
    # A removed endpoint frees its slot for the next new one.
    slices2 = copy.deepcopy(slices)
    slices2[0]["endpoints"] = [e for e in slices2[0]["endpoints"] if e["addresses"] != ["10.1.0.3"]]
    freed = render(dataclasses.replace(inp, endpointslices=slices2, previous_plan=stable.plan))
    servers = freed.plan["backends"]["default_web_80"]
    assert servers["SRV_4"]["address"] == "10.1.0.1"
    held = stable.plan["backends"]["default_web_80"]
    slot = next(name for name, s in held.items() if s["address"] == "10.1.0.3")
    assert servers[slot] == {"address": "127.0.0.1", "port": 1, "weight": 1, "enabled": False}
    assert all(servers[n] == s for n, s in held.items() if n != slot)


def test_library_switches() -> None:
    cfg = b.template_config()
    cfg["spec"]["templateLibraries"]["ingress"]["enabled"] = False
    out = render(dataclasses.replace(simple_host(), template_config=cfg))
    assert out.paths() == ["haproxy.cfg"]
    assert b"map_" not in out.config and b"backend default_web_80" not in out.config
    assert check_output(out).accepted
    cfg = b.template_config()
    cfg["spec"]["templateLibraries"]["kubernetesBackends"]["enabled"] = False
    out = render(dataclasses.replace(simple_host(), template_config=cfg))
    assert b"backend default_web_80" not in out.config
    assert out.plan["maps"]["maps/path-prefix.map"] == {"web.example.test/": "default_web_80"}
    assert any("kubernetesBackends library disabled" in str(w) for w in out.warnings)
    assert check_output(out).accepted


def test_manifest_files_carry_every_file_for_the_agent() -> None:
    out = render(tls())
    listed = out.manifest_files()
    assert [f["path"] for f in listed] == sorted(out.paths())
    for entry in listed:
        content = base64.b64decode(entry["content_b64"])
        assert content == out.file(entry["path"]).content
        assert entry["size"] == len(content)
        assert entry["sha256"] == hashlib.sha256(content).hexdigest()
        assert entry["kind"] == out.file(entry["path"]).kind


def test_build_plan_refuses_a_file_set_without_haproxy_cfg() -> None:
    with pytest.raises(ValueError, match=r"no haproxy\.cfg"):
        build_plan([RenderedFile("maps/a.map", "map", b"k v\n")])
    out = render(tls())
    assert build_plan(list(reversed(out.files))) == out.plan  # order of the set is irrelevant


@pytest.mark.parametrize(
    "host", ["web.example.test\n", "web.example.test\nbackend evil", "a b.test", "-a.test"]
)
def test_hosts_that_could_inject_lines_are_refused(host: str) -> None:
    inp = RenderInput(
        b.template_config(),
        ingresses=[b.ingress("default", "x", [(host, [b.path("/", "web")])])],
    )
    out = render(inp)
    assert out.plan["maps"]["maps/hosts.map"] == {}
    assert len(out.warnings) == 1 and "invalid host" in str(out.warnings[0])


@pytest.mark.parametrize("path", ["/a\n", "/a\nb c", "/a b", "/#x", 'a"b', "relative"])
def test_paths_that_could_inject_lines_are_refused(path: str) -> None:
    inp = RenderInput(
        b.template_config(),
        ingresses=[b.ingress("default", "x", [("a.example.test", [b.path(path, "web")])])],
    )
    out = render(inp)
    assert all(entries == {} for entries in out.plan["maps"].values())
    assert len(out.warnings) == 1 and "invalid path" in str(out.warnings[0])


@pytest.mark.parametrize(
    "template",
    [
        "global\n{{ ''.__class__.__mro__[1].__subclasses__() }}\n",
        "global\n{{ ingresses[0].spec.update({'rules': []}) }}\n",
        "global\n{{ extra.clear() }}\n",
    ],
)
def test_templates_run_sandboxed_and_cannot_mutate_their_input(template: str) -> None:
    inp = _with_template(haproxyConfig={"template": template}, extraContext={"a": 1})
    before = copy.deepcopy(inp)
    with pytest.raises(RenderError) as info:
        render(inp)
    assert info.value.template == "spec.haproxyConfig.template" and info.value.line == 2
    assert inp == before


@pytest.mark.parametrize(
    "previous",
    [
        {},
        {"backends": "junk"},
        {"backends": {"default_web_80": "junk"}},
        {"backends": {"default_web_80": {"SRV_x": 1, "SRV_2": {"address": "10.1.0.12"}}}},
    ],
)
def test_a_malformed_previous_plan_only_loses_slot_stability(previous) -> None:
    out = render(dataclasses.replace(simple_host(), previous_plan=previous))
    assert out.files == render(simple_host()).files


def _settings_renders(inp: RenderInput, templates_dir: str | None = None) -> int:
    """How many times one render renders the settings template."""
    calls = []
    original = jinja2.Template.render

    def counted(self: jinja2.Template, *args: Any, **kwargs: Any) -> str:
        if self.name == SETTINGS_TEMPLATE:
            calls.append(1)
        return original(self, *args, **kwargs)

    with mock.patch.object(jinja2.Template, "render", counted):
        render(inp, templates_dir=templates_dir)
    return len(calls)


def test_backend_settings_are_kept_across_renders_when_they_read_only_the_backend() -> None:
    # Every annotated Ingress has its own policies: a cold render renders each one's
    # settings; the next render of the same objects renders none and gives the same bytes.
    inp = RenderInput(b.template_config(), **b.scale_set(40, annotated=True))
    engine._settings_cache.clear()
    assert _settings_renders(inp) >= 20
    first = render(inp)
    assert _settings_renders(inp) == 0
    engine._settings_cache.clear()
    assert render(inp).files == first.files


def test_backend_settings_reading_other_context_are_rendered_per_render(tmp_path) -> None:
    tdir = tmp_path / "templates"
    shutil.copytree(TEMPLATES_DIR, tdir)
    settings = tdir / SETTINGS_TEMPLATE
    settings.write_text(settings.read_text() + "    # {{ ingresses | length }} ingresses\n")
    inp = RenderInput(b.template_config(), **b.scale_set(4))
    assert _settings_renders(inp, str(tdir)) >= 1
    assert _settings_renders(inp, str(tdir)) >= 1  # not kept: it reads `ingresses`
    assert b"# 4 ingresses" in render(inp, templates_dir=str(tdir)).config

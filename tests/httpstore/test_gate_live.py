"""A fetched body reaches the config through a real render and a real `haproxy -c` (the
render gate): a body HAProxy accepts becomes accepted, one it refuses is discarded and the
next render goes back to the accepted body."""

from __future__ import annotations

import dataclasses

from controller.httpstore.store import HTTPStore
from controller.render import render
from controller.rendergate import RenderGate
from tests.httpstore.conftest import Source, _template
from tests.render import builders as b
from tests.render.cases import simple_host

MAIN = (
    '{% include "base/global.cfg.j2" %}\n'
    "frontend http\n"
    '    bind "${POD_IP}:8080"\n'
    "    http-request deny if { src {{ http.denylist | trim }} }\n"
    "    default_backend {{ not_found_backend }}\n"
    '{% include "base/default-backend.cfg.j2" %}\n'
    '{% include "kubernetes-backends/backends.cfg.j2" %}\n'
)


def test_gate_verdicts_accept_or_refuse_the_pending_body(server) -> None:
    base, sources = server
    sources["denylist"] = Source(b"192.0.2.1\n")
    config = b.template_config(haproxyConfig={"template": MAIN})
    config["spec"].update(_template(base, denylist={})["spec"])
    store = HTTPStore(lambda: config, lambda _n: None)
    gate = RenderGate(on_verdict=lambda out, v: store.settle(dict(out.http_digests), v.accepted))
    inp = dataclasses.replace(simple_host(), template_config=config)

    def render_and_check() -> tuple[bool, bytes]:
        out = render(dataclasses.replace(inp, http_resources=store.render_view()))
        verdict = gate.check_before_dispatch(out, term_first_render=True)
        return verdict.accepted, out.config

    try:
        store.refresh(force=True)
        accepted, cfg = render_and_check()
        assert accepted and b"src 192.0.2.1 }" in cfg
        assert store.states["denylist"].accepted.body == "192.0.2.1\n"

        sources["denylist"].body = b"192.0.2.1 not-an-address\n"
        assert store.refresh(force=True)
        accepted, cfg = render_and_check()
        assert not accepted and b"not-an-address" in cfg  # haproxy -c refused it
        assert store.render_view() == {"denylist": "192.0.2.1\n"}
        accepted, cfg = render_and_check()
        assert accepted and b"not-an-address" not in cfg

        sources["denylist"].body = b"192.0.2.1 198.51.100.0/24\n"
        assert store.refresh(force=True)
        accepted, cfg = render_and_check()
        assert accepted and store.states["denylist"].accepted.body.startswith("192.0.2.1 198")
    finally:
        gate.close()
        store.close()

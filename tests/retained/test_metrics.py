"""The operator's charts (issue 20): one term renders, gates with the real `haproxy -c` and
deploys through real agents; every render and deployment metric on the controller's
/metrics (the HealthServer on the process-wide registry) moved."""

from __future__ import annotations

from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from controller.health import ComponentHealth, HealthServer
from controller.render.model import SERVICE_NOT_FOUND
from controller.render.warnings import report_warnings
from controller.watch.discovery import DiscoveredPod
from devstack.stack import wait_for
from tests.agents.helpers import free_ip
from tests.render import builders as b
from tests.retained.test_drain import NS, Harness


def _scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = httpx.get(url, timeout=5).text
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _value(samples: dict, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_render_gate_deploy_and_convergence_metrics_move(harness: Harness) -> None:
    server = HealthServer(ComponentHealth(), host="127.0.0.1", port=0)
    server.start()
    harness.closers.append(server.stop)
    url = f"http://127.0.0.1:{server.port}/metrics"
    world = harness.snapshot

    def snapshot() -> dict[str, Any]:
        # One Ingress names a Service that does not exist: a ServiceNotFound warning.
        kwargs = world()
        kwargs["ingresses"].append(
            b.ingress(NS, "ing-missing", [("missing.example", [b.path("/", "svc-missing")])])
        )
        return kwargs

    harness.snapshot = snapshot  # type: ignore[method-assign]
    agents = harness.add_agents(2, ["--min-reload-interval", "0"])
    harness.pods = [harness.pod_for(a, i) for i, a in enumerate(agents)]
    pods = [p.name for p in harness.pods]
    reported: set = set()
    harness.set_leader("replica-a", 1)
    pipeline = harness.pipeline(
        "replica-a",
        1,
        report_warnings=lambda out: report_warnings(out.warnings, reported, lambda w: None),
    )
    before = _scrape(url)
    harness.start_term(pipeline)
    pipeline.request_render()
    first = harness.wait_acknowledged(pipeline, agents)
    harness.hosts.append("b")  # a second render: a new backend, applied to running pods
    pipeline.request_render()
    wait_for(
        lambda: harness.wait_acknowledged(pipeline, agents).checksum != first.checksum,
        60,
        what="the second render acknowledged",
    )
    after = _scrape(url)

    for histogram in (
        "haptic_render_duration_seconds",
        "haptic_render_gate_duration_seconds",
        "haptic_deploy_duration_seconds",
        "haptic_convergence_seconds",
    ):
        count = f"{histogram}_count"
        assert _value(after, count) >= _value(before, count) + 2, histogram
        assert _value(after, f"{histogram}_sum") > _value(before, f"{histogram}_sum"), histogram
    # The steps before each apply: the term fence and the intent record, once per dispatch.
    for step in ("fence", "intent"):
        count, total = "haptic_dispatch_step_seconds_count", "haptic_dispatch_step_seconds_sum"
        assert _value(after, count, step=step) >= _value(before, count, step=step) + 2, step
        assert _value(after, total, step=step) > _value(before, total, step=step), step
    for pod in pods:
        applies = sum(
            _value(after, name, pod=pod) - _value(before, name, pod=pod)
            for name in ("haptic_agent_reloads_total", "haptic_agent_runtime_operations_total")
        )
        assert applies >= 2, pod  # the first apply reloads, the second too or runtime
        assert _value(after, "haptic_agent_reloads_total", pod=pod) > _value(
            before, "haptic_agent_reloads_total", pod=pod
        )
    # A pod whose agent does not answer: its apply fails and is counted for it alone.
    ghost = DiscoveredPod(NS, "haproxy-ghost", f"uid-ghost-{harness.name}", free_ip(), False, None)
    harness.pods.append(ghost)
    harness.hosts.append("c")
    pipeline.request_render()
    errors = "haptic_agent_apply_errors_total"
    wait_for(
        lambda: _value(_scrape(url), errors, pod=ghost.name) > 0, 60, what="the ghost's apply error"
    )
    final = _scrape(url)
    for pod in pods:
        assert _value(final, errors, pod=pod) == _value(before, errors, pod=pod), pod
    name = "haptic_render_warnings_reported_total"
    assert _value(final, name, reason=SERVICE_NOT_FOUND) == (
        _value(before, name, reason=SERVICE_NOT_FOUND) + 1
    ), "a warning that persists across renders is reported once"

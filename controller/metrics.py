"""Prometheus metrics of rendering and deployment (the operator's charts, issue 20).

The objects live here; the edges observe them (the coordinator times render, the gate
times `haproxy -c`, the dispatcher times each deployment and counts what every pod's agent
did). `haptic_convergence_seconds` starts at the earliest render request a render served
(the reconciler's trigger after a watch event, or a term's first render) and ends when
every current HAProxy pod acknowledged that render's checksum; each checksum is observed
once per term.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from contract import PodAction

# Render and gate are in-process and fast; deploy and convergence include HAProxy reloads,
# paced reloads and agent round trips, so their buckets reach minutes.
FAST_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
SLOW_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)

RENDER_DURATION = Histogram(
    "haptic_render_duration_seconds",
    "Time to render the HAProxy configuration from the watched state.",
    buckets=FAST_BUCKETS,
)
# docs/design/incremental.md: which path made each output the leader dispatched.
RENDERS = Counter(
    "haptic_renders_total",
    "Outputs made by the leader, by path: full (every template) or incremental (an "
    "EndpointSlice change patched into the last output).",
    ["path"],
)
INCREMENTAL_CHECKS = Counter(
    "haptic_incremental_checks_total",
    "Consistency checks: a full render compared with the incremental path's output.",
)
INCREMENTAL_MISMATCH = Counter(
    "haptic_incremental_mismatch_total",
    "Consistency checks where the incremental output differed from the full render (the "
    "full render's output was used).",
)
GATE_DURATION = Histogram(
    "haptic_render_gate_duration_seconds",
    "Time the render gate's `haproxy -c` check of one render took.",
    buckets=FAST_BUCKETS,
)
DEPLOY_DURATION = Histogram(
    "haptic_deploy_duration_seconds",
    "Time one deployment to the HAProxy fleet took (every pod's apply, in parallel).",
    buckets=SLOW_BUCKETS,
)
# What a dispatch does before the apply (docs/term.md): prove the term
# against the leader Lease, then record the intent. With the apply (DEPLOY_DURATION) these
# are the leader's share of an endpoint change's latency (bench/bench_convergence.py).
DISPATCH_STEP = Histogram(
    "haptic_dispatch_step_seconds",
    "Time of a dispatch's steps before the apply: the term fence (a leader Lease read; the local "
    "check alone when the intent record's own reads prove the term) and "
    "the intent record.",
    ["step"],
    buckets=FAST_BUCKETS,
)
CONVERGENCE = Histogram(
    "haptic_convergence_seconds",
    "From the render request a render served to every HAProxy pod acknowledging it.",
    buckets=SLOW_BUCKETS,
)
AGENT_RELOADS = Counter(
    "haptic_agent_reloads_total",
    "Applies an HAProxy pod's agent answered with a reload (now or scheduled).",
    ["pod"],
)
AGENT_RUNTIME_OPERATIONS = Counter(
    "haptic_agent_runtime_operations_total",
    "Applies an HAProxy pod's agent carried out through the Runtime API, without a reload.",
    ["pod"],
)
AGENT_APPLY_ERRORS = Counter(
    "haptic_agent_apply_errors_total",
    "Applies to an HAProxy pod that failed or its agent refused.",
    ["pod"],
)
# Not haptic_render_warnings_total: a counter of that name collides with the gauge
# haptic_render_warnings (controller/render/warnings.py) in the registry.
RENDER_WARNINGS_TOTAL = Counter(
    "haptic_render_warnings_reported",
    "Render warnings newly reported (an object skipped or degraded), by reason.",
    ["reason"],
)

# The template gate (controller/templategate.py).
TEMPLATE_REFUSED = Gauge(
    "haptic_template_validation_refused",
    "1 while the newest HAProxyTemplateConfig is refused because its validationTests fail "
    "(renders use the last accepted template).",
)
TEMPLATE_VALIDATION_RUNS = Counter(
    "haptic_template_validation_runs_total",
    "Runs of a changed template config's validationTests, by result.",
    ["result"],
)


def count_outcome(pod: str, action: str) -> None:
    """Count one pod outcome of an apply (skipped and noop count nowhere)."""
    kind = PodAction(action)
    if kind.is_reload:
        AGENT_RELOADS.labels(pod).inc()
    elif kind is PodAction.RUNTIME:
        AGENT_RUNTIME_OPERATIONS.labels(pod).inc()
    elif kind.is_error:
        AGENT_APPLY_ERRORS.labels(pod).inc()

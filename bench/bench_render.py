"""Render benchmarks (issues 6, 19): render time for 100 / 800 / 3,000 / 5,000 Ingresses, the
RSS of a process holding 800 Ingresses with their Services and EndpointSlices as cached dicts
plus one render, and for the record the follow-on costs of a render (plan diff, haproxy -c).
Targets: median <= 150 ms at 800, <= 600 ms at 5,000 (issue 19).

Each Ingress has its own host with a Prefix and an Exact path, its own Service and one
EndpointSlice with 3 endpoints (one not ready); serverSlots is the default 10. The
"half_annotated" run (issue 18) gives every other Ingress of the 800 five haproxy.org/*
annotations (tests.render.builders.bench_annotations, values differing per Ingress so each
set is parsed): same 150 ms target.
"""

from __future__ import annotations

import copy
import dataclasses
import gc
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.harness import summarize
from controller.render import RenderInput, engine, render, runtime_operations
from controller.rendergate import check_output
from tests.render.builders import scale_set, template_config

REPO = Path(__file__).resolve().parent.parent
TARGET_800_MS = 150.0
TARGETS_MS = {800: TARGET_800_MS, 5000: 600.0}  # issues 6 and 19


def _inputs(n: int, annotated: bool = False) -> RenderInput:
    return RenderInput(template_config(), **scale_set(n, annotated=annotated))


def _time_renders(
    inp: RenderInput, runs: int, cold: bool = False
) -> tuple[list[float], list[float]]:
    """Wall-clock and CPU milliseconds per render. The machine is shared: CPU time shows
    what the render costs, wall time what a caller waited. `cold`: every render starts
    without the backend settings kept from earlier renders (the first render of a set)."""
    render(inp)  # warm: template compilation happens once per process
    wall, cpu = [], []
    for _ in range(runs):
        if cold:
            engine._settings_cache.clear()
        started, started_cpu = time.perf_counter(), time.process_time()
        render(inp)
        wall.append((time.perf_counter() - started) * 1000)
        cpu.append((time.process_time() - started_cpu) * 1000)
    return wall, cpu


_RSS_SCRIPT = """
import json, sys
sys.path.insert(0, {repo!r})
def rss(field="VmRSS:"):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1]) / 1024
if {imports!r}:
    import celery, django, jinja2, kubernetes.client  # what a controller process loads
from controller.render import RenderInput, render
from tests.render.builders import scale_set, template_config
baseline = rss()
cache = scale_set(800)
cached = rss()
out = render(RenderInput(template_config(), **cache))
after = rss()
# VmHWM, not ru_maxrss: the latter carries the parent's high-water mark across fork+exec.
peak = rss("VmHWM:")
print(json.dumps({{"baseline": baseline, "cached": cached, "after_render": after, "peak": peak,
                  "files": len(out.files), "config_bytes": len(out.config)}}))
"""


def _rss_800(imports: bool) -> dict[str, Any]:
    # A fresh interpreter, so nothing from the timing runs above is counted.
    proc = subprocess.run(
        [sys.executable, "-c", _RSS_SCRIPT.format(repo=str(REPO), imports=imports)],
        capture_output=True,
        text=True,
        check=True,
        cwd=str(REPO),
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run() -> list[dict[str, Any]]:
    metrics = [
        _render_metric(n, annotated, runs)
        for n, annotated, runs in (
            (100, False, 30),
            (800, False, 25),
            (800, True, 25),
            (800, "cold", 15),
            (3000, False, 5),
            (5000, False, 5),
        )
    ]
    old = render(_inputs(800))
    metrics.append(_diff_metric(old))
    metrics.append(_gate_metric(old))
    metrics.append(_frozen_gc_metric())
    metrics.extend(_rss_metric(imports) for imports in (False, True))
    return metrics


def _render_metric(n: int, annotated: bool | str, runs: int) -> dict[str, Any]:
    """`annotated`: True, False or "cold" (half annotated, no settings kept from earlier
    renders: what the first render of a changed cluster costs; reported)."""
    cold = annotated == "cold"
    inp = _inputs(n, bool(annotated))
    load_before = os.getloadavg()[0]
    wall, cpu = _time_renders(inp, runs, cold)
    stats = summarize(wall)
    out = render(inp)
    suffix = "_half_annotated_cold" if cold else "_half_annotated" if annotated else ""
    entry: dict[str, Any] = {
        "metric": f"render_{n}_ingresses{suffix}",
        **stats,
        "cpu_median_ms": summarize(cpu)["median_ms"],
        "cpu_p95_ms": summarize(cpu)["p95_ms"],
        "loadavg_1m_before": round(load_before, 2),
        "loadavg_1m_after": round(os.getloadavg()[0], 2),
        "servers": sum(len(s) for s in out.plan["backends"].values()),
        "config_bytes": len(out.config),
    }
    if annotated:
        assert not out.warnings, out.warnings[:3]
        entry["annotated_ingresses"] = n // 2
    if cold:
        entry["target"] = "reported (the target is for renders of a known set)"
        entry["meets_target"] = True
    elif n in TARGETS_MS:
        entry["target"] = f"median <= {TARGETS_MS[n]:g} ms"
        entry["meets_target"] = stats["median_ms"] <= TARGETS_MS[n]
        # On a shared machine wall time is mostly waiting for a core: the CPU median says
        # whether the render itself fits the target.
        entry["cpu_meets_target"] = entry["cpu_median_ms"] <= TARGETS_MS[n]
    else:
        entry["target"] = "reported (targets are set for 800 and 5,000)"
        entry["meets_target"] = True
    return entry


def _diff_metric(old: Any) -> dict[str, Any]:
    """An endpoint change within slot capacity: render again, diff the plans (one endpoint's
    address changes, so one set_server operation is expected)."""
    inp = _inputs(800)
    slices = copy.deepcopy(list(inp.endpointslices))
    slices[400]["endpoints"][0]["addresses"] = ["10.99.0.1"]
    # As the controller renders: with the previous plan, so endpoints keep their slots.
    changed = dataclasses.replace(inp, endpointslices=slices, previous_plan=old.plan)
    diff_samples = []
    for _ in range(15):
        started = time.perf_counter()
        new = render(changed)
        ops = runtime_operations(old.plan, new.plan)
        diff_samples.append((time.perf_counter() - started) * 1000)
    return {
        "metric": "render_and_diff_800_endpoint_change",
        **summarize(diff_samples),
        "runtime_operations": len(ops) if ops is not None else None,
        "target": "runtime-only: one set_server operation, no reload",
        "meets_target": ops is not None and len(ops) == 1,
    }


def _gate_metric(old: Any) -> dict[str, Any]:
    check_samples = []
    accepted = True
    for _ in range(5):
        verdict = check_output(old)
        accepted = accepted and verdict.accepted
        check_samples.append(verdict.duration_s * 1000)
    return {
        "metric": "render_gate_check_800_ingresses",
        **summarize(check_samples),
        "target": "accepted by haproxy -c -dr (off the hot path; reported)",
        "meets_target": accepted,
    }


def _frozen_gc_metric() -> dict[str, Any]:
    """The same 3,000 after gc.freeze(): at this size the cyclic GC re-scanning the cached
    objects is a large part of the cost; a controller can freeze its warm caches."""
    inp = _inputs(3000)
    render(inp)
    gc.collect()
    gc.freeze()
    try:
        wall, cpu = _time_renders(inp, 5)
    finally:
        gc.unfreeze()
    return {
        "metric": "render_3000_ingresses_cache_gc_frozen",
        **summarize(wall),
        "cpu_median_ms": summarize(cpu)["median_ms"],
        "target": "reported (target is set for 800)",
        "meets_target": True,
    }


def _rss_metric(imports: bool) -> dict[str, Any]:
    rss = _rss_800(imports)
    return {
        "metric": "rss_800_ingresses_cached_plus_one_render"
        + ("_with_controller_imports" if imports else ""),
        "rss_mib": round(rss["after_render"], 1),
        "peak_rss_mib": round(rss["peak"], 1),
        "before_cache_mib": round(rss["baseline"], 1),
        "cache_only_mib": round(rss["cached"], 1),
        "target": "reported (issue 6 sets no RSS target)",
        "meets_target": True,
    }

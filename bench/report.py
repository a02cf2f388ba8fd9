"""Gather every bench/results/*.json into bench/results/summary.json and summary.md.

    python -m bench.report

Run at the end of `python -m bench`; runnable alone to rebuild the summary from the result
files already there. One markdown table (benchmark, metric, median, p95, target, met) with
the machine details on top; results recorded on different machines or revisions are noted.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from bench.harness import RESULTS_DIR, machine

SUMMARY_FILES = {"summary.json"}
PREFERRED = ("rss_mib", "peak_rss_mib")  # shown first for metrics without a median


def load_results(results_dir: Path = RESULTS_DIR) -> list[dict[str, Any]]:
    """Every benchmark result file (not the summary itself), sorted by benchmark name."""
    out = []
    for path in sorted(results_dir.glob("*.json")):
        if path.name in SUMMARY_FILES:
            continue
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            print(f"skipping {path.name}: {exc}", file=sys.stderr)
            continue
        if isinstance(data, dict):
            data.setdefault("benchmark", path.stem)
            out.append(data)
    return out


def _fmt(value: Any, unit: str = "") -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, float):
        value = f"{value:.1f}" if abs(value) >= 100 else f"{value:.3g}"
    return f"{value}{unit}"


def row(benchmark: str, metric: dict[str, Any]) -> dict[str, Any]:
    """One table row: the central value and p95 in the unit the metric is measured in."""
    median: Any = None
    p95: Any = None
    unit = ""
    if "median_ms" in metric:
        median, p95, unit = metric.get("median_ms"), metric.get("p95_ms"), " ms"
    elif "per_second" in metric:
        median, unit = metric["per_second"], " /s"
    elif "value" in metric:
        median = metric["value"]
    else:  # no central value (RSS, CPU split, query counts): show its first numbers
        numbers = [
            f"{k}={v}"
            for k, v in sorted(metric.items(), key=lambda kv: kv[0] not in PREFERRED)
            if isinstance(v, int | float) and not isinstance(v, bool)
        ]
        median = ", ".join(numbers[:2]) or None
    met = metric.get("meets_target")
    return {
        "benchmark": benchmark,
        "metric": metric.get("metric", "?"),
        "median": median,
        "p95": p95,
        "unit": unit.strip(),
        "target": metric.get("target", ""),
        "met": met,
    }


def soak_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The soak report is not a list of metrics: one row per invariant, plus the load."""
    rows = []
    for check in result.get("checks", []):
        rows.append(
            {
                "benchmark": result["benchmark"],
                "metric": check["name"],
                "median": check.get("checked"),
                "p95": None,
                "unit": "checked",
                "target": "0 violations",
                "met": None if check.get("status") == "not run" else check["violation_count"] == 0,
            }
        )
    load = result.get("load") or {}
    if load:
        rows.append(
            {
                "benchmark": result["benchmark"],
                "metric": f"request latency under faults ({load.get('requests')} requests)",
                "median": load["latency_ms"].get("median"),
                "p95": load["latency_ms"].get("p95"),
                "unit": "ms",
                "target": "recorded",
                "met": None,
            }
        )
    return rows


def summarize(results: list[dict[str, Any]]) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    recorded: dict[str, dict[str, Any]] = {}
    for result in results:
        name = result["benchmark"]
        recorded[name] = {
            "recorded_at": result.get("recorded_at"),
            "git_revision": (result.get("machine") or {}).get("git_revision"),
            "hostname": (result.get("machine") or {}).get("hostname"),
        }
        if "checks" in result:  # a soak report (soak.json, or another --report path)
            rows += soak_rows(result)
            continue
        rows += [row(name, m) for m in result.get("metrics", [])]
    judged = [r for r in rows if r["met"] is not None]
    return {
        "machine": machine(),
        "results": recorded,
        "rows": rows,
        "targets_met": sum(1 for r in judged if r["met"]),
        "targets_judged": len(judged),
        "targets_missed": [f"{r['benchmark']}/{r['metric']}" for r in judged if not r["met"]],
    }


def markdown(summary: dict[str, Any]) -> str:
    m = summary["machine"]
    lines = [
        "# Benchmark summary",
        "",
        f"Machine: {m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB RAM, "
        f"Python {m['python']}, {m['platform']}, host `{m['hostname']}`, "
        f"git `{m['git_revision']}`.",
        "",
        f"Targets met: {summary['targets_met']} of {summary['targets_judged']}"
        + (
            f" (missed: {', '.join(summary['targets_missed'])})"
            if summary["targets_missed"]
            else ""
        )
        + ".",
        "",
        "| benchmark | metric | median | p95 | target | met |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in summary["rows"]:
        unit = f" {r['unit']}" if r["unit"] else ""
        met = {True: "yes", False: "**no**", None: "-"}[r["met"]]
        target = str(r["target"]).replace("|", "\\|")
        lines.append(
            f"| {r['benchmark']} | {r['metric']} | {_fmt(r['median'], unit)} | "
            f"{_fmt(r['p95'], unit)} | {target} | {met} |"
        )
    lines += ["", "Each result file's own run:", "", "| benchmark | recorded | git | host |"]
    lines.append("| --- | --- | --- | --- |")
    for name, info in sorted(summary["results"].items()):
        lines.append(
            f"| {name} | {info['recorded_at']} | {info['git_revision']} | {info['hostname']} |"
        )
    return "\n".join(lines) + "\n"


def write_summary(results_dir: Path = RESULTS_DIR) -> tuple[Path, Path]:
    summary = summarize(load_results(results_dir))
    json_path = results_dir / "summary.json"
    md_path = results_dir / "summary.md"
    results_dir.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    md_path.write_text(markdown(summary))
    return json_path, md_path


def main() -> int:
    json_path, md_path = write_summary()
    print(md_path.read_text())
    print(f"-> {json_path}\n-> {md_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

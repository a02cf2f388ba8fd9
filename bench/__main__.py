"""Run every benchmark module (bench/bench_*.py), or those named on the command line.

Each module defines `run() -> list[dict]` returning metrics; the harness writes them to
bench/results/<module>.json with the machine noted, then prints a table. At the end every
result file (including ones from earlier runs and the soak) is gathered into
bench/results/summary.json and summary.md (bench/report.py).
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
import traceback
from pathlib import Path

from bench.harness import write_result
from bench.report import write_summary


def discover() -> list[str]:
    here = Path(__file__).resolve().parent
    return sorted(m.name for m in pkgutil.iter_modules([str(here)]) if m.name.startswith("bench_"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("names", nargs="*", help="benchmark modules to run (default: all)")
    args = parser.parse_args(argv)
    names = args.names or discover()
    failed = []
    for name in names:
        module_name = name if name.startswith("bench_") else f"bench_{name}"
        print(f">> {module_name}", flush=True)
        try:
            module = importlib.import_module(f"bench.{module_name}")
            metrics = module.run()
        except Exception:
            traceback.print_exc()
            failed.append(module_name)
            continue
        path = write_result(module_name.removeprefix("bench_"), metrics)
        for metric in metrics:
            shown = {k: v for k, v in metric.items() if k != "metric"}
            print(f"   {metric['metric']}: {shown}")
        print(f"   -> {path}")
    json_path, md_path = write_summary()
    print(f">> summary -> {json_path}, {md_path}")
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Every benchmark module imports (`python -m bench` imports each by name): a refactor of one
module's helpers must not break another that uses them. bench_rollout imported a function
bench_convergence no longer had, and `make bench` failed on it."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


@pytest.mark.parametrize("module", sorted(p.stem for p in BENCH.glob("bench_*.py")))
def test_the_benchmark_module_imports_and_has_run(module: str) -> None:
    loaded = importlib.import_module(f"bench.{module}")
    assert callable(loaded.run)

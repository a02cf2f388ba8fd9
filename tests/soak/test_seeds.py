"""Several seeds in one soak run: per-seed report paths and the summary table."""

from __future__ import annotations

import json
from pathlib import Path

from soak.__main__ import seed_report_path, write_summary


def report(seed: int, violations: int) -> dict:
    checks = [
        {
            "name": "at rest the intent names what every pod runs",
            "status": "pass",
            "checked": 9,
            "violation_count": 0,
        },
        {
            "name": "system healthy again after every fault",
            "status": "FAIL" if violations else "pass",
            "checked": 5,
            "violation_count": violations,
        },
    ]
    return {"seed": seed, "checks": checks, "violations": violations}


def test_one_seed_keeps_the_report_path_and_several_get_one_each(tmp_path: Path) -> None:
    path = tmp_path / "soak.json"
    assert seed_report_path(path, 7, several=False) == path
    assert seed_report_path(path, 7, several=True) == tmp_path / "soak-seed7.json"


def test_the_summary_lists_violations_per_check_and_seed(tmp_path: Path) -> None:
    paths = []
    for seed, violations in ((1, 0), (2, 1)):
        path = seed_report_path(tmp_path / "soak.json", seed, several=True)
        path.write_text(json.dumps(report(seed, violations)))
        paths.append(path)
    paths.append(tmp_path / "soak-seed3.json")  # a seed whose run wrote nothing
    write_summary(paths, tmp_path / "soak.md")
    text = (tmp_path / "soak.md").read_text()
    assert "| check | seed 1 | seed 2 |" in text
    assert "| system healthy again after every fault | 0 of 5 | 1 of 5 |" in text
    assert "| **total** | 0 | 1 |" in text
    assert "- seed 2: soak-seed2.md" in text

"""The README's layout table matches the tree: every top-level folder has a row, and every
path a row names exists."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _table_paths() -> list[str]:
    text = (REPO / "README.md").read_text()
    section = text.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    return [
        p
        for row in re.findall(r"^\| (.+?) \|", section, re.M)
        for p in re.findall(r"`([^`]+)`", row)
    ]


def test_every_top_level_folder_has_a_row_and_every_row_exists() -> None:
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    folders = {f.split("/", 1)[0] + "/" for f in tracked if "/" in f and not f.startswith(".")}
    named = set(_table_paths())
    covered = {f for f in folders if any(p.startswith(f) for p in named)}
    assert folders - covered == set(), "folders without a row in the README's layout table"
    assert [p for p in named if not (REPO / p).exists()] == [], "rows naming no path"

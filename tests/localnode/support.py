"""Helpers for the local node tests: polling with deadlines and finding processes by env."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def pids_with_env(**wanted: str) -> list[int]:
    """Live (non-zombie) processes whose environment has every given VAR=value."""
    needles = {f"{k}={v}".encode() for k, v in wanted.items()}
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            environ = set(Path(f"/proc/{entry}/environ").read_bytes().split(b"\0"))
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if needles <= environ and state not in ("Z", "X"):
            found.append(int(entry))
    return found

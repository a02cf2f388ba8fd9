"""Helpers for the local node tests: polling with deadlines and finding processes by env."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def wait_for(
    fn: Callable[[], T], timeout: float = 30.0, interval: float = 0.1, what: str = "condition"
) -> T:
    """Poll until fn returns something truthy; generous deadlines for a loaded machine."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while True:
        last = fn()
        if last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}; last value {last!r}")
        time.sleep(interval)


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

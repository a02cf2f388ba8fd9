"""Fixtures of the agent tests: a real agent process with a real haproxy, real backends."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.agents.helpers import AgentProcess, Backend


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[AgentProcess]:
    # Pacing is tested on its own; elsewhere back-to-back reloads must not be deferred.
    proc = AgentProcess(
        tmp_path / "data", extra_args=["--max-body-bytes", "1048576", "--min-reload-interval", "0"]
    ).start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture
def backends() -> Iterator[list[Backend]]:
    made = [Backend("alpha"), Backend("beta"), Backend("gamma")]
    try:
        yield made
    finally:
        for backend in made:
            backend.close()

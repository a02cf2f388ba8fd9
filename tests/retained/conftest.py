"""Fixtures of the pipeline-level ADR-0033 tests (test_drain, test_seed_cases): one local
API server per module, and a harness of real agents around it per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import kubernetes
import pytest

from localcluster.testing import ApiServer, start_cluster
from tests.retained.test_drain import NS, Harness


@pytest.fixture(scope="module")
def api() -> Iterator[ApiServer]:
    with start_cluster() as server:
        kubernetes.client.CoreV1Api(server.api_client()).create_namespace(
            {"metadata": {"name": NS}}
        )
        yield server


@pytest.fixture
def harness(api: ApiServer, tmp_path: Path) -> Iterator[Harness]:
    h = Harness(api, tmp_path)
    try:
        yield h
    finally:
        h.close()

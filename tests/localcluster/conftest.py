"""One API server process shared by the conformance tests (each test uses its own namespace)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import kubernetes
import pytest

from localcluster.testing import ApiServer


@pytest.fixture(scope="session")
def apiserver() -> Iterator[ApiServer]:
    with ApiServer.start(extra_args=["--bookmark-interval", "0.5"]) as api:
        yield api


@pytest.fixture()
def client(apiserver: ApiServer) -> Iterator[kubernetes.client.ApiClient]:
    c = apiserver.api_client()
    yield c
    c.close()


@pytest.fixture()
def core(client: kubernetes.client.ApiClient) -> kubernetes.client.CoreV1Api:
    return kubernetes.client.CoreV1Api(client)


@pytest.fixture()
def namespace(core: kubernetes.client.CoreV1Api) -> str:
    name = "t-" + uuid.uuid4().hex[:10]
    core.create_namespace({"metadata": {"name": name}})
    return name

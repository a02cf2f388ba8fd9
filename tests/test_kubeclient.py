"""controller/kubeclient.py: the one retry policy of every ApiClient, against an API server
over HTTP (the local one, whose faults answer 429 as kube-apiserver does while a watch cache
(re)initializes: Retry-After 1)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import kubernetes
import pytest
import urllib3
from kubernetes.client.exceptions import ApiException

from controller.hub.kube import MAP, Kube
from controller.kubeclient import TOO_MANY_REQUESTS_RETRIES, bounded_copy, from_configuration
from localcluster.testing import ApiServer


@pytest.fixture(scope="module")
def server() -> Iterator[ApiServer]:
    with ApiServer.start() as api:
        yield api


@pytest.fixture(params=["unbounded", "bounded"])
def api_client(server: ApiServer, request) -> Iterator[kubernetes.client.ApiClient]:
    server.clear_faults()
    made = from_configuration(server.configuration(), bounded=request.param == "bounded")
    yield made
    server.clear_faults()
    made.close()


def test_a_429_read_is_asked_again_after_the_pause_it_names(server, api_client) -> None:
    server.add_fault(path_regex="/namespaces/default/configmaps", status=429, times=2)
    core = kubernetes.client.CoreV1Api(api_client)
    started = time.monotonic()
    assert core.list_namespaced_config_map("default").items is not None
    assert time.monotonic() - started >= 1.9  # two pauses of Retry-After: 1


def test_a_429_write_is_asked_again_and_done_once(server, api_client) -> None:
    """A 429 was never served, so asking again is not writing twice (client-go does the
    same for every verb)."""
    name = f"w-{time.monotonic_ns()}"
    server.add_fault(path_regex="/namespaces/default/configmaps", status=429, times=1,
                     methods=["POST"])  # fmt: skip
    core = kubernetes.client.CoreV1Api(api_client)
    body = {"metadata": {"name": name}, "data": {"k": "v"}}
    assert core.create_namespaced_config_map("default", body).metadata.name == name
    assert core.read_namespaced_config_map(name, "default").data == {"k": "v"}
    core.delete_namespaced_config_map(name, "default")


def test_a_server_that_keeps_answering_429_is_not_asked_forever(server, api_client) -> None:
    server.add_fault(path_regex="/namespaces/default/secrets", status=429)
    core = kubernetes.client.CoreV1Api(api_client)
    started = time.monotonic()
    with pytest.raises(ApiException) as refused:
        core.list_namespaced_secret("default")
    assert refused.value.status == 429
    waited = time.monotonic() - started
    assert TOO_MANY_REQUESTS_RETRIES - 0.5 <= waited < TOO_MANY_REQUESTS_RETRIES + 5


def test_the_hubs_client_rides_the_same_policy(server) -> None:
    """controller/hub/kube.py sends through the ApiClient it is given: no loop of its own."""
    server.clear_faults()
    kube = Kube(bounded_copy(from_configuration(server.configuration())), 5.0)
    server.add_fault(path_regex="/namespaces/default/haproxymapfiles", status=429, times=1)
    assert kube.list(MAP.collection("default"))["items"] == []
    server.clear_faults()


def test_a_bounded_read_that_times_out_is_not_asked_again(server) -> None:
    server.clear_faults()
    bounded = from_configuration(server.configuration(), bounded=True)
    server.add_fault(path_regex="/namespaces/default/endpoints", latency_ms=1500, methods=["GET"])
    core = kubernetes.client.CoreV1Api(bounded)
    started = time.monotonic()
    with pytest.raises(urllib3.exceptions.ReadTimeoutError):
        core.list_namespaced_endpoints("default", _request_timeout=0.3)
    assert time.monotonic() - started < 1.2  # one timeout, not four
    server.clear_faults()
    bounded.close()


def test_a_copy_leaves_the_original_untouched(server) -> None:
    original = from_configuration(server.configuration())
    policy = original.configuration.retries
    original.user_agent = "haptic/replica-a"
    copied = bounded_copy(original)
    assert copied is not original and copied.configuration is not original.configuration
    assert original.configuration.retries is policy
    assert copied.user_agent == "haptic/replica-a"
    assert copied.configuration.retries.connect is False
    original.close()
    copied.close()

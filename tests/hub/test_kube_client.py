"""The hub's raw client (controller/hub/kube.py) against a real API server over HTTP."""

from __future__ import annotations

import time

import pytest
from kubernetes.client.exceptions import ApiException

from controller.hub.kube import MAP, retry_after


def test_a_429_is_asked_again_after_the_pause_the_server_names(clusters, ns) -> None:
    """kube-apiserver answers 429 "storage is (re)initializing" (retry after 1 s) while the
    watch cache of a resource starts; client-go asks again, and so does the hub's client
    (the real cluster answered the mirror test's list so)."""
    a, _ = clusters
    a.api.add_fault(path_regex=f"/namespaces/{ns}/haproxymapfiles", status=429, times=2)
    assert a.kube.list(MAP.collection(ns))["items"] == []


def test_a_server_that_keeps_answering_429_is_not_asked_forever(clusters, ns) -> None:
    a, _ = clusters
    a.api.add_fault(path_regex=f"/namespaces/{ns}/haproxymapfiles", status=429)
    started = time.monotonic()
    with pytest.raises(ApiException) as refused:
        a.kube.list(MAP.collection(ns))
    assert refused.value.status == 429
    assert time.monotonic() - started < 5.0


def test_the_pause_is_the_header_else_the_status_else_one_second_and_at_most_one() -> None:
    status = b'{"kind": "Status", "details": {"retryAfterSeconds": 0.5}}'
    assert retry_after("0.25", status) == 0.25
    assert retry_after(None, status) == 0.5
    assert retry_after(None, b"not json") == 1.0
    assert retry_after("soon", None) == 1.0
    assert retry_after("30", None) == 1.0

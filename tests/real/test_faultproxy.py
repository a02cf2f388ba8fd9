"""The real tier's fault proxy (localcluster/real/faultproxy.py) in front of a real
kube-apiserver: a rule answers for the API server only where it matches, and only for clients
whose kubeconfig names the proxy; a watch streams through and a black hole silences it until
the rule goes; callers keep their own identity.

Skipped when the real control plane is not built (`make kube`, which needs Go).
"""

from __future__ import annotations

import queue
import threading
import time
import urllib.error
import uuid
from collections.abc import Iterator

import kubernetes
import pytest
import urllib3
from kubernetes import client

from controller.kubeclient import from_configuration, from_kubeconfig
from tests.real import NEEDS_REAL_CONTROL_PLANE

pytestmark = [
    NEEDS_REAL_CONTROL_PLANE,
    pytest.mark.timeout(300),
]


@pytest.fixture(scope="module")
def real() -> Iterator[object]:
    from localcluster.real.testing import RealApiServer

    with RealApiServer.start() as api:
        yield api


@pytest.fixture
def api(real) -> Iterator[object]:
    try:
        yield real
    finally:
        real.clear_faults()


@pytest.fixture
def ns(real) -> str:
    name = f"fp-{uuid.uuid4().hex[:8]}"
    direct = from_kubeconfig(str(real.plane.kubeconfig))
    client.CoreV1Api(direct).create_namespace({"metadata": {"name": name}})
    direct.close()
    return name


# Published into every namespace by the controller manager (not by the test).
ROOT_CA = "kube-root-ca.crt"


def _configmap(name: str) -> dict:
    return {"metadata": {"name": name}, "data": {"k": "v"}}


def test_a_status_fault_answers_where_it_matches_and_removing_it_restores(api, ns) -> None:
    proxied = client.CoreV1Api(api.api_client())
    direct = client.CoreV1Api(from_kubeconfig(str(api.plane.kubeconfig)))
    assert api.url != api.plane.url  # the handle's clients go through the proxy
    fault = api.add_fault(path_regex=f"/namespaces/{ns}/configmaps", methods=["GET"], status=503)
    with pytest.raises(client.ApiException) as refused:
        proxied.list_namespaced_config_map(ns, _request_timeout=10)
    assert refused.value.status == 503
    assert "ServiceUnavailable" in refused.value.body
    # Another method, another path, and a client that talks to the API server directly pass.
    proxied.create_namespaced_config_map(ns, _configmap("one"), _request_timeout=10)
    proxied.list_namespaced_secret(ns, _request_timeout=10)
    mine = {c.metadata.name for c in direct.list_namespaced_config_map(ns).items} - {ROOT_CA}
    assert mine == {"one"}
    api.remove_fault(fault)
    listed = proxied.list_namespaced_config_map(ns, _request_timeout=10)
    assert {c.metadata.name for c in listed.items} - {ROOT_CA} == {"one"}


def _watch_names(api, ns: str, seen: queue.Queue, stop: threading.Event) -> None:
    watch = kubernetes.watch.Watch()
    core = client.CoreV1Api(api.api_client())
    for event in watch.stream(core.list_namespaced_config_map, ns, timeout_seconds=60):
        if event["object"].metadata.name != ROOT_CA:
            seen.put((event["type"], event["object"].metadata.name))
        if stop.is_set():
            watch.stop()


def test_a_watch_streams_through_and_a_black_hole_holds_it(api, ns) -> None:
    direct = client.CoreV1Api(from_kubeconfig(str(api.plane.kubeconfig)))
    seen: queue.Queue = queue.Queue()
    stop = threading.Event()
    watcher = threading.Thread(target=_watch_names, args=(api, ns, seen, stop), daemon=True)
    watcher.start()
    time.sleep(1.0)  # the watch is open
    direct.create_namespaced_config_map(ns, _configmap("first"))
    assert seen.get(timeout=10) == ("ADDED", "first")

    fault = api.add_fault(path_regex="/configmaps", methods=["GET"], blackhole=True)
    direct.create_namespaced_config_map(ns, _configmap("held"))
    with pytest.raises(queue.Empty):
        seen.get(timeout=2.0)  # the open stream went silent
    proxied = client.CoreV1Api(api.api_client())
    started = time.monotonic()
    with pytest.raises(urllib3.exceptions.HTTPError, match="Read timed out"):
        proxied.list_namespaced_config_map(ns, _request_timeout=1.5)  # a new read hangs
    assert time.monotonic() - started >= 1.4

    api.remove_fault(fault)
    assert seen.get(timeout=10) == ("ADDED", "held")  # what was held arrives
    stop.set()
    direct.create_namespaced_config_map(ns, _configmap("last"))
    watcher.join(timeout=10)
    listed = proxied.list_namespaced_config_map(ns, _request_timeout=10)
    assert {c.metadata.name for c in listed.items} - {ROOT_CA} == {"first", "held", "last"}


def test_callers_keep_their_identity(api, ns) -> None:
    """No Authorization header: the admin's client certificate; a ServiceAccount token: that
    ServiceAccount (and its RBAC), not the admin."""
    admin = client.AuthenticationV1Api(api.api_client())
    review = admin.create_self_subject_review({"apiVersion": "authentication.k8s.io/v1",
                                               "kind": "SelfSubjectReview"})  # fmt: skip
    assert review.status.user_info.username == "kubernetes-admin"

    direct = from_kubeconfig(str(api.plane.kubeconfig))
    client.CoreV1Api(direct).create_namespaced_service_account(ns, {"metadata": {"name": "sa"}})
    direct.close()
    token_config = client.Configuration()
    kubernetes.config.load_kube_config(
        config_file=str(api.plane.service_account_kubeconfig(ns, "sa")),
        client_configuration=token_config,
    )
    token_config.host = api.url  # the same token, through the proxy
    as_sa = from_configuration(token_config)
    review = client.AuthenticationV1Api(as_sa).create_self_subject_review(
        {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    )
    assert review.status.user_info.username == f"system:serviceaccount:{ns}:sa"
    with pytest.raises(client.ApiException) as forbidden:
        client.CoreV1Api(as_sa).list_namespaced_secret(ns, _request_timeout=10)
    assert forbidden.value.status == 403


def test_faults_only_the_local_server_can_apply_are_refused(api) -> None:
    for rule in ({"refuse": True}, {"freeze": "coordination.k8s.io/leases"}):
        with pytest.raises(urllib.error.HTTPError) as refused:
            api.add_fault(**rule)
        assert refused.value.code == 400

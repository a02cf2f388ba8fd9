"""The local API server's request-shape recorder (localcluster/requestshapes.py): the shapes
`make test` checks against the fidelity corpus (tests/fidelity/coverage.py)."""

from __future__ import annotations

import json
import string
from pathlib import Path

import kubernetes
from hypothesis import given
from hypothesis import strategies as st

from localcluster.requestshapes import RequestShape, path_shape, read_shapes, shape_of
from localcluster.testing import ApiServer

NAMES = st.text(string.ascii_lowercase + string.digits + "-.", min_size=1, max_size=20)


def test_path_shape_takes_out_namespaces_and_names() -> None:
    assert path_shape("/api/v1/namespaces/haptic/pods/p-1/status") == (
        "/api/v1/namespaces/{ns}/pods/{name}/status"
    )
    assert path_shape("/api/v1/namespaces/haptic/pods") == "/api/v1/namespaces/{ns}/pods"
    assert path_shape("/api/v1/namespaces/haptic") == "/api/v1/namespaces/{name}"
    assert path_shape("/api/v1/namespaces") == "/api/v1/namespaces"
    assert path_shape("/api/v1/nodes/node-1/status") == "/api/v1/nodes/{name}/status"
    assert path_shape("/apis/coordination.k8s.io/v1/namespaces/h/leases/l") == (
        "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{name}"
    )
    assert path_shape("/apis/haproxy-haptic.org/v1alpha1/haproxycfgs") == (
        "/apis/haproxy-haptic.org/v1alpha1/haproxycfgs"
    )
    # Discovery and OpenAPI paths are shapes of their own.
    assert path_shape("/apis/apps/v1") == "/apis/apps/v1"
    assert path_shape("/apis") == "/apis"
    assert path_shape("/openapi/v3/apis/apps/v1") == "/openapi/v3/apis/apps/v1"
    assert path_shape("/version") == "/version"


@given(ns=NAMES, name=NAMES, other_ns=NAMES, other_name=NAMES)
def test_two_requests_for_different_objects_have_one_shape(
    ns: str, name: str, other_ns: str, other_name: str
) -> None:
    for template in (
        "/api/v1/namespaces/{}/secrets/{}",
        "/apis/haproxy-haptic.org/v1alpha1/namespaces/{}/haproxycfgs/{}/status",
    ):
        assert path_shape(template.format(ns, name)) == path_shape(
            template.format(other_ns, other_name)
        )


def test_a_shape_counts_the_body_type_only_with_a_body_and_query_names_only() -> None:
    get = shape_of(
        "get", "/api/v1/namespaces/a/pods", ["limit", "labelSelector", "limit"], "", False
    )
    assert get == RequestShape(
        "GET", "/api/v1/namespaces/{ns}/pods", "", ("labelSelector", "limit")
    )
    patch = shape_of(
        "PATCH",
        "/api/v1/namespaces/a/pods/p",
        [],
        "application/merge-patch+json; charset=utf-8",
        True,
    )
    assert patch.content_type == "application/merge-patch+json"
    assert RequestShape.from_json(json.loads(json.dumps(patch.to_json()))) == patch


def test_the_server_records_each_shape_once_with_its_sender(tmp_path: Path) -> None:
    """Through the real server over HTTP: two lists of different namespaces are one shape;
    a create and a merge patch are their own; the User-Agent's product is kept, not the
    identity after it."""
    record = tmp_path / "shapes" / "one.jsonl"
    with ApiServer.start(extra_args=["--request-shapes", str(record)]) as api:
        client = api.api_client()
        client.user_agent = "haptic-controller/replica-a"
        core = kubernetes.client.CoreV1Api(client)
        core.list_namespaced_secret("default", label_selector="a=b")
        core.list_namespaced_secret("kube-system", label_selector="c=d")
        core.create_namespaced_config_map(
            "default", {"metadata": {"name": "one"}, "data": {"k": "v"}}
        )
        core.patch_namespaced_config_map("one", "default", {"data": {"k": "w"}})
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    recorded = read_shapes(record.parent)
    assert recorded[
        RequestShape("GET", "/api/v1/namespaces/{ns}/secrets", "", ("labelSelector",))
    ] == {"haptic-controller"}
    assert RequestShape("POST", "/api/v1/namespaces/{ns}/configmaps", "application/json", ()) in (
        recorded
    )
    assert (
        RequestShape(
            "PATCH",
            "/api/v1/namespaces/{ns}/configmaps/{name}",
            "application/strategic-merge-patch+json",
            (),
        )
        in recorded
    )
    # One line per shape and sender, however often it was sent.
    assert len(lines) == len({json.dumps(line, sort_keys=True) for line in lines})
    assert sum(1 for line in lines if line["path"].endswith("/secrets")) == 1

"""The node's kubelet endpoint for container logs (localcluster/node/kubeletapi.py), over real
HTTPS with certificates of a real cluster CA (openssl), called as kube-apiserver calls it:
`GET /containerLogs/NS/POD/CONTAINER` with tailLines, limitBytes, follow and its client
certificate. The log rules themselves (localcluster/podlogs.py) are checked as pure code."""

from __future__ import annotations

import shutil
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from localcluster import podlogs
from localcluster.errors import ApiError
from localcluster.node.kubeletapi import KubeletServer, parse_log_path
from localcluster.real import pki

LINES = b"one\ntwo\nthree\n"


def test_a_query_is_cut_as_the_kubelet_cuts_it_tail_first_then_the_byte_limit() -> None:
    assert podlogs.select(LINES, podlogs.LogQuery.parse({})) == LINES
    assert podlogs.select(LINES, podlogs.LogQuery.parse({"tailLines": "2"})) == b"two\nthree\n"
    query = podlogs.LogQuery.parse({"tailLines": "2", "limitBytes": "5"})
    assert podlogs.select(LINES, query) == b"two\nt"
    assert podlogs.select(LINES, podlogs.LogQuery.parse({"tailLines": "0"})) == b""
    assert podlogs.LogQuery.parse({"follow": "true"}).follow
    assert not podlogs.LogQuery.parse({"previous": "false"}).follow


@pytest.mark.parametrize(
    "query",
    [{"previous": "true"}, {"timestamps": "true"}, {"sinceSeconds": "5"},
     {"tailLines": "x"}, {"limitBytes": "0"}],
)  # fmt: skip
def test_what_the_node_does_not_keep_is_refused_not_answered_wrongly(query: dict) -> None:
    with pytest.raises(ApiError) as refused:
        podlogs.LogQuery.parse(query)
    assert refused.value.code == 400


def test_only_container_log_paths_of_plain_names_are_served() -> None:
    assert parse_log_path("/containerLogs/haptic/pod-1/haproxy") == ("haptic", "pod-1", "haproxy")
    assert parse_log_path("/containerLogs/haptic/../etc") is None
    assert parse_log_path("/containerLogs/haptic/pod-1/..") is None
    assert parse_log_path("/exec/haptic/pod-1/haproxy") is None


needs_openssl = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cluster CA with the API server's kubelet client and the admin as clients, and a
    serving certificate for 127.0.0.1."""
    directory = tmp_path_factory.mktemp("pki")
    pki.ensure_pki(directory, [pki.KUBELET_CLIENT, pki.ADMIN])
    pki.kubelet_serving(directory, "localnode", "127.0.0.1")
    return directory


@pytest.fixture
def node(ca: Path, tmp_path: Path) -> Iterator[KubeletServer]:
    pod_dir = tmp_path / "pods" / "haptic" / "haproxy-1"
    pod_dir.mkdir(parents=True)
    (pod_dir / ".uid").write_text("uid-1")
    (pod_dir / "haproxy.log").write_bytes(LINES)
    cert, key = pki.kubelet_serving(ca, "localnode", "127.0.0.1")
    server = KubeletServer("127.0.0.1", 0, tmp_path, (cert, key, ca / "ca.crt"),
                           pki.KUBELET_CLIENT.user)  # fmt: skip
    server.start()
    try:
        yield server
    finally:
        server.stop()


def client(ca: Path, node: KubeletServer, stem: str | None) -> httpx.Client:
    """As kube-apiserver dials a kubelet: the node's certificate checked against the CA,
    and the client certificate `stem` (none: no client certificate)."""
    context = ssl.create_default_context(cafile=str(ca / "ca.crt"))
    if stem is not None:
        context.load_cert_chain(ca / f"{stem}.crt", ca / f"{stem}.key")
    return httpx.Client(base_url=f"https://127.0.0.1:{node.port}", verify=context, timeout=10)


LOG = "/containerLogs/haptic/haproxy-1/haproxy"


@needs_openssl
def test_the_api_servers_kubelet_client_reads_the_log_with_the_query(ca, node) -> None:
    with client(ca, node, pki.KUBELET_CLIENT.file_stem) as api:
        assert api.get(LOG).content == LINES
        assert api.get(LOG, params={"tailLines": 1}).content == b"three\n"
        assert api.get(LOG, params={"tailLines": 2, "limitBytes": 5}).content == b"two\nt"
        refused = api.get(LOG, params={"previous": "true"})
        assert refused.status_code == 400 and b"previous" in refused.content
        assert api.get("/containerLogs/haptic/other-pod/haproxy").status_code == 404
        assert api.get("/pods").status_code == 404


@needs_openssl
def test_another_user_of_the_ca_is_forbidden_and_no_certificate_no_connection(ca, node) -> None:
    with client(ca, node, pki.ADMIN.file_stem) as admin:
        forbidden = admin.get(LOG)
    assert forbidden.status_code == 403 and b"kubernetes-admin" in forbidden.content
    with client(ca, node, None) as anonymous, pytest.raises((httpx.HTTPError, ssl.SSLError)):
        anonymous.get(LOG).raise_for_status()


@needs_openssl
def test_a_followed_log_streams_appended_lines_until_the_pod_is_replaced(
    ca, node, tmp_path: Path
) -> None:
    pod_dir = tmp_path / "pods" / "haptic" / "haproxy-1"
    received: list[bytes] = []
    done = threading.Event()

    def follow() -> None:
        with client(ca, node, pki.KUBELET_CLIENT.file_stem) as api:
            params = {"follow": "true", "tailLines": 1}
            with api.stream("GET", LOG, params=params) as response:
                for chunk in response.iter_bytes():
                    received.append(chunk)
        done.set()

    reader = threading.Thread(target=follow, daemon=True)
    reader.start()
    _wait(lambda: b"".join(received) == b"three\n")
    with (pod_dir / "haproxy.log").open("ab") as log:
        log.write(b"four\n")
    _wait(lambda: b"".join(received) == b"three\nfour\n")
    assert not done.is_set()
    (pod_dir / ".uid").write_text("uid-2")  # the same name, a new pod: its log is another
    assert done.wait(5), "the followed log did not end with its pod"
    assert b"".join(received) == b"three\nfour\n"


def _wait(predicate, timeout: float = 5.0) -> None:
    deadline = threading.Event()
    timer = threading.Timer(timeout, deadline.set)
    timer.start()
    try:
        while not predicate():
            assert not deadline.wait(0.02), "not reached in time"
    finally:
        timer.cancel()

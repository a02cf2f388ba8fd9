"""The kubelet's API on the real cluster, as much of it as haptic uses: container logs.

kube-apiserver answers `GET /api/v1/namespaces/NS/pods/NAME/log` (`kubectl logs`) by calling
the pod's node: `https://<InternalIP>:<daemonEndpoints.kubeletEndpoint.Port>/containerLogs/
NS/NAME/CONTAINER` with the log options as query parameters and its
`--kubelet-client-certificate` (pkg/registry/core/pod/strategy.go, LogLocation), and
streams the answer back. The node serves it on its own address only (the `.1` of its block,
ipam.LoopbackBlock; never 0.0.0.0, whose port other pods may need), with a serving
certificate of the cluster CA, and answers only a client certificate of that CA naming the
API server's kubelet client (localcluster/real/pki.py, KUBELET_CLIENT). The log is the file
the local API server serves (localcluster/podlogs.py), cut by the same rules.
"""

from __future__ import annotations

import logging
import re
import socketserver
import ssl
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from localcluster import podlogs
from localcluster.errors import ApiError

log = logging.getLogger(__name__)

# Namespace, pod and container names as the API validates them (RFC 1123): nothing of a
# path in them, so they address only the node's own log files.
_NAME = r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?"
_LOG_PATH = re.compile(rf"^/containerLogs/(?P<ns>{_NAME})/(?P<pod>{_NAME})/(?P<container>{_NAME})$")
FOLLOW_POLL = 0.2  # seconds between looks at a followed log
HANDSHAKE_TIMEOUT = 10.0


def common_name(peer: dict[str, Any] | None) -> str | None:
    """The CN of a verified peer certificate (ssl.SSLSocket.getpeercert())."""
    for rdn in (peer or {}).get("subject") or ():
        for key, value in rdn:
            if key == "commonName":
                return value
    return None


def parse_log_path(path: str) -> tuple[str, str, str] | None:
    """(namespace, pod, container) of a `/containerLogs/...` path, else None."""
    match = _LOG_PATH.match(path)
    return (match["ns"], match["pod"], match["container"]) if match else None


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def server_bind(self) -> None:
        # HTTPServer's own looks the address up in DNS (getfqdn), which can hang for
        # seconds on a machine without a resolver; the name is not used.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A refused handshake (no certificate of the cluster CA) or a dropped connection.
        log.debug("kubelet api: request from %s failed", client_address, exc_info=True)


class KubeletServer:
    """HTTPS on (address, port) in a daemon thread; `stop()` ends followed logs too."""

    def __init__(
        self,
        address: str,
        port: int,
        state_dir: Path,
        tls: tuple[Path, Path, Path],
        client_user: str,
    ) -> None:
        """tls: the serving certificate, its key, and the CA client certificates must chain
        to; client_user: the one CN answered (the API server's kubelet client)."""
        cert, key, ca = tls
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        context.load_verify_locations(cafile=str(ca))
        context.verify_mode = ssl.CERT_REQUIRED
        self.stopping = threading.Event()
        handler = type("Handler", (_LogHandler,), {"node": self})
        self.state_dir = state_dir
        self.client_user = client_user
        self.httpd = _Server((address, port), handler)
        # The handshake happens in the request's thread (do_handshake_on_connect=False): a
        # client that stalls it holds only its own thread, never the accept loop.
        self.httpd.socket = context.wrap_socket(
            self.httpd.socket, server_side=True, do_handshake_on_connect=False
        )
        self.port = self.httpd.server_address[1]
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.2},
            name="kubelet-api", daemon=True,
        )  # fmt: skip

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.stopping.set()
        if self._thread.is_alive():
            self.httpd.shutdown()
        self.httpd.server_close()


class _LogHandler(BaseHTTPRequestHandler):
    node: KubeletServer
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        self.request.settimeout(HANDSHAKE_TIMEOUT)
        self.request.do_handshake()  # refuses a client without a certificate of the CA
        self.request.settimeout(None)
        super().setup()

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("kubelet api: " + format, *args)

    def do_GET(self) -> None:
        try:
            self._serve()
        except ApiError as exc:
            self._answer(exc.code, exc.message.encode())
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            self.close_connection = True  # the API server went away (a follow it ended)

    def _serve(self) -> None:
        user = common_name(self.request.getpeercert())
        if user != self.node.client_user:
            raise ApiError(403, f"user {user!r} may not read container logs on this node")
        url = urlsplit(self.path)
        names = parse_log_path(url.path)
        if names is None:
            raise ApiError(404, f"{url.path} is not served by this node")
        query = podlogs.LogQuery.parse(dict(parse_qsl(url.query)))
        path = podlogs.log_path(self.node.state_dir, *names)
        if not path.parent.is_dir():
            raise ApiError(404, f"pod {names[0]}/{names[1]} is not on this node")
        raw = path.read_bytes() if path.exists() else b""
        data = podlogs.select(raw, query)
        if not query.follow:
            self._answer(200, data)
            return
        self._follow(path, raw, data, query)

    def _answer(self, code: int, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _follow(self, path: Path, raw: bytes, first: bytes, query: podlogs.LogQuery) -> None:
        """Chunks as the log grows, until the pod's directory belongs to another pod (or is
        gone), the limit is sent, the node stops or the caller hangs up."""
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        uid_file = path.parent / ".uid"
        uid = uid_file.read_text() if uid_file.exists() else None
        left = query.limit_bytes
        offset = len(raw)  # follow from what was read: nothing appended since is skipped
        chunk = first
        while True:
            if left is not None:
                chunk, left = chunk[:left], left - len(chunk[:left])
            if chunk:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
            if left == 0 or self.node.stopping.wait(FOLLOW_POLL):
                break
            if not uid_file.exists() or uid_file.read_text() != uid:
                break
            try:
                with path.open("rb") as f:
                    f.seek(offset)
                    chunk = f.read()
            except FileNotFoundError:
                chunk = b""  # the container has not started yet
            offset += len(chunk)
        self.wfile.write(b"0\r\n\r\n")
        self.close_connection = True

"""A sample backend for demos and traffic tests.

python -m localcluster.sample_backend [--port 8080]

Serves HTTP on $POD_IP (127.0.0.1 outside a pod) and answers every GET with its pod name,
the request path and Host header. /healthz answers 200 while serving.

On SIGTERM it drains: for --drain-seconds (default 0) it keeps answering, with
`Connection: close` and /healthz at 503, so a load balancer can move away first (draining is
the application's job, ADR-0034); then it stops accepting, finishes requests in flight and
exits 0.
"""

from __future__ import annotations

import argparse
import json
import signal
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from config.env import pod_env


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "haptic-sample-backend"

    def do_GET(self) -> None:
        pod = pod_env("POD_NAME", "unknown")
        status = 200
        if self.path == "/healthz":
            draining = self.server.draining  # type: ignore[attr-defined]
            status = 503 if draining else 200
            body = b"draining\n" if draining else b"ok\n"
            ctype = "text/plain"
        else:
            payload = {
                "pod": pod,
                "namespace": pod_env("POD_NAMESPACE"),
                "ip": pod_env("POD_IP"),
                "path": self.path,
                "host": self.headers.get("Host", ""),
            }
            body = (json.dumps(payload) + "\n").encode()
            ctype = "application/json"
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Pod-Name", pod)
        if self.server.draining:  # type: ignore[attr-defined]
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, fmt: str, *args: object) -> None:
        print(f"{self.address_string()} {fmt % args}", flush=True)


class Server(ThreadingHTTPServer):
    daemon_threads = False  # join request threads on shutdown: finish in-flight requests
    block_on_close = True
    draining = False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m localcluster.sample_backend")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--host", default=pod_env("POD_IP", "127.0.0.1"))
    parser.add_argument(
        "--drain-seconds", type=float, default=0.0, help="keep serving this long after SIGTERM"
    )
    args = parser.parse_args(argv)
    server = Server((args.host, args.port), Handler)
    print(f"sample backend {pod_env('POD_NAME')} on {args.host}:{args.port}", flush=True)

    def finish() -> None:
        time.sleep(args.drain_seconds)
        server.shutdown()  # blocks until serve_forever returns, hence its own thread

    def on_term(signum: int, frame: object) -> None:
        if not server.draining:
            server.draining = True
            print(f"draining for {args.drain_seconds:g}s", flush=True)
            threading.Thread(target=finish, daemon=True).start()

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    server.serve_forever(poll_interval=0.2)
    server.server_close()
    print("sample backend stopped", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Running one probe or lifecycle handler against a pod (network and exec I/O only)."""

from __future__ import annotations

import http.client
import socket
import ssl
from pathlib import Path
from typing import Any

from .processes import run_exec


def resolve_port(port: int | str, container: dict[str, Any]) -> int:
    """A probe port is a number or the name of one of the container's ports."""
    if isinstance(port, int) or str(port).isdigit():
        return int(port)
    for entry in container.get("ports") or []:
        if entry.get("name") == port:
            return int(entry["containerPort"])
    raise ValueError(f"port {port!r} not found in container {container.get('name')!r}")


Spec = dict[str, Any]


def http_get(action: Spec, container: Spec, pod_ip: str, timeout: float) -> bool:
    """Success is a status in [200, 400), as for the kubelet."""
    host = action.get("host") or pod_ip
    port = resolve_port(action.get("port", 80), container)
    path = action.get("path") or "/"
    if not path.startswith("/"):
        path = "/" + path
    headers = {h["name"]: h["value"] for h in action.get("httpHeaders") or []}
    headers.setdefault("User-Agent", "kube-probe/localcluster")
    conn: http.client.HTTPConnection
    if (action.get("scheme") or "HTTP").upper() == "HTTPS":
        # The kubelet does not verify probe certificates either.
        conn = http.client.HTTPSConnection(
            host, port, timeout=timeout, context=ssl._create_unverified_context()
        )
    else:
        conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("GET", path, headers=headers)
        status = conn.getresponse().status
        return 200 <= status < 400
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()


def tcp_socket(action: Spec, container: Spec, pod_ip: str, timeout: float) -> bool:
    host = action.get("host") or pod_ip
    port = resolve_port(action.get("port"), container)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def run_handler(
    handler: dict[str, Any],
    container: dict[str, Any],
    pod_ip: str,
    timeout: float,
    cwd: Path,
    env: dict[str, str],
) -> bool:
    """A probe or lifecycle handler: exec, httpGet or tcpSocket (grpc is not supported)."""
    try:
        if "exec" in handler:
            argv = list((handler["exec"] or {}).get("command") or [])
            return bool(argv) and run_exec(argv, cwd, env, timeout) == 0
        if "httpGet" in handler:
            return http_get(handler["httpGet"], container, pod_ip, timeout)
        if "tcpSocket" in handler:
            return tcp_socket(handler["tcpSocket"], container, pod_ip, timeout)
        if "sleep" in handler:
            return True
    except ValueError:
        return False
    return False

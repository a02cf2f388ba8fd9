"""Free TCP ports for the processes a cluster, a test or `make run` starts: the one
definition (the local node, the real control plane, the development stack and the tests use
it)."""

from __future__ import annotations

import contextlib
import socket


def free_ports(host: str = "127.0.0.1", count: int = 1) -> list[int]:
    """`count` distinct ports nothing listens on right now on host; the caller binds them
    soon after. Every socket stays bound until all are chosen: the kernel may hand the port
    just released to the next bind to port 0, and one process given the same port twice
    (an agent's API and its HAProxy's frontend) fails to start."""
    with contextlib.ExitStack() as held:
        ports = []
        for _ in range(count):
            sock = held.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind((host, 0))
            ports.append(int(sock.getsockname()[1]))
        return ports


def free_port(host: str = "127.0.0.1") -> int:
    """One port nothing listens on right now on host (the caller binds it soon after)."""
    return free_ports(host)[0]

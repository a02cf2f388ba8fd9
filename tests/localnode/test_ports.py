"""Free ports (localcluster/ports.py): one process's ports never collide with each other.

Seen in a fresh-clone rehearsal of `make test` (four workers): an agent's HAProxy took the
port chosen for the agent's own API, and the agent exited with "address already in use".
The three ports had been chosen one bind-and-release after another, and a kernel may hand
the port just released to the next bind to port 0. The fake kernel below does exactly that
(lowest port not bound now), so the test does not depend on the kernel's luck."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from localcluster.ports import free_port, free_ports


class _LowestFreeKernel:
    """bind(port 0) gives the lowest port no open socket holds on that address."""

    def __init__(self) -> None:
        self.bound: set[tuple[str, int]] = set()

    def socket(self, *args: object, **kwargs: object) -> _FakeSocket:
        return _FakeSocket(self)


class _FakeSocket:
    def __init__(self, kernel: _LowestFreeKernel) -> None:
        self.kernel = kernel
        self.addr: tuple[str, int] | None = None

    def bind(self, addr: tuple[str, int]) -> None:
        host, port = addr
        port = port or next(p for p in range(40000, 50000) if (host, p) not in self.kernel.bound)
        self.addr = (host, port)
        self.kernel.bound.add(self.addr)

    def getsockname(self) -> tuple[str, int]:
        assert self.addr is not None
        return self.addr

    def close(self) -> None:
        if self.addr is not None:
            self.kernel.bound.discard(self.addr)
            self.addr = None

    def __enter__(self) -> _FakeSocket:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@pytest.fixture()
def lowest_free_kernel(monkeypatch: pytest.MonkeyPatch) -> _LowestFreeKernel:
    kernel = _LowestFreeKernel()
    monkeypatch.setattr(socket, "socket", kernel.socket)
    return kernel


def test_the_ports_of_one_process_are_distinct(lowest_free_kernel: _LowestFreeKernel) -> None:
    ports = free_ports("127.9.9.9", 3)
    assert len(set(ports)) == 3
    assert lowest_free_kernel.bound == set()  # all released for the caller to bind


def test_an_agents_api_readiness_and_frontend_ports_are_distinct(
    lowest_free_kernel: _LowestFreeKernel, tmp_path: Path
) -> None:
    from tests.agents.helpers import AgentProcess

    agent = AgentProcess(tmp_path / "agent")
    assert len({agent.port, agent.readiness_port, agent.frontend_port}) == 3


def test_a_free_port_can_be_bound() -> None:
    port = free_port("127.0.0.1")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))

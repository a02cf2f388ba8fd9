"""Unix-socket clients for HAProxy: the master CLI and the runtime API. One job: talk.

Both send their commands, half-close the connection and read to EOF, so no read ever waits
on an idle timeout (the master CLI keeps a connection open after `show proc` otherwise).
"""

from __future__ import annotations

import socket
import threading
import time

from agents.haproxy_text import ProcInfo, parse_reload_response, parse_show_proc

PROMPT = "\n> "


class HAProxySocketError(RuntimeError):
    pass


def exchange(path: str, payload: bytes, timeout: float) -> str:
    """Send `payload`, half-close, read to EOF. Sending runs beside reading so a large batch
    cannot deadlock against HAProxy's replies filling the socket buffers."""
    deadline = time.monotonic() + timeout
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    send_error: list[BaseException] = []

    def send() -> None:
        try:
            sock.sendall(payload)
            sock.shutdown(socket.SHUT_WR)
        except OSError as exc:  # reported after the read
            send_error.append(exc)

    try:
        sock.connect(path)
        sender = None
        if len(payload) > 32_768:
            sender = threading.Thread(target=send, daemon=True)
            sender.start()
        else:
            send()
        chunks = []
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise HAProxySocketError(f"timeout talking to {path}")
            sock.settimeout(remaining)
            data = sock.recv(262_144)
            if not data:
                break
            chunks.append(data)
        if sender is not None:
            sender.join(timeout=max(0.0, deadline - time.monotonic()))
        if send_error:
            raise HAProxySocketError(f"sending to {path}: {send_error[0]}")
        return b"".join(chunks).decode(errors="replace")
    except OSError as exc:
        raise HAProxySocketError(f"{path}: {exc}") from exc
    finally:
        sock.close()


class MasterCLI:
    """The master CLI (`-S`): process list and reload."""

    def __init__(self, path: str, timeout: float = 10.0) -> None:
        self.path = path
        self.timeout = timeout

    def command(self, command: str) -> str:
        return exchange(self.path, (command + "\n").encode(), self.timeout)

    def show_proc(self) -> ProcInfo:
        return parse_show_proc(self.command("show proc"))

    def reload(self) -> tuple[bool, str]:
        """(success, startup log). The master answers once the new worker loaded or failed."""
        return parse_reload_response(self.command("reload"))


class RuntimeAPI:
    """The worker's runtime API (`stats socket ... level admin`), batched in prompt mode."""

    def __init__(self, path: str, timeout: float = 10.0) -> None:
        self.path = path
        self.timeout = timeout

    # Commands per connection: a very large pipelined batch was seen reset by HAProxy on a
    # loaded machine; chunks of this size keep one connection per few hundred operations.
    CHUNK = 250

    def batch(self, commands: list[str]) -> list[str]:
        """Run the commands in order, a few hundred per connection; one response each."""
        if not commands:
            return []
        for command in commands:
            if "\n" in command or "\r" in command:
                raise ValueError(f"refused runtime command {command!r}")
        responses: list[str] = []
        for start in range(0, len(commands), self.CHUNK):
            responses += self._batch(commands[start : start + self.CHUNK])
        return responses

    def _batch(self, commands: list[str]) -> list[str]:
        payload = ("prompt\n" + "".join(c + "\n" for c in commands)).encode()
        text = exchange(self.path, payload, self.timeout)
        parts = text.split(PROMPT)
        # The stream is PROMPT R1 PROMPT R2 ... PROMPT: parts[0] is before the first prompt.
        responses = parts[1 : 1 + len(commands)]
        if len(responses) != len(commands):
            raise HAProxySocketError(
                f"runtime API answered {len(responses)} of {len(commands)} commands"
            )
        return responses

    def command(self, command: str) -> str:
        return self.batch([command])[0]

"""Newline-delimited JSON from a streaming HTTP response (a watch body), line by line."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any


def lines(resp: Any) -> Iterator[bytes]:
    """Each non-blank line of a urllib3 response, yielded as soon as it is in.

    Chunked bodies are read chunk by chunk; others with read1, which never waits for a full
    buffer, so an event is seen when it arrives rather than when 64 KiB have.
    """
    buffer = b""
    if resp.chunked and resp.supports_chunked_reads():
        chunks: Iterable[bytes] = resp.read_chunked(decode_content=True)
    else:
        chunks = iter(lambda: resp.read1(65536), b"")
    for chunk in chunks:
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if line.strip():
                yield line
    if buffer.strip():
        yield buffer

"""Compressed file content: gzip (mtime 0, so equal bytes encode equally), then base64."""

from __future__ import annotations

import base64
import gzip


def pack(data: bytes) -> str:
    return base64.b64encode(gzip.compress(data, mtime=0)).decode("ascii")


def unpack(text: str) -> bytes:
    """The bytes `pack` encoded; raises ValueError (binascii.Error) or gzip.BadGzipFile (an
    OSError) on anything else, never returns bytes from text outside the base64 alphabet."""
    return gzip.decompress(base64.b64decode(text.encode("ascii"), validate=True))

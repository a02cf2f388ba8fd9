"""Digests: of one file, and the content checksum of a whole configuration."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

PREFIX = "sha256:"


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_digest(data: bytes) -> str:
    """`sha256:<hex>` of one file's bytes."""
    return PREFIX + sha256_hex(data)


def strip_digest_prefix(value: str) -> str:
    return value.removeprefix(PREFIX)


def content_checksum(files: Iterable[tuple[str, bytes]]) -> str:
    """`sha256:<hex>` over every (path, content) sorted by path: `path NUL content NUL` each.

    The identity of a rendered configuration: the controller records it in the deployment
    intent and the checkpoints, the agent recomputes it from what it received."""
    h = hashlib.sha256()
    for path, content in sorted(files, key=lambda item: item[0]):
        h.update(path.encode())
        h.update(b"\0")
        h.update(content)
        h.update(b"\0")
    return PREFIX + h.hexdigest()

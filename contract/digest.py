"""Digests: of one file, and the content checksum of a whole configuration."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

PREFIX = "sha256:"


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_digest(data: bytes) -> str:
    """`sha256:<hex>` of one file's bytes."""
    return PREFIX + sha256_hex(data)


def strip_digest_prefix(value: str) -> str:
    return value.removeprefix(PREFIX)


def content_checksum(files: Mapping[str, bytes]) -> str:
    """`sha256:<hex>` over every file (path -> content) sorted by path: `path NUL content NUL`.

    The identity of a rendered configuration: the controller records it in the deployment
    intent and the checkpoints, the agent recomputes it from what it received."""
    h = hashlib.sha256()
    for path in sorted(files):
        h.update(path.encode())
        h.update(b"\0")
        h.update(files[path])
        h.update(b"\0")
    return PREFIX + h.hexdigest()

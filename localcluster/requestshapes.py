"""The distinct shapes of the requests an API server answered, recorded so the fidelity
corpus can be checked against what the code really sends (tests/fidelity/README.md,
"Recorded requests").

A shape is what makes two requests the same kind of call for a server: the method, the path
with the namespace and object name taken out, the media type of the body and the names of
the query parameters. Pure except `ShapeRecorder` and `read_shapes`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from localcluster.audit import AuditLog

NAMESPACE = "{ns}"
NAME = "{name}"


@dataclass(frozen=True, order=True)
class RequestShape:
    method: str
    path: str
    content_type: str
    query: tuple[str, ...]

    def to_json(self) -> dict[str, object]:
        return {
            "method": self.method,
            "path": self.path,
            "contentType": self.content_type,
            "query": list(self.query),
        }

    @property
    def watch(self) -> bool:
        return "watch" in self.query

    @classmethod
    def from_json(cls, doc: dict[str, object]) -> RequestShape:
        return cls(
            str(doc["method"]),
            str(doc["path"]),
            str(doc.get("contentType") or ""),
            tuple(str(q) for q in doc.get("query") or ()),  # type: ignore[union-attr]
        )

    def __str__(self) -> str:
        ctype = f" [{self.content_type}]" if self.content_type else ""
        query = f"?{'&'.join(self.query)}" if self.query else ""
        return f"{self.method} {self.path}{query}{ctype}"


def _resource_path(rest: list[str]) -> list[str]:
    """[resource, name?, subresource...] with the name taken out."""
    return rest[:1] + ([NAME] if len(rest) > 1 else []) + rest[2:]


def path_shape(path: str) -> str:
    """A resource path with its namespace and object name replaced (`{ns}`, `{name}`);
    discovery, OpenAPI and health paths are their own shapes."""
    parts = [p for p in path.split("/") if p]
    if parts[:1] == ["api"] and len(parts) >= 2:
        prefix, rest = parts[:2], parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        prefix, rest = parts[:3], parts[3:]
    else:
        return "/" + "/".join(parts)
    if rest[:1] == ["namespaces"] and len(rest) >= 3:
        rest = ["namespaces", NAMESPACE, *_resource_path(rest[2:])]
    elif rest:
        rest = _resource_path(rest)
    return "/" + "/".join(prefix + rest)


def media_type(content_type: str) -> str:
    """The media type of a body; none given reads as JSON, on both servers (the kubernetes
    client sends its creates and replaces without a Content-Type)."""
    return content_type.split(";", 1)[0].strip().lower() or "application/json"


def shape_of(
    method: str, path: str, query: Iterable[str], content_type: str, has_body: bool
) -> RequestShape:
    """The shape of one request; the content type counts only when a body was sent."""
    return RequestShape(
        method.upper(),
        path_shape(path),
        media_type(content_type) if has_body else "",
        tuple(sorted(set(query))),
    )


class ShapeRecorder:
    """Appends each shape the first time this server sees it, with the User-Agent that sent
    it (one JSON line each, through the audit log's writer), so a whole test session's
    servers leave one small file each. Called on the server's event loop only."""

    def __init__(self, path: Path) -> None:
        self._lines = AuditLog(path)
        self._seen: set[tuple[RequestShape, str]] = set()

    def record(self, shape: RequestShape, user_agent: str) -> None:
        agent = user_agent.split("/", 1)[0]  # the product, not the replica identity
        if (shape, agent) not in self._seen:
            self._seen.add((shape, agent))
            self._lines.record({**shape.to_json(), "userAgent": agent})

    def close(self) -> None:
        self._lines.close()


def read_shapes(folder: Path) -> dict[RequestShape, set[str]]:
    """Every shape recorded under folder (all servers' files), with the User-Agent products
    that sent it."""
    out: dict[RequestShape, set[str]] = {}
    for path in sorted(folder.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                doc = json.loads(line)
                out.setdefault(RequestShape.from_json(doc), set()).add(doc.get("userAgent", ""))
    return out

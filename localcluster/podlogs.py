"""Pod logs as the node writes them: `<state-dir>/pods/<namespace>/<name>/<container>.log`.

Served by the local API server (`GET .../pods/NAME/log`) and, on the real cluster, by the
node's kubelet endpoint (`GET /containerLogs/NS/POD/CONTAINER`, which kube-apiserver calls);
both read the query with `LogQuery.parse` and cut the log with `select`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localcluster.errors import ApiError


def log_path(state_dir: Path, namespace: str, name: str, container: str) -> Path:
    return state_dir / "pods" / namespace / name / f"{container}.log"


def choose_container(pod: dict[str, Any], requested: str | None) -> str:
    """The container whose log is asked for; 400 like the real server when ambiguous."""
    name = pod["metadata"]["name"]
    containers = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or []]
    if not requested:
        if len(containers) != 1:
            raise ApiError(
                400,
                f"a container name must be specified for pod {name}, "
                f"choose one of: [{' '.join(containers)}]",
            )
        return containers[0]
    if requested not in containers:
        raise ApiError(400, f"container {requested} is not valid for pod {name}")
    return requested


def _count(query: Mapping[str, str], key: str) -> int | None:
    value = query.get(key)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise ApiError(400, f"{key} must be an integer: {value!r}") from None


def truthy(value: str | None) -> bool:
    """A boolean query parameter as the API server reads it (the local server's too)."""
    return value is not None and value.lower() in ("true", "1")


# Parameters the log needs per-line times or per-run files for: the node appends every
# run of a container to one file without times, so it refuses them rather than answer
# with the wrong lines.
UNKEPT = {
    "previous": "the node keeps one log per container, every run appended",
    "timestamps": "the node does not record when a line was written",
    "sinceSeconds": "the node does not record when a line was written",
    "sinceTime": "the node does not record when a line was written",
}


@dataclass(frozen=True)
class LogQuery:
    """What a log request asks for: the last `tail_lines` lines, at most `limit_bytes`
    bytes (both as the kubelet applies them: tail first), and whether to follow."""

    tail_lines: int | None = None
    limit_bytes: int | None = None
    follow: bool = False

    @classmethod
    def parse(cls, query: Mapping[str, str]) -> LogQuery:
        for key, why in UNKEPT.items():
            if key in query and (key.startswith("since") or truthy(query[key])):
                raise ApiError(400, f"{key} is not supported: {why}")
        limit = _count(query, "limitBytes")
        if limit is not None and limit <= 0:
            raise ApiError(400, f"limitBytes must be a positive integer: {limit}")
        return cls(_count(query, "tailLines"), limit, truthy(query.get("follow")))


def select(data: bytes, query: LogQuery) -> bytes:
    """The part of `data` the query asks for (the first answer of a followed log)."""
    if query.tail_lines is not None:
        n = query.tail_lines
        data = b"".join(data.splitlines(keepends=True)[-n:]) if n > 0 else b""
    return data if query.limit_bytes is None else data[: query.limit_bytes]

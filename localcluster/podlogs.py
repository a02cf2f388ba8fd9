"""Pod logs as the node writes them: `<state-dir>/pods/<namespace>/<name>/<container>.log`."""

from __future__ import annotations

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


def tail(data: bytes, lines: str | None) -> bytes:
    """The last `lines` lines (all when None)."""
    if lines is None:
        return data
    try:
        n = int(lines)
    except ValueError:
        raise ApiError(400, f"tailLines must be an integer: {lines!r}") from None
    return b"".join(data.splitlines(keepends=True)[-n:]) if n > 0 else b""

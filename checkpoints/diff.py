"""Diffs between two checkpoints: unified text per file and side-by-side rows for pages."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class FileVersion:
    path: str
    kind: str
    checksum: str
    content: str | None


def file_diffs(
    a: list[FileVersion], b: list[FileVersion], label_a: str = "a", label_b: str = "b"
) -> list[dict[str, Any]]:
    """One entry per path in either checkpoint: its status and a unified diff.

    status: "unchanged", "changed", "added" (only in b) or "removed" (only in a). Files
    whose bytes are not stored (certificates, or children not yet mirrored) compare by
    checksum and carry no diff text.
    """
    by_path_a = {f.path: f for f in a}
    by_path_b = {f.path: f for f in b}
    out = []
    # The main config first, then the auxiliary files by path.
    paths = sorted(
        set(by_path_a) | set(by_path_b),
        key=lambda p: (0 if (by_path_a.get(p) or by_path_b.get(p)).kind == "config" else 1, p),
    )
    for path in paths:
        fa, fb = by_path_a.get(path), by_path_b.get(path)
        kind = (fa or fb).kind
        if fa is None:
            status = "added"
        elif fb is None:
            status = "removed"
        elif fa.checksum == fb.checksum and fa.content == fb.content:
            status = "unchanged"
        else:
            status = "changed"
        text = ""
        comparable = (fa is None or fa.content is not None) and (
            fb is None or fb.content is not None
        )
        if status != "unchanged" and comparable:
            text = "".join(
                difflib.unified_diff(
                    (fa.content if fa else "").splitlines(keepends=True),
                    (fb.content if fb else "").splitlines(keepends=True),
                    fromfile=f"{label_a}/{path}" if fa else "/dev/null",
                    tofile=f"{label_b}/{path}" if fb else "/dev/null",
                )
            )
        out.append(
            {
                "path": path,
                "kind": kind,
                "status": status,
                "checksum_a": fa.checksum if fa else None,
                "checksum_b": fb.checksum if fb else None,
                "content_available": comparable,
                "diff": text,
            }
        )
    return out


def side_by_side(a: str, b: str, context: int | None = None) -> list[dict[str, Any]]:
    """Rows of a side-by-side view: {tag, left_no, left, right_no, right}.

    tag is "equal", "replace", "delete" or "insert". With `context`, runs of equal lines
    longer than twice the context collapse into one {"tag": "skip", "count": n} row.
    """
    left, right = a.splitlines(), b.splitlines()
    rows: list[dict[str, Any]] = []
    matcher = difflib.SequenceMatcher(a=left, b=right, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            block = [
                {
                    "tag": "equal",
                    "left_no": i + 1,
                    "left": left[i],
                    "right_no": j + 1,
                    "right": right[j],
                }
                for i, j in zip(range(i1, i2), range(j1, j2), strict=True)
            ]
            if context is not None and len(block) > 2 * context:
                head = block[:context] if rows else []
                tail = block[-context:] if i2 < len(left) or j2 < len(right) else []
                skipped = len(block) - len(head) - len(tail)
                block = [*head, {"tag": "skip", "count": skipped}, *tail]
            rows.extend(block)
            continue
        for k in range(max(i2 - i1, j2 - j1)):
            i, j = i1 + k, j1 + k
            rows.append(
                {
                    "tag": tag,
                    "left_no": i + 1 if i < i2 else None,
                    "left": left[i] if i < i2 else "",
                    "right_no": j + 1 if j < j2 else None,
                    "right": right[j] if j < j2 else "",
                }
            )
    return rows

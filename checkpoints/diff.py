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
    with both contents stored compare by content (every byte, whitespace and line endings
    included); files whose bytes are not stored (certificates, or children not yet
    mirrored) compare by checksum and carry no diff text.
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
        elif fa.content is not None and fb.content is not None:
            # The config's stored checksum is the whole checkpoint's (it changes with any
            # auxiliary file), so when both contents are stored they alone decide.
            status = "unchanged" if fa.content == fb.content else "changed"
        else:
            status = "unchanged" if fa.checksum == fb.checksum else "changed"
        text = ""
        comparable = (fa is None or fa.content is not None) and (
            fb is None or fb.content is not None
        )
        if status != "unchanged" and comparable:
            text = "".join(
                # As diff(1) prints it, so the last line of each side stays its own line.
                line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
                for line in difflib.unified_diff(
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


# How whitespace that would otherwise be invisible is drawn in a changed line.
VISIBLE_WHITESPACE = {" ": "\u00b7", "\t": "\u2192", "\r": "\u240d"}
NO_FINAL_NEWLINE = "no newline at end of file"


def split_visible(line: str) -> tuple[str, str, str]:
    """A line with its ending as (text, trailing whitespace drawn visibly, end note).

    Two lines that differ only in trailing blanks, a carriage return or the final newline
    look the same when printed; a changed line shows those parts. The end note is
    NO_FINAL_NEWLINE for a last line without "\n", else "".
    """
    body = line[:-1] if line.endswith("\n") else line
    note = "" if line.endswith("\n") else NO_FINAL_NEWLINE
    text = body.rstrip(" \t\r")
    drawn = "".join(VISIBLE_WHITESPACE.get(c, c) for c in body[len(text) :])
    return text, drawn, note


def _row(tag: str, left: str | None, left_no: int, right: str | None, right_no: int) -> dict:
    row: dict[str, Any] = {"tag": tag}
    for name, line, number in (("left", left, left_no), ("right", right, right_no)):
        if line is None:
            row |= {f"{name}_no": None, name: "", f"{name}_ws": "", f"{name}_eol": ""}
            continue
        if tag == "equal":
            text, drawn, note = line.rstrip("\r\n"), "", ""
        else:
            text, drawn, note = split_visible(line)
        row |= {f"{name}_no": number, name: text, f"{name}_ws": drawn, f"{name}_eol": note}
    return row


def side_by_side(a: str, b: str, context: int | None = None) -> list[dict[str, Any]]:
    """Rows of a side-by-side view: {tag, left_no, left, left_ws, left_eol, right_no, ...}.

    tag is "equal", "replace", "delete" or "insert". Lines compare with their endings, so a
    file that changed only in whitespace, line endings or its final newline still shows
    changed rows (see split_visible). With `context`, runs of equal lines longer than twice
    the context collapse into one {"tag": "skip", "count": n} row.
    """
    left, right = a.splitlines(keepends=True), b.splitlines(keepends=True)
    rows: list[dict[str, Any]] = []
    matcher = difflib.SequenceMatcher(a=left, b=right, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            block = [
                _row("equal", left[i], i + 1, right[j], j + 1)
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
                _row(
                    tag,
                    left[i] if i < i2 else None,
                    i + 1,
                    right[j] if j < j2 else None,
                    j + 1,
                )
            )
    return rows

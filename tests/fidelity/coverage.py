"""Which of the request shapes recorded during a test session the corpus replays
(tests/fidelity/README.md, "Recorded requests").

`make test` runs the local tier with HAPTIC_REQUEST_SHAPES set, so every local API server
records the distinct shapes it answered (localcluster/requestshapes.py), then runs
`python -m tests.fidelity.coverage var/request-shapes`: it fails, listing them, when the code
sent a shape no corpus entry replays against both servers. Pure except `main`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from contract import MIRROR_USER_AGENT
from controller.election.identity import USER_AGENT_PRODUCT
from localcluster.node.kube import NODE_USER_AGENT
from localcluster.requestshapes import RequestShape, read_shapes, shape_of

from .replay import load_corpus, substitute

# The senders whose requests must be replayed: the controller replicas, the database mirror
# and the local node (which talks to the real API server on the real tier too). The tests'
# own requests (the kubernetes client's default User-Agent), kubectl's (the workflow in
# corpus/kubectl.yaml, replayed by command) and the model test's are listed, not required.
PRODUCT_AGENTS = frozenset({USER_AGENT_PRODUCT, MIRROR_USER_AGENT, NODE_USER_AGENT})


def entry_shape(step: dict[str, Any]) -> RequestShape:
    """The shape of the request a corpus entry sends (replay.py's Replayer.run)."""
    body = step.get("body")
    return shape_of(
        step.get("method", "GET"),
        str(substitute(step["path"], {}, "fidelity")),
        (step.get("query") or {}).keys(),
        step.get("content_type", "application/json"),
        body is not None,
    )


def corpus_shapes(steps: Iterable[dict[str, Any]]) -> dict[RequestShape, list[str]]:
    """Each shape the corpus replays, with the ids of the entries that send it."""
    out: dict[RequestShape, list[str]] = {}
    for step in steps:
        out.setdefault(entry_shape(step), []).append(step["id"])
    return out


def _call(shape: RequestShape) -> tuple[str, str, str, bool]:
    return shape.method, shape.path, shape.content_type, shape.watch


def covering(shape: RequestShape, covered: dict[RequestShape, list[str]]) -> list[str] | None:
    """The entries that replay this call (same method, path, body type, list or watch) and,
    between them, each of its query parameters, or None. A server reads each parameter on
    its own, so the corpus need not repeat every combination the code sends."""
    same = [s for s in covered if _call(s) == _call(shape)]
    if not same or not set(shape.query) <= {q for s in same for q in s.query}:
        return None
    return sorted({e for s in same for e in covered[s]})


def uncovered(
    recorded: dict[RequestShape, set[str]], covered: dict[RequestShape, list[str]]
) -> list[tuple[RequestShape, list[str]]]:
    """Shapes a product sender sent (with those senders) that no entry replays."""
    out = []
    for shape, agents in sorted(recorded.items()):
        senders = sorted(agents & PRODUCT_AGENTS)
        if senders and covering(shape, covered) is None:
            out.append((shape, senders))
    return out


def coverage_report(
    recorded: dict[RequestShape, set[str]], covered: dict[RequestShape, list[str]]
) -> str:
    """Markdown: every recorded shape, the entries that replay it, and the missing ones."""
    missing = uncovered(recorded, covered)
    lines = [
        "## Recorded requests",
        "",
        f"{len(recorded)} distinct request shapes recorded by the local API servers of the "
        f"local tier; {len(missing)} sent by haptic ({', '.join(sorted(PRODUCT_AGENTS))}) "
        "and not replayed by any corpus entry.",
        "",
        "| request | sent by | corpus entries |",
        "| --- | --- | --- |",
    ]
    for shape, agents in sorted(recorded.items()):
        entries = covering(shape, covered)
        if entries is not None:
            verdict = ", ".join(entries)
        else:
            verdict = "**none**" if agents & PRODUCT_AGENTS else "none (not a product's request)"
        lines.append(f"| `{shape}` | {', '.join(sorted(agents)) or '-'} | {verdict} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.fidelity.coverage",
        description="Check the request shapes recorded under FOLDER against the corpus.",
    )
    parser.add_argument("folder", type=Path, help="HAPTIC_REQUEST_SHAPES of the test run")
    parser.add_argument("--out", type=Path, default=None, help="also write the markdown table")
    args = parser.parse_args(argv)
    recorded = read_shapes(args.folder) if args.folder.is_dir() else {}
    if not recorded:
        # A run that started no local API server (a selection of unit tests) has nothing
        # to check; the recorder itself is tested in tests/localcluster/test_request_shapes.py.
        print(f"fidelity coverage: no request shapes recorded under {args.folder}")
        return 0
    covered = corpus_shapes(load_corpus())
    if args.out:
        args.out.write_text(coverage_report(recorded, covered))
    missing = uncovered(recorded, covered)
    print(
        f"fidelity coverage: {len(recorded)} request shapes recorded, "
        f"{len(missing)} sent by haptic and not in tests/fidelity/corpus/requests.yaml"
    )
    for shape, agents in missing:
        print(f"  {shape}  (sent by {', '.join(agents)})")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())

"""`python -m tests.fidelity [--out bench/results/fidelity.md] [--json answers.json]
[--shapes var/request-shapes]`: the report ends with the recorded request shapes of the last
`make test` (tests/fidelity/README.md, "Recorded requests") when that folder exists."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from localcluster.requestshapes import read_shapes

from .compare import report, run_both
from .coverage import corpus_shapes, coverage_report
from .replay import load_corpus


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("bench/results/fidelity.md"))
    parser.add_argument("--json", type=Path, default=None, help="also write both answers")
    parser.add_argument(
        "--shapes",
        type=Path,
        default=Path("var/request-shapes"),
        help="request shapes recorded by make test's local tier (HAPTIC_REQUEST_SHAPES)",
    )
    args = parser.parse_args()
    corpus = load_corpus()
    kubectl_steps = load_corpus("kubectl.yaml")
    results = run_both(corpus, kubectl_steps)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, sort_keys=True))
    text = report(results, corpus, kubectl_steps)
    recorded = read_shapes(args.shapes) if args.shapes.is_dir() else {}
    if recorded:
        text += "\n" + coverage_report(recorded, corpus_shapes(corpus))
    args.out.write_text(text)
    print(text.splitlines()[6])


if __name__ == "__main__":
    main()

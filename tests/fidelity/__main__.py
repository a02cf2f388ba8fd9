"""`python -m tests.fidelity [--out bench/results/fidelity.md] [--json answers.json]`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .compare import report, run_both
from .replay import load_corpus


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("bench/results/fidelity.md"))
    parser.add_argument("--json", type=Path, default=None, help="also write both answers")
    args = parser.parse_args()
    corpus = load_corpus()
    kubectl_steps = load_corpus("kubectl.yaml")
    results = run_both(corpus, kubectl_steps)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, sort_keys=True))
    text = report(results, corpus, kubectl_steps)
    args.out.write_text(text)
    print(text.splitlines()[6])


if __name__ == "__main__":
    main()

"""`python -m controller.render validate CONFIG [--fixtures DIR] [--dump-rendered DIR]
[--output text|json]`: run a template config's validation tests offline (in a user's CI).

CONFIG is a YAML file with the HAProxyTemplateConfig. Its `spec.validationTests` run (see
controller/render/validate.py); with `--fixtures`, every YAML file of DIR is one more test,
"fixtures", whose only assertions are that it renders without warnings and that haproxy -c
accepts it. `--dump-rendered DIR` writes each test's rendered tree under DIR/<test>/ and its
render model (what jsonpath assertions read) as DIR/<test>.render-model.json. Exit
status 0 when every test passes, 1 when one fails, 2 for unusable arguments.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml

from controller.render.validate import TestResult, run_test, run_tests
from controller.rendergate import check_output, write_tree


def _documents(path: Path) -> list[Any]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def _check(output: Any) -> tuple[bool, str]:
    verdict = check_output(output)
    return verdict.accepted, verdict.output


def validate(args: argparse.Namespace) -> int:
    configs = [d for d in _documents(Path(args.config)) if d.get("kind") == "HAProxyTemplateConfig"]
    if len(configs) != 1:
        print(f"{args.config}: expected one HAProxyTemplateConfig", file=sys.stderr)
        return 2
    config = configs[0]
    results = run_tests(config, _check)
    if args.fixtures:
        objects = [o for p in sorted(Path(args.fixtures).glob("*.y*ml")) for o in _documents(p)]
        test = {"fixtures": objects, "assertions": [{"type": "warnings"}, {"type": "haproxyValid"}]}
        results.append(run_test("fixtures", config, test, _check))
    if args.dump_rendered:
        for result in results:
            if result.output is not None:
                write_tree(result.output, Path(args.dump_rendered) / result.name)
            if result.model is not None:
                # Beside the tree, not in it: the paths a jsonpath assertion can read.
                model = Path(args.dump_rendered) / f"{result.name}.render-model.json"
                model.write_text(json.dumps(result.model(), indent=2) + "\n")
    _report(results, args.output)
    return 0 if results and all(r.passed for r in results) else 1


def _report(results: list[TestResult], style: str) -> None:
    if style == "json":
        print(json.dumps({"tests": [r.as_dict() for r in results]}, indent=2))
        return
    if not results:
        print("no validation tests (spec.validationTests is empty and no --fixtures)")
    for r in results:
        print(f"{'PASS' if r.passed else 'FAIL'} {r.name}")
        for failure in r.failures:
            print(f"    {failure}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m controller.render", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    v = sub.add_parser("validate", help="run the validation tests of a template config")
    v.add_argument("config", help="YAML file with the HAProxyTemplateConfig")
    v.add_argument("--fixtures", help="directory of YAML Kubernetes objects to render")
    v.add_argument("--dump-rendered", help="write each test's rendered tree under this directory")
    v.add_argument("--output", choices=("text", "json"), default="text")
    args = parser.parse_args(argv)
    return validate(args)


if __name__ == "__main__":
    sys.exit(main())

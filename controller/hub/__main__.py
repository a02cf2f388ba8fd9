"""`python -m controller.hub resolve --kubeconfig A --kubeconfig B`: which hub is Active?"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict

from controller.hub.config import DEFAULT_NAMESPACE, DEFAULT_TEMPLATE
from controller.hub.resolver import resolve_kubeconfigs


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m controller.hub")
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("resolve", help="find the Active hub from both endpoints")
    r.add_argument("--kubeconfig", action="append", required=True,
                   help="a hub's kubeconfig; give it once per hub")  # fmt: skip
    r.add_argument(
        "--identity",
        action="append",
        default=[],
        help="the hub identity of the endpoint at the same position (optional)",
    )
    r.add_argument("--namespace", default=DEFAULT_NAMESPACE)
    r.add_argument("--template", default=DEFAULT_TEMPLATE)
    r.add_argument("--timeout", type=float, default=5.0, help="bound of each read (seconds)")
    r.add_argument("--json", action="store_true", help="print the whole resolution as JSON")
    args = parser.parse_args(argv)
    if args.identity and len(args.identity) != len(args.kubeconfig):
        parser.error("give --identity once per --kubeconfig, or not at all")
    result = resolve_kubeconfigs(
        args.kubeconfig,
        args.identity or None,
        namespace=args.namespace,
        template_name=args.template,
        timeout=args.timeout,
    )
    if args.json:
        print(json.dumps(asdict(result), indent=2, default=str))
    elif result.active_url:
        print(f"{result.active_url} {result.active_identity or ''}".rstrip())
    else:
        print(f"no Active found: {result.reason}", file=sys.stderr)
    return 0 if result.active_url else 1


if __name__ == "__main__":
    sys.exit(main())

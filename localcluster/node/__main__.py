"""python -m localcluster.node --kubeconfig PATH --state-dir DIR: run the node alone."""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from pathlib import Path

from .agent import DEFAULT_NODE_NAME, NodeAgent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m localcluster.node", description=__doc__)
    parser.add_argument("--kubeconfig", type=Path, help="kubeconfig of the API server")
    parser.add_argument("--api-url", help="API server URL (overrides the kubeconfig's)")
    parser.add_argument("--state-dir", type=Path, required=True)
    parser.add_argument("--node-name", default=DEFAULT_NODE_NAME)
    parser.add_argument("--stop-timeout", type=float, default=30.0)
    args = parser.parse_args(argv)
    if args.kubeconfig is None and not args.api_url:
        parser.error("give --kubeconfig or --api-url")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s node %(levelname)s %(message)s")
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    agent = NodeAgent(
        api_url=args.api_url,
        state_dir=args.state_dir,
        kubeconfig=args.kubeconfig,
        node_name=args.node_name,
    )
    agent.start()
    print(f"node {args.node_name} running; state in {agent.state_dir}", flush=True)
    while not done.wait(1.0):
        pass
    agent.stop(timeout=args.stop_timeout)
    print(f"node stopped; {len(agent.swept)} stray processes swept", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

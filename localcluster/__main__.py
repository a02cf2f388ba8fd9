"""`python -m localcluster serve|up --port PORT [--state-dir DIR] [--real]`."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
import tempfile
import threading
from pathlib import Path

from localcluster.server import DEFAULT_CRD_DIR, ApiServer


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m localcluster")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, help_text in (
        ("serve", "run the Kubernetes-compatible API server"),
        ("up", "run the API server and the local node"),
    ):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("--port", type=int, default=0, help="API port (0 picks a free one)")
        p.add_argument("--admin-port", type=int, default=0, help="admin (faults) port")
        p.add_argument("--host", default="127.0.0.1")
        p.add_argument(
            "--state-dir",
            type=Path,
            default=None,
            help="persist objects here and write kubeconfig + apiserver.json",
        )
        p.add_argument("--crd-dir", type=Path, default=DEFAULT_CRD_DIR)
        p.add_argument(
            "--watch-history",
            type=int,
            default=10000,
            help="events kept for watch resume (older ones answer 410)",
        )
        p.add_argument(
            "--event-ttl",
            type=float,
            default=3600.0,
            help="seconds after which core/v1 Events are deleted (like --event-ttl)",
        )
        p.add_argument(
            "--audit-log",
            type=Path,
            default=None,
            help="append one JSON line per mutating request here (localcluster/audit.py)",
        )
        p.add_argument(
            "--request-shapes",
            type=Path,
            default=None,
            help="append each distinct request shape here, once (localcluster/requestshapes.py)",
        )
        p.add_argument(
            "--bookmark-interval",
            type=float,
            default=5.0,
            help="seconds between BOOKMARK events on watches that allow them",
        )
        if name == "up":
            p.add_argument(
                "--real",
                action="store_true",
                help="etcd, kube-apiserver, kube-controller-manager and kube-scheduler "
                "(built by `make kube`) instead of the local API server",
            )
    return parser


def _run_real(args: argparse.Namespace) -> int:
    """The real control plane and the local node as its kubelet, until SIGTERM/SIGINT."""
    from localcluster.node import NodeAgent
    from localcluster.real.cluster import ControlPlane

    state_dir = args.state_dir or Path(tempfile.mkdtemp(prefix="localcluster-real-"))
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    plane = ControlPlane(state_dir, port=args.port, crd_dir=args.crd_dir)
    try:
        plane.start()
    except Exception as exc:
        print(f"the real control plane did not start: {exc}", file=sys.stderr, flush=True)
        return 1
    print(f"apiserver listening on {plane.url}", flush=True)
    print(f"kubeconfig written to {plane.kubeconfig}", flush=True)
    node = NodeAgent(
        state_dir=state_dir,
        kubeconfig=plane.kubeconfig_for("node"),
        real_cluster=True,
        pki_dir=plane.pki,
    )
    try:
        node.start()
    except Exception:
        logging.getLogger("localcluster").exception("the local node did not start")
        plane.stop()
        return 1
    print("node started", flush=True)
    print("ready", flush=True)
    while not stop.wait(1.0):
        pass
    node.stop()
    plane.stop()
    return 0


async def _run(args: argparse.Namespace) -> int:
    server = ApiServer(
        state_dir=args.state_dir,
        crd_dir=args.crd_dir,
        history_limit=args.watch_history,
        bookmark_interval=args.bookmark_interval,
        event_ttl=args.event_ttl,
        audit_log=args.audit_log,
        request_shapes=args.request_shapes,
    )
    await server.start(args.port, args.admin_port, args.host)
    print(f"apiserver listening on {server.url}", flush=True)
    print(f"admin listening on {server.admin_url}", flush=True)
    if args.state_dir:
        print(f"kubeconfig written to {args.state_dir / 'kubeconfig'}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    node = None
    if args.command == "up":
        try:
            node = await _start_node(server, args)
        except Exception:
            # Fail loudly: `up` without its node would look healthy and run no pods.
            logging.getLogger("localcluster").exception("the local node did not start")
            await server.stop()
            return 1
    print("ready", flush=True)
    await stop.wait()
    if node is not None:
        await asyncio.to_thread(node.stop)
    await server.stop()
    return 0


async def _start_node(server: ApiServer, args: argparse.Namespace) -> object | None:
    try:
        from localcluster.node import NodeAgent  # type: ignore[attr-defined]
    except ImportError as exc:
        print(f"local node not available ({exc}); serving the API only", flush=True)
        return None
    state_dir = args.state_dir
    if state_dir is None:
        state_dir = Path(tempfile.mkdtemp(prefix="localcluster-"))
        server.state_dir = state_dir
        server._write_state_files()
    node = NodeAgent(api_url=server.url, state_dir=state_dir, kubeconfig=state_dir / "kubeconfig")
    await asyncio.to_thread(node.start)
    print("node started", flush=True)
    return node


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    if getattr(args, "real", False):
        return _run_real(args)
    return asyncio.run(_run(args))


if __name__ == "__main__":
    sys.exit(main())

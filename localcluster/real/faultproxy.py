"""A fault-injecting reverse proxy in front of the real kube-apiserver, so the tests that
inject API faults run on the real tier too (localcluster/README.md, "The real cluster").

`python -m localcluster.real.faultproxy --upstream URL --pki DIR` listens on 127.0.0.1 with
the API server's own serving certificate (signed by the cluster CA, valid for 127.0.0.1), so
a kubeconfig differs from the admin one only in its server. Every request is forwarded over
HTTP/1.1 and its response streamed back as it arrives (watches work). The fault rules and
the admin listener are the local server's (localcluster/faultgate.py), with the same
matching (localcluster/faults.py); `refuse` and `freeze` act inside the local server and are
refused here.

Credentials: a request with an Authorization header (a ServiceAccount token) is forwarded
with it and no client certificate; one without is forwarded with the admin's client
certificate (the proxy asks callers for none, so a kubeconfig's certificate cannot reach
the API server through it). If the API server cannot be reached, the caller's connection is
dropped, as it would be without the proxy.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import ssl
from collections.abc import Mapping
from pathlib import Path

import aiohttp
from aiohttp import web

from localcluster.faultgate import FaultGate
from localcluster.faults import FaultRule

# Per connection, not per message (RFC 9110 7.6.1); Host and Content-Length are set anew.
_HOP_BY_HOP = frozenset(
    h.lower()
    for h in (
        "Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "TE",
        "Trailer", "Transfer-Encoding", "Upgrade", "Host", "Content-Length",
    )
)  # fmt: skip
# Far above the API server's own request limit (3 MiB), so that limit is the one that answers.
_MAX_REQUEST_BYTES = 64 * 1024 * 1024


def forwarded(headers: Mapping[str, str]) -> list[tuple[str, str]]:
    """The end-to-end headers of a message (hop-by-hop ones dropped; every value of a
    repeated header kept)."""
    return [(k, v) for k, v in headers.items() if k.lower() not in _HOP_BY_HOP]


def refused(rule: FaultRule) -> str:
    """Why the proxy cannot apply a rule ("" when it can)."""
    if rule.refuse or rule.freeze:
        return "refuse and freeze are faults of the local API server only (not the proxy)"
    return ""


class FaultProxy:
    def __init__(self, upstream: str, pki: Path) -> None:
        self.upstream = upstream.rstrip("/")
        self.pki = pki
        self._stopping = asyncio.Event()
        self.gate = FaultGate(self._stopping)
        self._runners: list[web.AppRunner] = []
        self.url = self.admin_url = ""

    def _upstream_context(self, as_admin: bool) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.pki / "ca.crt"))
        if as_admin:
            ctx.load_cert_chain(str(self.pki / "admin.crt"), str(self.pki / "admin.key"))
        return ctx

    def _serving_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(str(self.pki / "apiserver.crt"), str(self.pki / "apiserver.key"))
        ctx.set_alpn_protocols(["http/1.1"])
        return ctx

    def _session(self, as_admin: bool) -> aiohttp.ClientSession:
        # No pool limit: every open watch holds a connection. Nothing added or decoded: the
        # caller gets the API server's bytes and headers as they are.
        connector = aiohttp.TCPConnector(ssl=self._upstream_context(as_admin), limit=0)
        return aiohttp.ClientSession(
            connector=connector,
            auto_decompress=False,
            skip_auto_headers=("Accept-Encoding", "User-Agent", "Content-Type"),
            timeout=aiohttp.ClientTimeout(total=None, connect=10, sock_read=None),
        )

    async def start(self, port: int = 0, admin_port: int = 0, host: str = "127.0.0.1") -> None:
        self._as_admin = self._session(as_admin=True)
        self._as_caller = self._session(as_admin=False)
        app = web.Application(client_max_size=_MAX_REQUEST_BYTES)
        app.router.add_route("*", "/{tail:.*}", self.handle)
        admin = web.Application()
        self.gate.add_admin_routes(admin, refuses=refused)
        admin.router.add_route("GET", "/healthz", lambda _r: _ok())
        proxy_port = await self._serve(app, host, port, self._serving_context())
        admin_port = await self._serve(admin, host, admin_port, None)
        self.url = f"https://{host}:{proxy_port}"
        self.admin_url = f"http://{host}:{admin_port}"

    async def _serve(
        self, app: web.Application, host: str, port: int, ctx: ssl.SSLContext | None
    ) -> int:
        # handler_cancellation: a caller that hangs up ends its upstream request (a watch).
        runner = web.AppRunner(
            app, access_log=None, handle_signals=False, handler_cancellation=True,
            shutdown_timeout=1.0,
        )  # fmt: skip
        await runner.setup()
        site = web.TCPSite(runner, host, port, ssl_context=ctx)
        await site.start()
        self._runners.append(runner)
        return site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def stop(self) -> None:
        self._stopping.set()
        self.gate.changed()
        for runner in self._runners:
            await runner.cleanup()
        await self._as_admin.close()
        await self._as_caller.close()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        answer = await self.gate.admit(request)
        if answer is not None:
            return answer
        session = self._as_caller if "Authorization" in request.headers else self._as_admin
        body = await request.read()
        try:
            upstream = await session.request(
                request.method, self.upstream + request.path_qs,
                headers=forwarded(request.headers), data=body or None, allow_redirects=False,
            )  # fmt: skip
        except (aiohttp.ClientConnectionError, TimeoutError):
            return _drop(request)
        async with upstream:
            response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
            for name, value in forwarded(upstream.headers):
                response.headers.add(name, value)
            if "Content-Length" in upstream.headers:
                response.content_length = int(upstream.headers["Content-Length"])
            await response.prepare(request)
            try:
                async for chunk in upstream.content.iter_any():
                    if self.gate.faults.rules:
                        await self.gate.wait_not_blackholed(request.method, request.path)
                    await response.write(chunk)
            except (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError):
                return _drop(request)  # the API server went away mid-answer
            await response.write_eof()
            return response


def _drop(request: web.Request) -> web.Response:
    """Close the caller's connection without an answer (what it sees with no proxy)."""
    if request.transport is not None:
        request.transport.abort()
    return web.Response(status=502)  # never sent: the connection is gone


async def _ok() -> web.Response:
    return web.Response(text="ok")


async def _run(args: argparse.Namespace, parent: int) -> None:
    proxy = FaultProxy(args.upstream, args.pki)
    await proxy.start(args.port, args.admin_port)
    # The lines localcluster.testing's launcher waits for, as `localcluster serve` prints.
    print(f"proxy listening on {proxy.url}", flush=True)
    print(f"admin listening on {proxy.admin_url}", flush=True)
    print("ready", flush=True)
    done = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, done.set)
    watch = loop.create_task(_until_orphaned(done, parent))
    await done.wait()
    watch.cancel()
    await proxy.stop()


async def _until_orphaned(done: asyncio.Event, parent: int) -> None:
    """Stop once the test process that started us is gone (killed, it cannot stop us), so no
    proxy outlives its cluster on a shared machine."""
    while os.getppid() == parent:
        await asyncio.sleep(1.0)
    done.set()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m localcluster.real.faultproxy")
    parser.add_argument("--upstream", required=True, help="the API server, https://HOST:PORT")
    parser.add_argument("--pki", type=Path, required=True, help="the cluster's pki dir")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--admin-port", type=int, default=0)
    parent = os.getppid()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_run(parser.parse_args(argv), parent))


if __name__ == "__main__":
    main()

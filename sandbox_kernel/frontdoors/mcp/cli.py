"""``sandbox-kernel mcp``: serve sandboxes to MCP clients, one per MCP session.

    sandbox-kernel mcp --backend docker [--timeout 60] [--allowed-command REGEX ...]
                       [--output-policy sanitize] [--DockerBackend.memory_limit=1g ...]
                       [--http [--port 0] [--idle-timeout 1800]]

Over stdio (the default; a desktop agent starts it as a subprocess) the server has one
session and one sandbox, started at the first call and removed when the client goes away:
stdin closes, or SIGTERM/SIGINT. With ``--http`` it serves the streamable HTTP transport on
127.0.0.1 only (``http://127.0.0.1:PORT/mcp``; port 0: a free one, printed on stderr), every
request must carry ``Authorization: Bearer TOKEN`` (``SANDBOX_KERNEL_MCP_TOKEN``, else a random
token printed on stderr), and each MCP session gets its own sandbox, removed when the client
ends the session (HTTP ``DELETE``), after ``--idle-timeout`` seconds unused, or at shutdown.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hmac
import os
import re
import secrets
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

from ...core.errors import ConfigError
from ...policy import POLICIES
from ..api import AsyncSandbox
from .server import MCPSandbox, build_server

SESSION_HEADER = "mcp-session-id"
TOKEN_VARIABLE = "SANDBOX_KERNEL_MCP_TOKEN"


class Sessions:
    """The server's sandboxes by MCP session id (``Mcp-Session-Id``; None on stdio), each
    made by ``make()`` at the session's first tool call."""

    def __init__(self, make: Callable[[], AsyncSandbox], backend: str) -> None:
        self._make, self.backend = make, backend
        self._sandboxes: dict[str | None, AsyncSandbox] = {}
        self._used: dict[str | None, float] = {}
        self._closing: set[asyncio.Future] = set()  # removals under way

    def get(self, ctx: Any) -> AsyncSandbox:
        """The calling session's sandbox (``ctx``: the tool's MCP ``Context``)."""
        key = (ctx.headers or {}).get(SESSION_HEADER) if ctx is not None else None
        if key not in self._sandboxes:
            self._sandboxes[key] = self._make()
        self._used[key] = time.monotonic()
        return self._sandboxes[key]

    async def close(self, key: str | None) -> None:
        """Remove session ``key``'s sandbox, if it has one."""
        self._used.pop(key, None)
        if (sandbox := self._sandboxes.pop(key, None)) is not None:
            closing = asyncio.ensure_future(sandbox.close())
            self._closing.add(closing)
            closing.add_done_callback(self._closing.discard)
            await closing

    async def close_all(self) -> None:
        """Remove every sandbox, and wait for the removals already under way: the stdio
        client's SIGTERM comes 2 s after it closed stdin (the MCP SDK's stdio_client), often
        while the removal that stdin's end began still runs."""
        await asyncio.gather(*(self.close(key) for key in list(self._sandboxes)), *self._closing,
                             return_exceptions=True)

    async def reap(self, idle: float) -> None:
        """Forever: remove the sandboxes of sessions unused for ``idle`` seconds."""
        while True:
            await asyncio.sleep(min(idle, 60))
            now = time.monotonic()
            for key in [k for k, used in self._used.items() if now - used > idle]:
                await self.close(key)


async def serve_stdio(sessions: Sessions) -> None:
    """Serve one session over stdio until the client closes stdin or a SIGTERM/SIGINT
    arrives; its sandbox is removed either way."""
    server = build_server(sessions)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, lambda: loop.create_task(_stop(sessions)))
    try:
        await server.run_stdio_async()
    finally:
        await sessions.close_all()


async def _stop(sessions: Sessions) -> None:
    """On SIGTERM/SIGINT: remove the sandbox, then exit. (Cancelling the server cannot work
    while the SDK's stdin reader thread is blocked in ``read()``, which only the client's
    closing of the pipe ends.)"""
    try:
        await asyncio.wait_for(sessions.close_all(), timeout=30)
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        os._exit(0)


def guarded(app: Any, token: str, sessions: Sessions) -> Any:
    """``app`` behind a bearer token check; a session's ``DELETE`` also removes its sandbox."""
    from starlette.responses import JSONResponse

    expected = f"Bearer {token}".encode()

    async def asgi(scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await app(scope, receive, send)
        headers = dict(scope["headers"])
        if not hmac.compare_digest(headers.get(b"authorization", b""), expected):
            response = JSONResponse({"error": f"missing or wrong bearer token (see {TOKEN_VARIABLE})"}, 401)
            return await response(scope, receive, send)
        session = headers.get(SESSION_HEADER.encode())
        try:
            await app(scope, receive, send)
        finally:
            if scope["method"] == "DELETE" and session:
                await sessions.close(session.decode())

    return asgi


async def serve_http(sessions: Sessions, port: int, idle: float) -> None:
    """Serve the streamable HTTP transport on 127.0.0.1:``port`` until SIGTERM/SIGINT."""
    import uvicorn

    token = os.environ.get(TOKEN_VARIABLE) or secrets.token_urlsafe(32)
    app = build_server(sessions).streamable_http_app(host="127.0.0.1", session_idle_timeout=idle)
    server = uvicorn.Server(uvicorn.Config(guarded(app, token, sessions), host="127.0.0.1", port=port,
                                           log_level="warning", lifespan="on"))
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, lambda: setattr(server, "should_exit", True))
    serving = asyncio.ensure_future(server.serve())
    reaper = asyncio.ensure_future(sessions.reap(idle))
    try:
        while not server.started and not serving.done():
            await asyncio.sleep(0.05)
        if server.started:
            bound = server.servers[0].sockets[0].getsockname()[1]
            print(f"sandbox-kernel mcp: serving http://127.0.0.1:{bound}/mcp", file=sys.stderr, flush=True)
            if TOKEN_VARIABLE not in os.environ:
                print(f"sandbox-kernel mcp: bearer token {token}", file=sys.stderr, flush=True)
        await serving
    finally:
        reaper.cancel()
        await sessions.close_all()


HELP = "serve sandboxes to MCP clients over stdio or HTTP (needs sandbox-kernel[mcp])"
"""The line ``sandbox-kernel --help`` shows (entry point ``sandbox_kernel.commands``)."""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--backend", default="local", help="sandbox backend (default: local)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds a call may run (default 60)")
    parser.add_argument("--max-output-bytes", default="1m", help="output one call may return (default 1m)")
    parser.add_argument("--allowed-command", action="append", dest="allowed_commands", metavar="REGEX",
                        help="allow run_command for command lines that fully match REGEX (repeatable; "
                             "default: any command)")
    parser.add_argument("--output-policy", choices=POLICIES, default="sanitize")
    parser.add_argument("--allowed-origin", action="append", dest="allowed_origins", default=[], metavar="ORIGIN")
    parser.add_argument("--allowed-mime-type", action="append", dest="allowed_mime_types", default=[],
                        metavar="MIME", help="let outputs of this MIME type through (repeatable; see docs/explanation/security.md)")
    parser.add_argument("--http", action="store_true", help="serve streamable HTTP on 127.0.0.1 instead of stdio")
    parser.add_argument("--port", type=int, default=0, help="with --http: the port (default 0: a free one)")
    parser.add_argument("--idle-timeout", type=float, default=1800.0,
                        help="with --http: seconds after which an unused session's sandbox is removed")
    parser.set_defaults(traitlets_options=True)


def options_config(argv: list[str]) -> Any:
    """A traitlets Config from ``--Class.trait=value`` arguments.

    Raises:
        ConfigError: an argument of another form.
    """
    from traitlets.config.loader import KVArgParseConfigLoader

    for arg in argv:
        if not re.match(r"^--[A-Za-z_]\w*\.[A-Za-z_]\w*(=|$)", arg):
            raise ConfigError(f"Unknown argument {arg!r}: backend options look like --DockerBackend.memory_limit=1g.")
    return KVArgParseConfigLoader(argv).load_config()


def raise_open_files_limit() -> None:
    """Raise this process's soft limit of open files (``RLIMIT_NOFILE``) to its hard limit, as
    servers that hold many connections do (Go's runtime does it for every program): the server
    holds about 37 file descriptors per docker session, so the common soft limit of 1024 would
    stop it near 27 sessions. Past what is left, a new session is refused with one message
    (``KernelClientBackend.start``). Nothing happens where there is no ``resource`` module."""
    try:
        import resource
    except ImportError:
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return
    # macOS reports an infinite hard limit but refuses a soft one past OPEN_MAX (10240).
    for target in (hard, 10240) if hard != resource.RLIM_INFINITY else (1 << 16, 10240):
        if soft >= target:
            return
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            return
        except (ValueError, OSError):
            continue


def run(args: argparse.Namespace) -> int:
    try:
        import mcp.server.mcpserver  # noqa: F401
    except ImportError:
        print("sandbox-kernel mcp needs the MCP SDK. Fix: pip install 'sandbox-kernel[mcp]'", file=sys.stderr)
        return 1
    config = options_config(args.extra)

    def make() -> AsyncSandbox:
        return MCPSandbox(args.backend, config=config, timeout=args.timeout, max_output_bytes=args.max_output_bytes,
                          allowed_commands=args.allowed_commands, output_policy=args.output_policy,
                          allowed_origins=args.allowed_origins, allowed_mime_types=args.allowed_mime_types)

    make()  # a bad option stops the server now, with its one message
    raise_open_files_limit()
    sessions = Sessions(make, args.backend)
    asyncio.run(serve_http(sessions, args.port, args.idle_timeout) if args.http else serve_stdio(sessions))
    return 0

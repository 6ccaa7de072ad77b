"""Many docker sandboxes at once, through the Python API or the MCP server over HTTP (issue 20's
scale figures).

    .venv/bin/python benchmarks/scale.py [--sessions 10,30] [--backend docker] [--via api|mcp]

For N sessions started concurrently (each imports numpy and pandas, as a data notebook does):
  start all   seconds from N concurrent starts + the import cell to all done (api:
              ``AsyncSandbox.start()`` then ``run``; mcp: N clients' ``initialize`` then
              ``run_code``, whose first call starts the session's sandbox)
  memory      MiB per sandbox, as the engine counts it (``docker stats``; over MCP the ``status``
              tool's ``usage``), median
  one cell    milliseconds for ``1+1`` on all N at once, median of 5 rounds
  host RSS    growth in MiB of what the host holds for N sessions: this process (api), or the
              server process ``sandbox-kernel mcp --http`` and its children (mcp)
With ``--via mcp`` the server runs as a user runs it, a subprocess on 127.0.0.1 with a bearer
token, and each of the N clients is the ``mcp`` SDK's own (``streamable_http_client`` +
``ClientSession``, its own HTTP connection pool and MCP session, hence its own sandbox), all N
in this process. On 2 shared cores the start is CPU-bound (N kernels importing pandas), so it
grows about linearly in N; compare the per-session figure across N rather than absolutes.

Measured 2026-11-24 (2 cores shared with other work, load average 4 to 13 during the runs;
docker, ipc transport). Through the API (the sizes run in one process, so the 30 row's RSS
growth starts from what the 10 row left; an earlier, quieter run: 10 in 8.2 s, 26 ms, 67 MiB;
30 in 21.5 s, 94 ms, 68 MiB):
| sessions (api) | start all (s) | per session (s) | memory per sandbox (MiB) | one cell on all (ms) | host RSS growth (MiB) |
|---|---|---|---|---|---|
| 10 | 7.5 | 0.75 | 75 | 87 | 39 |
| 30 | 20.3 | 0.68 | 75 | 143 | 17 |
Through ``sandbox-kernel mcp --http`` with N concurrent clients (a fresh server per row):
| sessions (mcp) | start all (s) | per session (s) | memory per sandbox (MiB) | one cell on all (ms) | server RSS growth (MiB) |
|---|---|---|---|---|---|
| 10 | 5.4 | 0.54 | 75 | 69 | 25 |
| 30 | 21.4 | 0.71 | 75 | 260 | 43 |
| 45 | 30.2 | 0.67 | 75 | 348 | 56 |

Where the limit is on 2 cores: nothing failed at 45 sessions. The start is CPU-bound and
linear (about 0.7 s of the two cores per session: the container, the kernel, numpy and pandas).
One cell on all N grows with N, faster over MCP (about 8 ms per session at 30, against 5 through
the API: each call is also JSON-RPC over SSE, parsed by the server and the client on the same
cores). Memory is not the limit here: 75 MiB per sandbox as the engine counts it, plus about
1 MiB per session in the server. What fails first is open files: the server holds about 37
file descriptors (ZMQ sockets and their eventfds) and 3.5 threads per docker session (7 fds
idle, 187 at 5 sessions, 375 at 10). This host's ``ulimit -n`` is 20000 (about 500 sessions),
but under the common soft limit of 1024 the server breaks at about 27 sessions, and not with a
message: with the limit set to 256, 6 sessions ran and the 7th broke the server (uvicorn's
``accept()`` got EMFILE, the logging of that failed too, and the clients saw "SSE stream ended
without a response"). Since then the server raises its soft limit to the hard one, and
refuses a session that would leave fewer than 64 free in one message, serving the rest
(tests/test_mcp.py).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import secrets
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

import psutil

from sandbox_kernel.frontdoors.api import AsyncSandbox

IMPORTS = "import numpy, pandas"
ROUNDS = 5


@dataclass(frozen=True)
class Row:
    sessions: int
    start_all: float  # seconds
    memory: float  # MiB per sandbox, median
    one_cell: float  # milliseconds, median of ROUNDS
    rss_growth: float  # MiB

    def line(self) -> str:
        return (f"| {self.sessions} | {self.start_all:.1f} | {self.start_all / self.sessions:.2f} | "
                f"{self.memory:.0f} | {self.one_cell:.0f} | {self.rss_growth:.0f} |")


async def rounds(cell) -> float:
    """Median milliseconds of ``ROUNDS`` runs of the coroutine function ``cell``."""
    times = []
    for _ in range(ROUNDS):
        t = time.perf_counter()
        await cell()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def median_mib(usages: list) -> float:
    values = [u["memory_bytes"] for u in usages if u and u.get("memory_bytes")]
    return statistics.median(values) / 2**20 if values else float("nan")


async def via_api(n: int, backend: str) -> Row:
    me = psutil.Process()
    base = me.memory_info().rss
    boxes = [AsyncSandbox(backend) for _ in range(n)]
    try:
        started = time.perf_counter()

        async def start(box: AsyncSandbox) -> None:
            await box.start()
            result = await box.run(IMPORTS)
            if result.error is not None:
                raise RuntimeError(f"import cell failed: {result.error}")

        await asyncio.gather(*(start(box) for box in boxes))
        start_all = time.perf_counter() - started
        usages = await asyncio.gather(*(box.backend.usage() for box in boxes)) if backend == "docker" else []
        one_cell = await rounds(lambda: asyncio.gather(*(box.run("1+1") for box in boxes)))
        return Row(n, start_all, median_mib(usages), one_cell, (me.memory_info().rss - base) / 2**20)
    finally:
        await asyncio.gather(*(box.close() for box in boxes), return_exceptions=True)


class Server:
    """``sandbox-kernel mcp --http`` as a subprocess; its stderr is kept in ``lines``."""

    def __init__(self, backend: str) -> None:
        self.token = secrets.token_urlsafe(16)
        env = {**os.environ, "SANDBOX_KERNEL_MCP_TOKEN": self.token}
        self.process = subprocess.Popen([sys.executable, "-m", "sandbox_kernel", "mcp", "--http", "--backend", backend],
                                        stderr=subprocess.PIPE, text=True, env=env)
        first = self.process.stderr.readline()
        if not (found := re.search(r"http://127\.0\.0\.1:\d+/mcp", first)):
            self.process.kill()
            raise RuntimeError(f"the MCP server did not start: {first}{self.process.stderr.read()}")
        self.url, self.lines = found.group(0), []
        threading.Thread(target=lambda: self.lines.extend(self.process.stderr), daemon=True).start()

    def rss(self) -> int:
        """Bytes resident in the server process and its children."""
        me = psutil.Process(self.process.pid)
        return sum(p.memory_info().rss for p in [me, *me.children(recursive=True)])

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            print("the MCP server did not stop within 60 s of SIGTERM", file=sys.stderr)
        if self.process.returncode not in (0, None):
            print(f"the MCP server exited with {self.process.returncode}", file=sys.stderr)


def text_of(result) -> str:
    return "\n".join(c.text for c in result.content if c.type == "text")


async def call(session, tool: str, arguments: dict) -> str:
    """A tool's text; a tool error is raised with its text."""
    result = await session.call_tool(tool, arguments)
    if result.is_error:
        raise RuntimeError(f"{tool} failed: {text_of(result)}")
    return text_of(result)


async def via_mcp(n: int, backend: str) -> Row:
    import json

    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    server = Server(backend)
    try:
        base = server.rss()
        async with contextlib.AsyncExitStack() as stack:
            started = time.perf_counter()
            sessions = []
            for _ in range(n):  # each client: its own connection pool and MCP session
                http = await stack.enter_async_context(httpx2.AsyncClient(
                    headers={"Authorization": f"Bearer {server.token}"}, timeout=httpx2.Timeout(30, read=300)))
                read, write = await stack.enter_async_context(streamable_http_client(server.url, http_client=http))
                sessions.append(await stack.enter_async_context(ClientSession(read, write)))

            async def start(session) -> None:
                await session.initialize()
                await call(session, "run_code", {"code": IMPORTS})

            failed = [e for e in await asyncio.gather(*(start(s) for s in sessions), return_exceptions=True) if e]
            if failed:
                raise RuntimeError(f"{len(failed)} of {n} sessions failed to start; the first: {failed[0]!r}")
            start_all = time.perf_counter() - started
            statuses = await asyncio.gather(*(call(s, "status", {}) for s in sessions))
            usages = [json.loads(status).get("usage") for status in statuses]
            one_cell = await rounds(lambda: asyncio.gather(*(call(s, "run_code", {"code": "1+1"}) for s in sessions)))
            return Row(n, start_all, median_mib(usages), one_cell, (server.rss() - base) / 2**20)
    finally:
        server.stop()
        if any("Traceback" in line for line in server.lines):
            print("the MCP server's stderr:\n" + "".join(server.lines), file=sys.stderr)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", default="10,30")
    parser.add_argument("--backend", default="docker")
    parser.add_argument("--via", choices=("api", "mcp"), default="api")
    args = parser.parse_args()
    host = "server RSS growth" if args.via == "mcp" else "host RSS growth"
    print(f"| sessions ({args.backend}, {args.via}) | start all (s) | per session (s) | memory per sandbox (MiB) "
          f"| one cell on all (ms) | {host} (MiB) |")
    print("|---|---|---|---|---|---|")
    measure = via_mcp if args.via == "mcp" else via_api
    for n in (int(s) for s in args.sessions.split(",")):
        print((await measure(n, args.backend)).line(), flush=True)


if __name__ == "__main__":
    asyncio.run(main())

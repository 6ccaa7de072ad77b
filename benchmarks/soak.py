"""Host memory per unit of work, at every front door: what a long-lived process keeps.

    .venv/bin/python benchmarks/soak.py [--doors magic,api,mcp-stdio,mcp-http,kernel,pool,egress] [--scale 1]

For each door, warm-up units first (imports, caches, the allocator's first arenas), then N more
units while the door's process's resident memory (``VmRSS``) is read at 11 points; the figure is
the least-squares slope of those readings in kB per unit, with its standard error (the noise: a
growth of 1 kB a unit shows when the error is well under 1). No collection is forced: a closed
sandbox is freed by reference counting (tests/test_memory.py), as a long-lived process needs.
A door is flat when the slope is under :data:`FLAT_KB` (a hundredth of the ~430 kB per policy
that issue 37 found). For the doors in this process the table also gives the resident memory
after ``malloc_trim(0)`` (glibc): what of the growth is memory the allocator keeps free.

  magic      ``%%sandbox`` cells (``x = i``, local) in an IPython shell in this process
  api        ``Sandbox("local")`` opened, run and closed in this process
  mcp-stdio  ``sandbox-kernel mcp`` (local) started, ``run_code`` called and closed over stdio by
             the ``mcp`` SDK's client, as a desktop agent does: this (the agent's) process
  mcp-http   sessions of one ``sandbox-kernel mcp --http`` server (create, ``run_code``, close
             by HTTP ``DELETE``): the server's process
  kernel     cells of a ``sandbox-local`` kernel with rich outputs (HTML, Markdown, SVG, PNG,
             JSON, an update of a display): the wrapper kernel's process
  pool       ``Sandbox("local", pool_size=1)`` opened and closed, each taking a pooled sandbox
             while the pool refills: this process
  egress     ``Sandbox("docker", allow_hosts=[...])`` opened, run and closed, each with its egress
             proxy container (no request leaves: the name is a ``.test`` one): this process;
             needs the Docker engine, the sandbox image and the egress image

Sandboxes and servers are this run's own; nothing is left behind. Read a door as flat or not;
the standard error says how much the run could tell.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import dataclasses
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

FLAT_KB = 4.3
"""kB per unit under which a door is flat: a hundredth of the leak issue 37 found (~430 kB a unit)."""

ROOT = Path(__file__).resolve().parents[1]
RICH_CELL = """\
from IPython.display import HTML, Markdown, SVG, Image, JSON, display
import base64
display(HTML('<table><tr><td style="color:red" onclick="x()">%(i)d</td></tr></table>'))
display(Markdown('**cell %(i)d** [link](https://example.test)'))
display(SVG('<svg xmlns="http://www.w3.org/2000/svg" width="9" height="9"><circle r="4" cx="4" cy="4"/></svg>'))
display(Image(data=base64.b64decode('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==')))
display(JSON({'cell': %(i)d}))
h = display('first', display_id=True); h.update('second')
"""


def rss_kb(pid: int | None = None) -> int:
    """Resident set size of process ``pid`` (default: this one) in kB (``VmRSS``)."""
    for line in Path(f"/proc/{pid or 'self'}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


def trimmed_kb() -> int | None:
    """This process's ``VmRSS`` in kB after glibc's ``malloc_trim(0)`` gave the free pages of its
    heaps back to the system; None without glibc."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        return None
    return rss_kb()


@dataclasses.dataclass(frozen=True)
class Growth:
    """A door's figures: ``per_unit`` and ``error`` in kB per unit, resident memory in kB."""

    per_unit: float
    error: float
    before: int
    after: int
    trimmed: int | None = None


def slope(points: list[tuple[int, int]]) -> tuple[float, float]:
    """``(slope, standard error)`` of the least-squares line through ``(unit, kB)`` points."""
    n = len(points)
    mean_x, mean_y = sum(x for x, _ in points) / n, sum(y for _, y in points) / n
    sxx = sum((x - mean_x) ** 2 for x, _ in points)
    b = sum((x - mean_x) * (y - mean_y) for x, y in points) / sxx
    residual = sum((y - mean_y - b * (x - mean_x)) ** 2 for x, y in points)
    return b, math.sqrt(residual / (n - 2) / sxx) if n > 2 else 0.0


def measure(unit: Callable[[int], None], units: int, warm: int, pid: int | None = None) -> Growth:
    """The growth of process ``pid``'s (default: this one's) ``VmRSS`` over ``units`` calls of
    ``unit(i)`` after ``warm`` calls, read at 11 points."""
    for i in range(warm):
        unit(i)
    marks = {round(units * k / 10) for k in range(1, 11)}
    points = [(0, rss_kb(pid))]
    for i in range(1, units + 1):
        unit(warm + i - 1)
        if i in marks:
            points.append((i, rss_kb(pid)))
    per_unit, error = slope(points)
    return Growth(per_unit, error, points[0][1], points[-1][1], trimmed_kb() if pid is None else None)


# -- the doors ----------------------------------------------------------------------------------
def magic(units: int, warm: int) -> Growth:
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    shell = InteractiveShell.instance()
    shell.run_cell("%load_ext magics")

    def cell(i: int) -> None:
        with capture_output():
            assert shell.run_cell(f"%%sandbox --name soak\nx = {i}").success

    try:
        return measure(cell, units, warm)
    finally:
        shell.run_cell("%sandbox stop soak")


def api(units: int, warm: int) -> Growth:
    from sandbox_kernel import Sandbox

    def sandbox(i: int) -> None:
        with Sandbox("local") as sb:
            assert sb.run(f"x = {i}; x").text == str(i)

    return measure(sandbox, units, warm)


def mcp_stdio(units: int, warm: int) -> Growth:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=sys.executable, args=["-m", "sandbox_kernel", "mcp", "--backend", "local"],
                                   env=dict(os.environ))

    async def session(i: int) -> None:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            result = await client.call_tool("run_code", {"code": f"{i} + 1"})
            assert not result.is_error and str(i + 1) in result.content[0].text

    return measure(lambda i: asyncio.run(session(i)), units, warm)


def mcp_http(units: int, warm: int) -> Growth:
    import httpx
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    token = "soak-token"
    server = subprocess.Popen([sys.executable, "-m", "sandbox_kernel", "mcp", "--backend", "local", "--http"],
                              env={**os.environ, "SANDBOX_KERNEL_MCP_TOKEN": token}, stderr=subprocess.PIPE, text=True)
    try:
        line = ""
        while "serving http" not in line:
            line = server.stderr.readline()
            if not line:
                raise RuntimeError("the MCP server did not start")
        url = line.split()[-1]

        async def session(i: int) -> None:
            async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http, \
                    streamable_http_client(url, http_client=http) as (read, write, *_), \
                    ClientSession(read, write) as client:
                await client.initialize()
                result = await client.call_tool("run_code", {"code": f"{i} + 1"})
                assert not result.is_error and str(i + 1) in result.content[0].text

        def unit(i: int) -> None:
            asyncio.run(session(i))
            time.sleep(0.3)  # the DELETE's removal of the sandbox ends in the server

        return measure(unit, units, warm, pid=server.pid)
    finally:
        server.terminate()
        server.wait(30)


def kernel(units: int, warm: int) -> Growth:
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name="sandbox-local", startup_timeout=120)
    try:
        def cell(i: int) -> None:
            reply = kc.execute_interactive(RICH_CELL % {"i": i}, timeout=60, output_hook=lambda msg: None)
            assert reply["content"]["status"] == "ok", reply["content"]

        return measure(cell, units, warm, pid=km.provisioner.process.pid)
    finally:
        kc.stop_channels()
        km.shutdown_kernel()


def pool(units: int, warm: int) -> Growth:
    from sandbox_kernel import Sandbox
    from sandbox_kernel.backends import pool as registry

    def sandbox(i: int) -> None:
        deadline = time.monotonic() + 60
        while i and not registry.waiting_records("local") and time.monotonic() < deadline:
            time.sleep(0.1)  # the refill the last take began
        with Sandbox("local", pool_size=1) as sb:
            assert sb.run(f"x = {i}; x").text == str(i)

    try:
        return measure(sandbox, units, warm)
    finally:
        subprocess.run([sys.executable, "-m", "sandbox_kernel", "pool", "stop"], check=True, capture_output=True)


DOCKER_OPTIONS: dict[str, str] = {}
"""The docker sandboxes' options (``--docker-image``)."""


def egress(units: int, warm: int) -> Growth:
    from sandbox_kernel import Sandbox

    def sandbox(i: int) -> None:
        with Sandbox("docker", allow_hosts=["soak.example.test"], **DOCKER_OPTIONS) as sb:
            assert sb.run(f"x = {i}; x").text == str(i)

    return measure(sandbox, units, warm)


DOORS = {"magic": (magic, 50, 400), "api": (api, 60, 160), "mcp-stdio": (mcp_stdio, 10, 60),
         "mcp-http": (mcp_http, 100, 160), "kernel": (kernel, 300, 400), "pool": (pool, 10, 60),
         "egress": (egress, 10, 60)}
"""door -> (its run, warm-up units, measured units at --scale 1). The warm-ups are what each door's
process took, measured here, to stop growing: a server's first ~100 sessions touch the pages of
the interpreter's arenas (the MCP server over HTTP: about 8 kB a session over its first 100, then
under 1), the kernel's session recalls its last 256 requests."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--doors", default=",".join(DOORS))
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every door's measured units")
    parser.add_argument("--docker-image", help="the docker sandboxes' image (default: the backend's)")
    args = parser.parse_args()
    if args.docker_image:
        DOCKER_OPTIONS["image"] = args.docker_image
    print("| door | warm-up + units | kB per unit (± standard error) | RSS before → after (MB) "
          "| after malloc_trim (MB) | |")
    print("|---|---|---|---|---|---|")
    failed = False
    for name in args.doors.split(","):
        run, warm, units = DOORS[name]
        units = max(10, round(units * args.scale))
        with contextlib.redirect_stdout(sys.stderr):
            growth = run(units, warm)
        flat = growth.per_unit < FLAT_KB
        failed |= not flat
        trimmed = "—" if growth.trimmed is None else f"{growth.trimmed / 1024:.1f}"
        print(f"| {name} | {warm} + {units} | {growth.per_unit:.1f} ± {growth.error:.1f} | "
              f"{growth.before / 1024:.1f} → {growth.after / 1024:.1f} | {trimmed} | {'flat' if flat else 'GROWS'} |",
              flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

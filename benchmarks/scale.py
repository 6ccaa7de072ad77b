"""Many docker sandboxes at once, through the Python API (issue 20's scale figures).

    .venv/bin/python benchmarks/scale.py [--sessions 10,30] [--backend docker]

For N sessions started concurrently (each imports numpy and pandas, as a data notebook does):
  start all   seconds from N concurrent ``AsyncSandbox.start()`` + the import cell to all done
  memory      MiB per sandbox, as the engine counts it (``docker stats``), median
  one cell    milliseconds for ``1+1`` on all N at once, median of 5 rounds
  wrapper     this process's RSS growth, MiB (everything the host holds for N sessions)
On 2 shared cores the start is CPU-bound (N kernels importing pandas), so it grows about
linearly in N; compare the per-session figure across N rather than absolutes. Not yet here:
the same through the MCP server over HTTP with N concurrent clients.

Measured 2026-11-24 (2 shared cores, docker, ipc transport):
| sessions | start all (s) | per session (s) | memory per sandbox (MiB) | one cell on all (ms) | host RSS growth (MiB) |
|---|---|---|---|---|---|
| 10 | 8.2 | 0.82 | 67 | 26 | 41 |
| 30 | 21.5 | 0.72 | 68 | 94 | 56 |
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import psutil

from sandbox_kernel.api import AsyncSandbox

IMPORTS = "import numpy, pandas"


async def one_size(n: int, backend: str) -> str:
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
        memory = statistics.median(u["memory_bytes"] for u in usages if u) / 2**20 if any(usages) else float("nan")
        rounds = []
        for _ in range(5):
            t = time.perf_counter()
            await asyncio.gather(*(box.run("1+1") for box in boxes))
            rounds.append((time.perf_counter() - t) * 1000)
        wrapper = (me.memory_info().rss - base) / 2**20
        return (f"| {n} | {start_all:.1f} | {start_all / n:.2f} | {memory:.0f} | {statistics.median(rounds):.0f} | "
                f"{wrapper:.0f} |")
    finally:
        await asyncio.gather(*(box.close() for box in boxes), return_exceptions=True)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", default="10,30")
    parser.add_argument("--backend", default="docker")
    args = parser.parse_args()
    print(f"| sessions ({args.backend}) | start all (s) | per session (s) | memory per sandbox (MiB) "
          "| one cell on all (ms) | host RSS growth (MiB) |")
    print("|---|---|---|---|---|---|")
    for n in (int(s) for s in args.sessions.split(",")):
        print(await one_size(n, args.backend), flush=True)


if __name__ == "__main__":
    asyncio.run(main())

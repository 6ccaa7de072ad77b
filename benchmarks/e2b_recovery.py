"""The e2b backend against the local E2B-compatible server: recovery times and the cost of the
host-side stream bound, in one run.

    .venv/bin/python benchmarks/e2b_recovery.py [--rounds 6]

  warm cell            a warm `x` through E2BBackend.execute (baseline of the ratios)
  interrupt -> next    from interrupt() during `while True: pass` to the next cell's result
  death -> next        from the kernel's death (`os._exit`) being reported to the next cell's result
  20MB stdout          the SDK's plain AsyncSandbox.run_code vs the same call through the
                       bounded transport (sandbox_kernel.backends.e2b.stream), same sandbox

The server (tests/e2b_server.py) runs real ipykernels and behaves like E2B's code interpreter
(it interrupts without waiting, loses executions while a dead kernel restarts). Absolute times
are this machine's; compare the ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sandbox_kernel.backends.e2b.stream import sandbox_class  # noqa: E402
from sandbox_kernel.backends.e2b import E2BBackend  # noqa: E402
from tests.e2b_server import E2BTestServer  # noqa: E402

BULK = "import sys\nfor _ in range(20):\n    sys.stdout.write('x' * 1_000_000 + '\\n')"


def ignore(event: object) -> None:
    pass


async def timed(coro) -> float:
    started = time.perf_counter()
    await coro
    return time.perf_counter() - started


async def recovery(rounds: int) -> dict[str, list[float]]:
    backend = E2BBackend()
    await backend.start()
    times: dict[str, list[float]] = {"warm cell": [], "interrupt -> next": [], "death -> next": []}
    try:
        await backend.execute("x = 41", ignore)
        for _ in range(rounds):
            times["warm cell"].append(await timed(backend.execute("x", ignore)))
            running = asyncio.ensure_future(backend.execute("while True: pass", ignore))
            await asyncio.sleep(0.5)
            started = time.perf_counter()
            await backend.interrupt()
            await running
            await backend.execute("x", ignore)
            times["interrupt -> next"].append(time.perf_counter() - started)
        for _ in range(max(rounds // 2, 1)):
            try:
                await backend.execute("import os\nos._exit(3)", ignore)
            except Exception:  # noqa: BLE001 - SandboxDied, expected
                pass
            times["death -> next"].append(await timed(backend.execute("1 + 1", ignore)))
    finally:
        await backend.shutdown()
    return times


async def bulk(rounds: int) -> dict[str, list[float]]:
    from e2b_code_interpreter import AsyncSandbox

    plain = await AsyncSandbox.create()
    bounded = await sandbox_class(AsyncSandbox, lambda: 16 * 1024**2).connect(plain.sandbox_id)
    times: dict[str, list[float]] = {"20MB stdout, SDK": [], "20MB stdout, bounded": []}
    try:
        for _ in range(rounds):
            times["20MB stdout, SDK"].append(await timed(plain.run_code(BULK, timeout=0)))
            times["20MB stdout, bounded"].append(await timed(bounded.run_code(BULK, timeout=0)))
    finally:
        await plain.kill()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    with E2BTestServer(keepalive_interval=0.5) as server:
        os.environ.update(server.env())
        results = {**asyncio.run(recovery(args.rounds)), **asyncio.run(bulk(max(args.rounds // 2, 1)))}
    base = statistics.median(results["warm cell"])
    print(f"{'measure':<24}{'median s':>10}{'max s':>10}{'x warm cell':>13}")
    for name, samples in results.items():
        median = statistics.median(samples)
        print(f"{name:<24}{median:>10.3f}{max(samples):>10.3f}{median / base:>13.1f}")


if __name__ == "__main__":
    main()

"""The e2b backend against any E2B-compatible server: how soon the next cell answers after an
interrupt, a cell timeout, a restart and the kernel's death, and the cost of the host-side
stream bound, in one run.

    .venv/bin/python benchmarks/e2b_recovery.py [--rounds 20] [--no-bulk]

With ``E2B_API_URL`` (and ``E2B_SANDBOX_URL``, ``E2B_API_KEY``) set, the server there is used,
e.g. E2B's own code interpreter behind a control plane on 127.0.0.1 (see docs/explanation/benchmarks.md); without,
``tests/e2b_server.py`` is started for the run.

  warm cell            a warm `x` through E2BBackend.execute (baseline of the ratios)
  interrupt -> next    from interrupt() during `while True: pass` to the next cell's result
  timeout -> next      from the ExecutionTimeout of `while True: pass` (timeout 0.5 s) to the next result
  restart call         restart() (POST /contexts/{id}/restart: Jupyter restarts the kernel)
  restart -> next      from restart() returning to the next cell's result
  death -> next        from the kernel's death (`os._exit`) being reported to the next cell's result
                       (deaths --death-gap seconds apart, after the other rounds)
  20MB stdout          the SDK's plain AsyncSandbox.run_code vs the same call through the
                       bounded transport (sandbox_kernel.backends.e2b.stream), same sandbox

Every round's next cell must answer `41` (`2` after a restart or a death); a wrong answer or
an error is counted under "failed". Absolute times are this machine's; compare the ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sandbox_kernel.backends.e2b import E2BBackend  # noqa: E402
from sandbox_kernel.backends.e2b.stream import sandbox_class  # noqa: E402
from sandbox_kernel.core.errors import ExecutionTimeout, SandboxDied  # noqa: E402

BULK = "import sys\nfor _ in range(20):\n    sys.stdout.write('x' * 1_000_000 + '\\n')"


class Answer:
    """Collects the text/plain of a cell's execute_result."""

    def __init__(self) -> None:
        self.text: str | None = None

    def __call__(self, event: object) -> None:
        if getattr(event, "execution_count", None) is not None:
            self.text = event.data.get("text/plain")


async def next_cell(backend: E2BBackend, code: str, expected: str, failed: list[str], what: str) -> None:
    answer = Answer()
    outcome = await asyncio.wait_for(backend.execute(code, answer), 60)
    if outcome.status != "ok" or answer.text != expected:
        failed.append(f"{what}: {outcome.status} {outcome.error and outcome.error.ename} {answer.text!r}")


async def recovery(rounds: int, death_gap: float) -> tuple[dict[str, list[float]], list[str]]:
    backend = E2BBackend()
    await backend.start()
    names = ["warm cell", "interrupt -> next", "timeout -> next", "restart call", "restart -> next", "death -> next"]
    times: dict[str, list[float]] = {name: [] for name in names}
    failed: list[str] = []
    try:
        for _ in range(rounds):
            await backend.execute("x = 41", Answer())
            started = time.perf_counter()
            await next_cell(backend, "x", "41", failed, "warm")
            times["warm cell"].append(time.perf_counter() - started)

            running = asyncio.ensure_future(backend.execute("while True: pass", Answer()))
            await asyncio.sleep(0.5)
            started = time.perf_counter()
            await backend.interrupt()
            await running
            await next_cell(backend, "x", "41", failed, "interrupt")
            times["interrupt -> next"].append(time.perf_counter() - started)

            with contextlib.suppress(ExecutionTimeout):
                await backend.execute("while True: pass", Answer(), timeout=0.5)
            started = time.perf_counter()
            await next_cell(backend, "x", "41", failed, "timeout")
            times["timeout -> next"].append(time.perf_counter() - started)

            started = time.perf_counter()
            await backend.restart()
            times["restart call"].append(time.perf_counter() - started)
            started = time.perf_counter()
            await next_cell(backend, "1 + 1", "2", failed, "restart")
            times["restart -> next"].append(time.perf_counter() - started)
        for _ in range(rounds):
            await asyncio.sleep(death_gap)
            with contextlib.suppress(SandboxDied):
                await backend.execute("import os\nos._exit(3)", Answer())
            started = time.perf_counter()
            await next_cell(backend, "1 + 1", "2", failed, "death")
            times["death -> next"].append(time.perf_counter() - started)
    finally:
        await backend.shutdown()
    return times, failed


async def bulk(rounds: int) -> dict[str, list[float]]:
    from e2b_code_interpreter import AsyncSandbox

    async def timed(coro) -> float:
        started = time.perf_counter()
        await coro
        return time.perf_counter() - started

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


def run(args: argparse.Namespace) -> None:
    times, failed = asyncio.run(recovery(args.rounds, args.death_gap))
    if not args.no_bulk:
        times.update(asyncio.run(bulk(max(args.rounds // 4, 1))))
    base = statistics.median(times["warm cell"])
    print(f"{'measure':<24}{'median s':>10}{'max s':>10}{'x warm cell':>13}  {'round of max':>12}")
    for name, samples in times.items():
        median = statistics.median(samples)
        print(f"{name:<24}{median:>10.3f}{max(samples):>10.3f}{median / base:>13.1f}"
              f"  {samples.index(max(samples)) + 1:>12}")
    print(f"{args.rounds} rounds against {os.environ['E2B_API_URL']}; failed: {len(failed)}")
    for line in failed:
        print("  " + line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--no-bulk", action="store_true", help="skip the 20 MB stdout comparison")
    parser.add_argument("--death-gap", type=float, default=14.0, help="seconds between deaths: Jupyter's "
                        "KernelRestarter gives a kernel up after 5 deaths each within 10 s (stable_start_time) "
                        "of its last restart (it polls every 3 s), and E2B's context is gone with it")
    args = parser.parse_args()
    if os.environ.get("E2B_API_URL"):
        return run(args)
    from tests.e2b_server import E2BTestServer

    with E2BTestServer() as server:
        os.environ.update(server.env())
        run(args)


if __name__ == "__main__":
    main()

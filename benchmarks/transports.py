"""The docker backend's two transports side by side, interleaved in one process.

    .venv/bin/python benchmarks/transports.py [--rounds 300]

Two sandboxes on the same engine, one per transport (``ipc``: ZMQ sockets in a bind-mounted host
directory; ``api``: the kernel's channels over the container's attach stream), run warm `1+1`
cells in alternation, so both see the same machine load. Prints p50/p95 per transport and the
ratio api/ipc (docs/explanation/benchmarks.md holds the latest). benchmarks/run.py measures the
same transports through the kernelspec against a plain ipykernel (rows sandbox-docker/api, /tcp).
"""

from __future__ import annotations

import argparse
import asyncio
import time

from sandbox_kernel.backends.docker import DockerBackend


async def measure(rounds: int) -> dict[str, list[float]]:
    backends = {transport: DockerBackend(transport=transport) for transport in ("ipc", "api")}
    try:
        for backend in backends.values():
            for _ in range(10):  # warm up
                await backend.execute("1+1", lambda event: None)
        samples: dict[str, list[float]] = {transport: [] for transport in backends}
        for _ in range(rounds):
            for transport, backend in backends.items():
                started = time.perf_counter()
                await backend.execute("1+1", lambda event: None)
                samples[transport].append((time.perf_counter() - started) * 1000)
        return samples
    finally:
        for backend in backends.values():
            await backend.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=300)
    args = parser.parse_args()
    samples = asyncio.run(measure(args.rounds))
    p50 = {}
    print("| transport | warm `1+1` p50 (ms) | p95 (ms) |\n|---|---|---|")
    for transport, values in samples.items():
        values.sort()
        p50[transport] = values[len(values) // 2]
        print(f"| {transport} | {p50[transport]:.2f} | {values[int(len(values) * 0.95)]:.2f} |")
    print(f"\napi / ipc p50: {p50['api'] / p50['ipc']:.2f}")


if __name__ == "__main__":
    main()

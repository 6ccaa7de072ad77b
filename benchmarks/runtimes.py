"""The docker backend under gVisor (``runtime=runsc``) against runc, and the persistent workspace
(``workdir_volume``) against the default tmpfs working directory, in one run, through the
``sandbox-docker`` kernel started from its kernelspec as a frontend starts it:

  sandbox    seconds of DockerBackend.start() alone: container created to kernel ready (no wrapper)
  start      seconds from start_kernel() to the first cell's result (`1+1`), a new kernel each time
  p50/p95    warm round trip of `1+1`, milliseconds
  files      seconds for a cell that writes and reads back 200 files of 64 KiB in the working
             directory (file system calls: where gVisor's cost shows)

Ratios are against the first row (runc, tmpfs), measured in the same run.

    .venv/bin/python benchmarks/runtimes.py [--rounds 200] [--starts 5] [--output FILE]

Needs the runsc runtime registered with the engine (``.ci/docker-setup.sh`` does it).
"""

from __future__ import annotations

import argparse
import secrets
import statistics
import subprocess
import time
from pathlib import Path

from jupyter_client.manager import start_new_kernel
from run import first_result, report, run_cell, warm_round_trips

FILES = """
import os, time
os.makedirs('bench', exist_ok=True)
block = b'x' * 65536
for i in range(200):
    with open(f'bench/{i}', 'wb') as f:
        f.write(block)
total = sum(len(open(f'bench/{i}', 'rb').read()) for i in range(200))
for i in range(200):
    os.remove(f'bench/{i}')
assert total == 200 * 65536
"""


def configurations(volume: str) -> dict[str, list[str]]:
    base = ["--SandboxKernel.max_output_bytes=0"]
    return {"runc, tmpfs workdir": base,
            "runsc, tmpfs workdir": [*base, "--DockerBackend.runtime=runsc"],
            "runc, workdir_volume": [*base, f"--DockerBackend.workdir_volume={volume}"],
            "runsc, workdir_volume": [*base, "--DockerBackend.runtime=runsc", f"--DockerBackend.workdir_volume={volume}"]}


def sandbox_start(options: list[str]) -> float:
    """Seconds of ``DockerBackend.start()`` with the kernel options' DockerBackend traits."""
    import asyncio

    from sandbox_kernel.backends.docker import DockerBackend

    traits = dict(o.removeprefix("--DockerBackend.").split("=", 1) for o in options if o.startswith("--DockerBackend."))

    async def once() -> float:
        backend = DockerBackend(**traits)
        await backend._ensure_image(None)
        started = time.perf_counter()
        try:
            await backend.start()
            return time.perf_counter() - started
        finally:
            await backend.shutdown()

    return asyncio.run(once())


def start_to_first_result(options: list[str]) -> float:
    return first_result(kernel_name="sandbox-docker", extra_arguments=options)


def warm(options: list[str], rounds: int) -> tuple[float, float, float]:
    km, kc = start_new_kernel(kernel_name="sandbox-docker", extra_arguments=options, startup_timeout=300)
    try:
        p50, p95 = warm_round_trips(kc, rounds)
        run_cell(kc, FILES)
        files = []
        for _ in range(5):
            started = time.perf_counter()
            run_cell(kc, FILES)
            files.append(time.perf_counter() - started)
    finally:
        kc.stop_channels()
        km.shutdown_kernel()
    return p50, p95, statistics.median(files)


def measure(configs: dict[str, list[str]], starts: int, rounds: int) -> list[tuple]:
    """Starts interleaved across the configurations (the machine's load drifts), then the warm
    figures of each."""
    times: dict[str, list[float]] = {name: [] for name in configs}
    sandbox: dict[str, list[float]] = {name: [] for name in configs}
    for _ in range(starts):
        for name, options in configs.items():
            sandbox[name].append(sandbox_start(options))
            times[name].append(start_to_first_result(options))
    return [(name, statistics.median(sandbox[name]), statistics.median(times[name]), *warm(options, rounds))
            for name, options in configs.items()]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--output", type=Path, help="also write the table to this Markdown file")
    args = parser.parse_args()
    volume = f"sandbox-kernel-bench-{secrets.token_hex(4)}"
    try:
        rows = measure(configurations(volume), args.starts, args.rounds)
    finally:
        subprocess.run(["docker", "volume", "rm", "-f", volume], capture_output=True)
    base = rows[0]
    lines = [f"| docker backend | sandbox start (s) | kernel start→first result (s) | warm 1+1 p50 (ms) | p95 (ms) | "
             f"200 files of 64 KiB (s) | ratio vs {base[0]}: sandbox start / p50 / files |", "|---|---|---|---|---|---|---|"]
    for name, sandbox, start, p50, p95, files in rows:
        lines.append(f"| {name} | {sandbox:.2f} | {start:.2f} | {p50:.2f} | {p95:.2f} | {files:.3f} | "
                     f"{sandbox / base[1]:.2f} / {p50 / base[3]:.2f} / {files / base[5]:.2f} |")
    report(lines, args.output, f"benchmarks/runtimes.py --rounds {args.rounds} --starts {args.starts}")


if __name__ == "__main__":
    main()

"""Latency and throughput of sandbox kernels against a plain ipykernel, in one run.

    .venv/bin/python benchmarks/run.py [--rounds 300] [--kernels python3,sandbox-local,...]

For each kernel, started from its installed kernelspec through jupyter_client exactly as a
frontend starts it:
  start      seconds from start_kernel() to the first cell's result (`1+1`), new kernel each time
  rt p50/p95 warm round trip of `1+1` (execute_request to idle), milliseconds
  20MB out   seconds to stream 20 MB of stdout through the kernel
Ratios are against the first kernel (the plain ipykernel baseline), measured in the same
process: these machines are noisy, so compare ratios rather than absolutes.
With sandbox-gateway among the kernels, a Jupyter Kernel Gateway is started on 127.0.0.1 for the
run (its kernels are plain ipykernel processes: the figures are the gateway hop's cost).
Variants of the docker kernel: sandbox-docker/api is its engine-API transport (the kernel's
channels over the container's attach stream) on the local engine, where sandbox-docker's `auto`
picks ipc; sandbox-docker/tcp is the engine-API transport on an engine that does not share this
host's filesystem, reached over TCP with TLS on 127.0.0.1 (the tests' rig: Debian's docker.io in a
container, tests/targets/remote_engine.py; the same machine, so it measures the transport's and
the TLS hop's cost, not a network's).
With sandbox-docker among the kernels, benchmarks/docker_run.py adds its per-snippet comparison
with `docker run --rm`, the interrupt latency and the out-of-memory report time; `--output FILE`
writes the tables as Markdown (docs/explanation/benchmarks.md holds the latest).
"""

from __future__ import annotations

import argparse
import contextlib
import platform
import statistics
import sys
import time
from pathlib import Path

from jupyter_client.manager import start_new_kernel

# kernel name -> extra argv (the output cap is lifted so the throughput test sees all 20 MB; the
# bound on message size, which would follow the cap to "none", is kept at its default: measured
# interleaved on the backend API, warm 1+1 p50 with / without it: docker 4.15 / 4.80 ms, local
# 2.43 / 2.42 ms, i.e. no cost, so it has no row of its own)
OPTIONS = {"sandbox-local": ["--SandboxKernel.max_output_bytes=0", "--LocalBackend.max_message_bytes=32m"],
           "sandbox-docker": ["--SandboxKernel.max_output_bytes=0", "--DockerBackend.max_message_bytes=32m"],
           "sandbox-gateway": ["--SandboxKernel.max_output_bytes=0"]}


AT_FIRST_CELL = "--SandboxKernel.start_sandbox_at_launch=False"
VARIANTS = {"sandbox-local/at-first-cell": ("sandbox-local", [AT_FIRST_CELL], None),
            "sandbox-docker/at-first-cell": ("sandbox-docker", [AT_FIRST_CELL], None),
            "sandbox-local/pool": ("sandbox-local", ["--LocalBackend.pool_size=1"], None),
            "sandbox-docker/pool": ("sandbox-docker", ["--DockerBackend.pool_size=1"], None),
            "sandbox-docker/api": ("sandbox-docker", ["--DockerBackend.transport=api"], None),
            "sandbox-docker/tcp": ("sandbox-docker", ["--DockerBackend.transport=api"], "docker_tcp")}
"""Benchmark name -> (kernelspec, extra argv, test target whose environment the kernel gets).
``/at-first-cell`` starts the sandbox at the first cell instead of with the wrapper (local's and,
since issue 28, docker's default; the figures below predate that: docker's row was at the first
cell and docker/at-launch the variant); the
``/pool`` rows keep a warm pool of one (and so start at launch), each measured start taking a
pooled sandbox (measured 2026-11-24 on a quiet machine, 8 starts, start ratio vs python3: local
1.13, local/at-first-cell 1.71, local/pool 1.07, docker 2.16, docker/at-launch 1.58, docker/pool
1.06, docker/api 2.10)."""


def kernel_args(name: str) -> dict:
    """start_new_kernel's arguments for benchmark kernel ``name`` (a kernelspec or a variant)."""
    import os

    spec, extra, target = VARIANTS.get(name, (name, [], None))
    env = dict(os.environ)
    if target:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from tests.support.backends import prepared

        env.update(prepared(target).kernel_env)
    options = OPTIONS.get(spec, [])
    return {"kernel_name": spec, "extra_arguments": [*options, *extra], "env": env}


def run_cell(kc, code: str, timeout: float = 300) -> None:
    reply = kc.execute_interactive(code, timeout=timeout, output_hook=lambda msg: None)
    if reply["content"]["status"] != "ok":
        raise RuntimeError(f"benchmark cell failed: {reply['content']}")


POOL_WAIT_S = 60.0


def wait_for_pool(name: str) -> None:
    """For a ``/pool`` row, wait until its pool has a sandbox waiting (the previous start's
    refill), so each start measures a take; the first start of the row fills it."""
    if "/pool" not in name:
        return
    from sandbox_kernel.backends import pool

    backend = VARIANTS[name][0].removeprefix("sandbox-")
    deadline = time.monotonic() + POOL_WAIT_S
    while not pool.waiting_records(backend) and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)  # what the filler did last (writing the record, exiting) is over


def stop_pool(name: str) -> None:
    """After a ``/pool`` row: remove what waits in its pool."""
    if "/pool" in name:
        import subprocess

        subprocess.run([sys.executable, "-m", "sandbox_kernel", "pool", "stop"], check=True, capture_output=True)


def one_start(name: str, settle: list[str] = ()) -> float:
    """Seconds from ``start_new_kernel`` to the result of a first cell (`1+1`), for one new
    kernel, once every ``/pool`` row among ``settle`` (and ``name``) has its pool refilled: a
    filler still at work would slow whatever start is measured next."""
    for other in {name, *settle}:
        wait_for_pool(other)
    return first_result(**kernel_args(name))


def first_result(**start: object) -> float:
    """Seconds from ``start_new_kernel(**start)`` to the result of a first cell (`1+1`)."""
    started = time.perf_counter()
    km, kc = start_new_kernel(**start, startup_timeout=300)
    try:
        run_cell(kc, "1+1")
        return time.perf_counter() - started
    finally:
        kc.stop_channels()
        km.shutdown_kernel()


def start_to_first_result(names: list[str], repeats: int) -> dict[str, float]:
    """The median of ``repeats`` starts of each kernel, taken in turns (one of each, then again),
    so a machine that gets busier or quieter during the run moves every row alike. A ``/pool``
    row first makes one unmeasured start, which fills its pool."""
    for name in names:
        if "/pool" in name:
            one_start(name)
    times: dict[str, list[float]] = {name: [] for name in names}
    for _ in range(repeats):
        for name in names:
            times[name].append(one_start(name, names))
    return {name: statistics.median(values) for name, values in times.items()}


def warm_round_trips(kc, rounds: int) -> tuple[float, float]:
    """``(p50, p95)`` of ``rounds`` warm round trips of `1+1`, in milliseconds, after 10 to warm up."""
    for _ in range(10):
        run_cell(kc, "1+1")
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        run_cell(kc, "1+1")
        samples.append((time.perf_counter() - started) * 1000)
    samples.sort()
    return samples[len(samples) // 2], samples[int(len(samples) * 0.95)]


def warm_and_bulk(name: str, rounds: int) -> tuple[float, float, float]:
    km, kc = start_new_kernel(**kernel_args(name), startup_timeout=300)
    try:
        p50, p95 = warm_round_trips(kc, rounds)
        started = time.perf_counter()
        run_cell(kc, "import sys\nchunk = 'x' * 1023 + '\\n'\nfor _ in range(20 * 1024): sys.stdout.write(chunk)")
        bulk = time.perf_counter() - started
        return p50, p95, bulk
    finally:
        kc.stop_channels()
        km.shutdown_kernel()


@contextlib.contextmanager
def kernel_gateway():
    """A Kernel Gateway on loopback for the run; the sandbox-gateway kernels find it through
    JUPYTER_GATEWAY_URL / JUPYTER_GATEWAY_AUTH_TOKEN. Its IOPub rate limit is off, as it should
    be on a gateway that carries large outputs (docs/how-to/gateway.md)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.targets import env_vars
    from tests.targets.gateway import KernelGateway

    server = KernelGateway("--ZMQChannelsWebsocketConnection.limit_rate=False").start()
    try:
        with env_vars(server.env()):
            yield server
    finally:
        server.close()


def byte_compile() -> None:
    """Byte-compile sandbox-kernel's modules into their ``__pycache__``, as installing its wheel
    does: a kernel is measured as installed. From an editable install with
    PYTHONDONTWRITEBYTECODE=1 in the environment (this machine's), every sandbox kernel's start
    compiled each module it imports again (about 0.08 s of the wrapper's start here), which the
    python3 row, whose ipykernel pip compiled, never paid."""
    import compileall

    import sandbox_kernel

    compileall.compile_dir(str(Path(sandbox_kernel.__file__).parent), quiet=1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--kernels", default="python3,sandbox-local,sandbox-docker,sandbox-gateway")
    parser.add_argument("--output", type=Path, help="also write the tables to this Markdown file")
    args = parser.parse_args()
    byte_compile()
    rows = []
    with contextlib.ExitStack() as stack:
        if "sandbox-gateway" in args.kernels.split(","):
            stack.enter_context(kernel_gateway())
        names = args.kernels.split(",")
        starts = start_to_first_result(names, args.starts)
        for name in names:
            stop_pool(name)
        for name in names:
            p50, p95, bulk = warm_and_bulk(name, args.rounds)
            stop_pool(name)
            rows.append((name, starts[name], p50, p95, bulk))
    base = rows[0]
    lines = [f"| kernel | start→first result (s) | warm 1+1 p50 (ms) | p95 (ms) | 20 MB stdout (s) | "
             f"ratio vs {base[0]}: start / p50 / 20 MB |", "|---|---|---|---|---|---|"]
    for name, start, p50, p95, bulk in rows:
        lines.append(f"| {name} | {start:.2f} | {p50:.2f} | {p95:.2f} | {bulk:.2f} | "
                     f"{start / base[1]:.2f} / {p50 / base[2]:.2f} / {bulk / base[4]:.2f} |")
    if "sandbox-docker" in args.kernels.split(","):
        sys.path.insert(0, str(Path(__file__).parent))
        import docker_run

        lines += ["", *docker_run.report()]
    report(lines, args.output, f"benchmarks/run.py --kernels {args.kernels} --rounds {args.rounds} "
                               f"--starts {args.starts}")


def report(lines: list[str], output: Path | None, command: str) -> None:
    """Print the table ``lines``; with ``output``, also write them there as Markdown under a
    comment naming ``command`` and this machine."""
    print("\n".join(lines))
    if output:
        machine = f"{platform.node()}: {platform.platform()}, Python {platform.python_version()}"
        output.write_text(f"<!-- {command}; {machine} -->\n" + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

"""Figures of the docker backend that the kernel table does not show, in the same run:

  per snippet   a warm ``sandbox-docker`` kernel against ``docker run --rm IMAGE python -c SNIPPET``
                (a fresh container per snippet, what most code-execution tools do), same image
  interrupt     the notebook's interrupt (``interrupt_request`` to the wrapper kernel) until the
                ``while True: pass`` cell's reply, in a container
  death         an out-of-memory kill: from the engine's ``oom`` event to the cell's error reply
  front doors   per-call cost of ``print(1)`` through each front door on a warm docker sandbox
                (the kernel, ``Sandbox.run``, ``Sandbox.run_command``, the MCP server's
                ``run_code`` over stdio) against ``docker run --rm``, in the same run

``--front-doors`` runs only the last table.

Run through ``benchmarks/run.py`` (``--kernels ...,sandbox-docker``), or alone:
``.venv/bin/python benchmarks/docker_run.py``.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import sys
import threading
import time

from jupyter_client.manager import start_new_kernel

IMAGE = "sandbox-kernel:latest"
SNIPPETS = {
    "print(1)": "print(1)",
    "numpy: sum of 10^6": "import numpy as np; print(np.arange(10**6).sum())",
    "pandas: mean of a frame": "import pandas as pd; print(pd.DataFrame({'a': range(1000)})['a'].mean())",
}
KERNEL_OPTIONS = ["--SandboxKernel.max_output_bytes=0"]


def _cell(kc, code: str, timeout: float = 120) -> dict:
    return kc.execute_interactive(code, timeout=timeout, output_hook=lambda msg: None)["content"]


def docker_run(code: str, repeats: int) -> float:
    """Median seconds of ``docker run --rm --network none IMAGE python -c CODE``."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        subprocess.run(["docker", "run", "--rm", "--network", "none", IMAGE, "python", "-c", code],
                       check=True, capture_output=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def warm_cell(kc, code: str, repeats: int) -> float:
    """Median seconds of ``code`` as a cell of a warm kernel (after one untimed run)."""
    _cell(kc, code)
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        _cell(kc, code)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def interrupt_latency(km, kc, repeats: int) -> list[float]:
    """Seconds from ``km.interrupt_kernel()`` (a notebook's interrupt button) to the reply."""
    times = []
    for _ in range(repeats):
        msg_id = kc.execute("while True: pass")
        time.sleep(1.0)
        started = time.perf_counter()
        km.interrupt_kernel()
        while True:
            reply = kc.get_shell_msg(timeout=30)
            if reply["parent_header"].get("msg_id") == msg_id:
                break
        times.append(time.perf_counter() - started)
        assert reply["content"]["ename"] == "KeyboardInterrupt", reply["content"]
    return times


def oom_detection(km, kc, repeats: int) -> list[float]:
    """Seconds from the engine's ``oom`` event of the kernel's container to the cell's
    ``SandboxDied`` reply (memory_limit 256 MiB)."""
    times = []
    for _ in range(repeats):
        _cell(kc, "1")  # a fresh sandbox after the previous death
        events = subprocess.Popen(["docker", "events", "--format", "{{json .}}", "--filter", "event=oom",
                                   "--filter", "label=org.sandbox-kernel.owner"], stdout=subprocess.PIPE, text=True)
        seen: list[float] = []
        threading.Thread(target=lambda: seen.append(json.loads(events.stdout.readline())["timeNano"] / 1e9),
                         daemon=True).start()
        time.sleep(0.3)
        reply = _cell(kc, "hog = []\nwhile True: hog.append(bytearray(16 * 1024**2))")
        reported = time.time()
        events.terminate()
        assert reply["ename"] == "SandboxDied" and "out of memory" in reply["evalue"], reply
        times.append(reported - seen[0])
    return times


def timed(call, repeats: int) -> tuple[float, float]:
    """Median and p95 seconds of ``call()`` (after one untimed call)."""
    call()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.95) - 1]


async def mcp_calls(repeats: int) -> tuple[float, float]:
    """Median and p95 seconds of the MCP server's ``run_code("print(1)")`` over stdio
    (``sandbox-kernel mcp --backend docker``, one session, after one untimed call)."""
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, args=["-m", "sandbox_kernel", "mcp", "--backend", "docker"])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await session.call_tool("run_code", {"code": "print(1)"})
        times = []
        for _ in range(repeats):
            started = time.perf_counter()
            result = await session.call_tool("run_code", {"code": "print(1)"})
            times.append(time.perf_counter() - started)
            assert not result.is_error, result
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.95) - 1]


def front_doors(repeats: int = 5, warm_repeats: int = 200) -> list[str]:
    """Markdown table: per-call cost of ``print(1)`` through each front door on a warm docker
    sandbox, against ``docker run --rm`` (a fresh container per call), same image, same run."""
    from sandbox_kernel import Sandbox

    cold = docker_run("print(1)", repeats)
    rows = [("`docker run --rm IMAGE python -c 'print(1)'`", cold, None)]
    km, kc = start_new_kernel(kernel_name="sandbox-docker", extra_arguments=KERNEL_OPTIONS, startup_timeout=300)
    try:
        kernel = timed(lambda: _cell(kc, "print(1)"), warm_repeats)
        rows.append(("sandbox-docker kernel cell (jupyter_client)", *kernel))
    finally:
        kc.stop_channels()
        km.shutdown_kernel()
    with Sandbox("docker") as sb:
        rows.append(("`Sandbox.run` (Python API)", *timed(lambda: sb.run("print(1)"), warm_repeats)))
        rows.append(("`Sandbox.run_command('echo 1')`", *timed(lambda: sb.run_command("echo 1"), warm_repeats // 4)))
    rows.append(("MCP `run_code` over stdio (`sandbox-kernel mcp`)", *asyncio.run(mcp_calls(warm_repeats))))
    lines = ["| per call, warm docker sandbox | p50 (ms) | p95 (ms) | `docker run --rm` / this |", "|---|---|---|---|"]
    for label, p50, p95 in rows:
        lines.append(f"| {label} | {p50 * 1000:.1f} | {'' if p95 is None else f'{p95 * 1000:.1f}'} | "
                     f"{cold / p50:.0f}× |")
    return lines


def report(repeats: int = 5) -> list[str]:
    """Markdown lines: the per-snippet table, then interrupt and out-of-memory figures."""
    lines = ["| snippet | `docker run --rm` per snippet (s) | warm sandbox-docker cell (ms) | ratio |", "|---|---|---|---|"]
    km, kc = start_new_kernel(kernel_name="sandbox-docker", extra_arguments=KERNEL_OPTIONS, startup_timeout=300)
    try:
        for label, code in SNIPPETS.items():
            cold = docker_run(code, repeats)
            warm = warm_cell(kc, code, repeats * 4)
            lines.append(f"| {label} | {cold:.2f} | {warm * 1000:.1f} | {cold / warm:.0f}x |")
        interrupts = interrupt_latency(km, kc, repeats)
    finally:
        kc.stop_channels()
        km.shutdown_kernel()
    km, kc = start_new_kernel(kernel_name="sandbox-docker", startup_timeout=300,
                              extra_arguments=["--DockerBackend.memory_limit=256m"])
    try:
        deaths = oom_detection(km, kc, repeats)
    finally:
        kc.stop_channels()
        km.shutdown_kernel()
    lines += ["", f"- interrupt (notebook button → `KeyboardInterrupt` reply, container): median "
                  f"{statistics.median(interrupts) * 1000:.0f} ms, max {max(interrupts) * 1000:.0f} ms ({repeats} runs)",
              f"- out of memory (engine `oom` event → `SandboxDied` reply): median {statistics.median(deaths) * 1000:.0f} ms, "
              f"max {max(deaths) * 1000:.0f} ms ({repeats} runs)"]
    return lines + ["", *front_doors(repeats)]


if __name__ == "__main__":
    print("\n".join(front_doors() if "--front-doors" in sys.argv else report()))

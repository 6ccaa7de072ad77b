"""Figures of the docker backend that the kernel table does not show, in the same run:

  per snippet   a warm ``sandbox-docker`` kernel against ``docker run --rm IMAGE python -c SNIPPET``
                (a fresh container per snippet, what most code-execution tools do), same image
  interrupt     the notebook's interrupt (``interrupt_request`` to the wrapper kernel) until the
                ``while True: pass`` cell's reply, in a container
  death         an out-of-memory kill: from the engine's ``oom`` event to the cell's error reply

Run through ``benchmarks/run.py`` (``--kernels ...,sandbox-docker``), or alone:
``.venv/bin/python benchmarks/docker_run.py``.
"""

from __future__ import annotations

import json
import statistics
import subprocess
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
    return lines


if __name__ == "__main__":
    print("\n".join(report()))

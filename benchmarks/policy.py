"""What the output policy costs, beside the unsanitized path (``trust``), in one run.

    .venv/bin/python benchmarks/policy.py [--rounds 300] [--kernel sandbox-local]

  sanitize 1 MB   milliseconds to police a 1 MB pandas HTML table (``DataFrame.to_html``) in
                  process: ``sanitize`` vs ``trust`` (which returns the bundle untouched), and
                  the ratio against one bare ``nh3.clean`` of the same table in the same run
                  (the floor of any sanitizer that re-serializes; the policy's own share is the rest)
  warm 1+1        p50/p95 of a warm ``1+1`` round trip through the kernel started from its
                  kernelspec, with ``--SandboxKernel.output_policy=sanitize`` (the default) vs
                  ``trust``; the ratio is sanitize/trust
  1 MB table      seconds to display the 1 MB table from the sandbox through the kernel, both ways

These machines are noisy: compare the ratios of one run, not absolutes.
"""

from __future__ import annotations

import argparse
import statistics
import time

from jupyter_client.manager import start_new_kernel

TABLE = "import numpy as np, pandas as pd\ntable = pd.DataFrame(np.random.default_rng(0).random((4400, 8))).to_html()"


def sanitize_ms(repeats: int = 20) -> dict[str, float]:
    import numpy as np
    import pandas as pd

    from sandbox_kernel.policy import OutputPolicy

    html = pd.DataFrame(np.random.default_rng(0).random((4400, 8))).to_html()
    import nh3

    result = {"size_mb": len(html) / 1e6}
    runs = {mode: (lambda policy: lambda: policy.bundle({"text/html": html, "text/plain": "table"}))(OutputPolicy(mode))
            for mode in ("trust", "sanitize")}
    runs["nh3"] = lambda: nh3.clean(html)
    samples: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):  # interleaved, so load from elsewhere weighs on all three alike
        for name, run in runs.items():
            started = time.perf_counter()
            run()
            samples[name].append((time.perf_counter() - started) * 1000)
    return {**result, **{name: statistics.median(values) for name, values in samples.items()}}


def kernel_figures(kernel: str, mode: str, rounds: int) -> tuple[float, float, float]:
    km, kc = start_new_kernel(kernel_name=kernel, startup_timeout=300,
                              extra_arguments=[f"--SandboxKernel.output_policy={mode}"])
    try:
        run = lambda code: kc.execute_interactive(code, timeout=300, output_hook=lambda msg: None)  # noqa: E731
        for _ in range(10):
            run("1+1")
        samples = []
        for _ in range(rounds):
            started = time.perf_counter()
            run("1+1")
            samples.append((time.perf_counter() - started) * 1000)
        samples.sort()
        run(TABLE)
        started = time.perf_counter()
        run("from IPython.display import HTML\nHTML(table)")
        return samples[len(samples) // 2], samples[int(len(samples) * 0.95)], time.perf_counter() - started
    finally:
        kc.stop_channels()
        km.shutdown_kernel()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--kernel", default="sandbox-local")
    args = parser.parse_args()
    cost = sanitize_ms()
    print(f"police a {cost['size_mb']:.2f} MB pandas HTML table in process: sanitize {cost['sanitize']:.1f} ms, "
          f"trust {cost['trust']:.3f} ms, one bare nh3.clean {cost['nh3']:.1f} ms (median of 20); "
          f"sanitize/nh3 {cost['sanitize'] / cost['nh3']:.2f}")
    figures = {mode: kernel_figures(args.kernel, mode, args.rounds) for mode in ("trust", "sanitize")}
    print(f"\n| {args.kernel} policy | warm 1+1 p50 (ms) | p95 (ms) | 1 MB table shown (s) |")
    print("|---|---|---|---|")
    for mode, (p50, p95, table) in figures.items():
        print(f"| {mode} | {p50:.2f} | {p95:.2f} | {table:.3f} |")
    (t50, _, ttable), (s50, _, stable) = figures["trust"], figures["sanitize"]
    print(f"\nratio sanitize/trust: warm p50 {s50 / t50:.2f}, 1 MB table {stable / ttable:.2f}")


if __name__ == "__main__":
    main()

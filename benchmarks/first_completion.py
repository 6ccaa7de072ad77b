"""A new notebook's first Tab: from kernel start to the first completion reply, against a plain
ipykernel, in one run.

    .venv/bin/python benchmarks/first_completion.py [--repeats 5] [--after 0,1] [--kernels python3,...]

Each start is a new kernel from its installed kernelspec through jupyter_client, as a frontend
starts one: ``start_kernel``, then ``kernel_info`` until answered (the frontend connected), then,
``--after`` seconds later (0: at once; 1: about the least a person takes to click into a cell and
type), a ``complete_request`` for ``zi`` (a Tab), until the reply lists ``zip``:
  ready      seconds from start_kernel() to the kernel_info reply
  first Tab  seconds from start_kernel() to the completion reply
  Tab wait   seconds from the complete_request to its reply; JupyterLab's completer gives up after
             about 1 s, so a wait over 1 s (or a reply without ``zip``: inf) is a Tab that shows nothing
Kernels are started in turns (one of each, then again) so load moves every row alike; ratios are
against the first kernel. ``sandbox-docker/at-first-cell`` is docker's sandbox started at the first
request, the default before issue 28 (now it starts with the kernel, as local's does).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from jupyter_client.manager import KernelManager

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import kernel_args  # noqa: E402 - benchmarks/ is not a package

DEFAULT = ["python3", "sandbox-local", "sandbox-docker", "sandbox-docker/api", "sandbox-docker/at-first-cell"]


def first_tab(name: str, after: float) -> tuple[float, float, float]:
    """``(ready, first Tab, Tab wait)`` in seconds for one new kernel ``name``, its first Tab
    ``after`` seconds after it was ready."""
    args = kernel_args(name)
    started = time.perf_counter()
    km = KernelManager(kernel_name=args["kernel_name"])
    km.start_kernel(extra_arguments=args["extra_arguments"], env=args["env"])
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=300)
        ready = time.perf_counter()
        time.sleep(after)
        asked = time.perf_counter()
        reply = kc.complete("zi", 2, reply=True, timeout=300)
        done = time.perf_counter()
        if "zip" not in reply["content"]["matches"]:  # an empty answer: a Tab that shows nothing
            return ready - started, float("inf"), float("inf")
        return ready - started, done - started, done - asked
    finally:
        kc.stop_channels()
        km.shutdown_kernel()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--after", default="0,1", help="seconds between ready and the Tab, comma-separated")
    parser.add_argument("--kernels", default=",".join(DEFAULT))
    args = parser.parse_args()
    names, afters = args.kernels.split(","), [float(value) for value in args.after.split(",")]
    runs: dict[tuple[str, float], list[tuple[float, float, float]]] = {(n, a): [] for a in afters for n in names}
    for _ in range(args.repeats):
        for name, after in runs:
            runs[name, after].append(first_tab(name, after))
    print(f"| kernel | Tab after ready s | ready s | first Tab s | vs {names[0]} | Tab wait s (median, max) "
          "| Tabs over 1 s |")
    print("|---|---|---|---|---|---|---|")
    for (name, after), values in runs.items():
        base = statistics.median(run[1] for run in runs[names[0], after])
        ready, first, wait = (statistics.median(column) for column in zip(*values))
        late = sum(run[2] > 1.0 for run in values)
        print(f"| {name} | {after:g} | {ready:.2f} | {first:.2f} | {first / base:.2f}x | {wait:.2f}, "
              f"{max(run[2] for run in values):.2f} | {late}/{len(values)} |")


if __name__ == "__main__":
    main()

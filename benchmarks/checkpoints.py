"""What checkpoints cost and how fast they come back, in one run (docs/how-to/checkpoints.md).

    .venv/bin/python benchmarks/checkpoints.py [--backends local,docker] [--restores 20] [--rounds 3] [--min-seconds 1] [--overhead local]

For each backend, through the Python API (the same session as every door):
  restore   seconds of ``restore()`` of a session holding 200 MB of numpy/pandas, until its kernel
            answers again (p50, p95 of ``--restores``); the issue's bound: p50 at most 0.5 s
  take      seconds of one ``checkpoint()`` of that session (the fork and the keeper's answer)
  overhead  the wall time of a sequence of data-science cells (pandas group-bys and joins, numpy,
            a scikit-learn fit) with automatic checkpoints (checkpoint_min_seconds=1) against
            without (-1), in interleaved rounds of one sandbox each: the ratio over the cells that
            ran at least 1 s, and over those below it (the bound: at most 1.05, and 1.00)
  fork(4)   seconds of ``fork(4)`` of that session, and the memory each fork holds of its own
            (Private_Clean + Private_Dirty of its process) right after, and after it rewrote a
            50 MB column
No corpus of real notebooks ships with the project, so the cells are written here (CELLS), in the
shape of such notebooks: load, clean, aggregate, fit, with short cells between.
"""

from __future__ import annotations

import argparse
import statistics
import time

from sandbox_kernel import Sandbox

STATE = ("import numpy as np, pandas as pd\n"
         "df = pd.DataFrame(np.random.RandomState(0).rand(200 * 1024**2 // 32, 4), columns=list('abcd'))")
"""200 MB of pandas (numpy underneath)."""

CELLS = [
    "import numpy as np, pandas as pd\nrng = np.random.RandomState(0)\n"
    "sales = pd.DataFrame({'store': rng.randint(0, 500, 3_000_000), 'item': rng.randint(0, 2000, 3_000_000),\n"
    "                      'qty': rng.poisson(3, 3_000_000), 'price': rng.gamma(2.0, 5.0, 3_000_000)})",
    "sales['revenue'] = sales.qty * sales.price",
    "by_store = sales.groupby('store').revenue.agg(['sum', 'mean', 'count'])",
    "by_store.head()",
    "items = pd.DataFrame({'item': np.arange(2000), 'category': rng.randint(0, 40, 2000)})\n"
    "joined = sales.merge(items, on='item')\n"
    "pivot = joined.pivot_table(index='store', columns='category', values='revenue', aggfunc='sum')",
    "pivot.shape",
    "m = rng.rand(1200, 1200)\nfor _ in range(4):\n    m = np.linalg.qr(m)[0] @ m",
    "from sklearn.linear_model import Ridge\nX = pivot.fillna(0).to_numpy()\nmodel = Ridge().fit(X[:, 1:], X[:, 0])",
    "float(model.score(X[:, 1:], X[:, 0]))",
    "sales = sales[sales.qty > 0].copy()\nsales['month'] = rng.randint(1, 13, len(sales))\n"
    "monthly = sales.groupby(['store', 'month']).revenue.sum().unstack()",
    "len(monthly)",
]


def restores(name: str, options: dict, count: int) -> dict[str, float]:
    with Sandbox(name, checkpoint_min_seconds=-1, **options) as sb:
        sb.run(STATE)
        started = time.perf_counter()
        taken = sb.checkpoint("bench")
        take = time.perf_counter() - started
        times = []
        for i in range(count):
            sb.run(f"df.iloc[:, 0] = {i}")  # the kernel's state moves on; its 50 MB column diverges
            started = time.perf_counter()
            sb.restore(taken)
            times.append(time.perf_counter() - started)
        assert sb.run("round(float(df.iloc[0, 0]), 6) != 0").text == "True"
    times.sort()
    return {"take": take, "p50": statistics.median(times), "p95": times[int(0.95 * (len(times) - 1))]}


def notebook(name: str, options: dict, threshold: float) -> list[float]:
    """Seconds of each cell of :data:`CELLS`, in a fresh sandbox with ``checkpoint_min_seconds``."""
    with Sandbox(name, checkpoint_min_seconds=threshold, **options) as sb:
        sb.run("1")
        seconds = []
        for code in CELLS:
            started = time.perf_counter()
            result = sb.run(code)
            assert result.error is None, result.error
            seconds.append(time.perf_counter() - started)
        sb.run("1")  # the last automatic checkpoint, before the sandbox goes
    return seconds


def overhead(name: str, options: dict, rounds: int, threshold: float = 1.0) -> dict[str, float]:
    """Automatic checkpoints after the cells that ran at least ``threshold`` seconds against none:
    the ratio of the wall times (medians over ``rounds``) of the cells at or over it, and under it."""
    on, off = [], []
    for _ in range(rounds):  # interleaved: the machine's load falls on both alike
        off.append(notebook(name, options, -1))
        on.append(notebook(name, options, threshold))
    base = [statistics.median(cell) for cell in zip(*off)]
    with_checkpoints = [statistics.median(cell) for cell in zip(*on)]
    long_cells = [i for i, s in enumerate(base) if s >= threshold]
    short_cells = [i for i, s in enumerate(base) if s < threshold]

    def ratio(cells: list[int]) -> float:
        return sum(with_checkpoints[i] for i in cells) / max(1e-9, sum(base[i] for i in cells))

    return {"long": ratio(long_cells), "short": ratio(short_cells), "long_cells": len(long_cells),
            "short_cells": len(short_cells), "long_s": sum(base[i] for i in long_cells),
            "short_s": sum(base[i] for i in short_cells)}


PRIVATE = ("sum(int(line.split()[1]) for line in open('/proc/self/smaps_rollup') "
           "if line.startswith(('Private_Clean:', 'Private_Dirty:'))) * 1024")


def forks(name: str, options: dict) -> dict[str, float]:
    with Sandbox(name, checkpoint_min_seconds=-1, **options) as sb:
        sb.run(STATE)
        started = time.perf_counter()
        made = sb.fork(4)
        seconds = time.perf_counter() - started
        try:
            fresh = statistics.mean(int(f.run(PRIVATE).text) for f in made)
            for i, f in enumerate(made):
                f.run(f"df['a'] = {i}")
            written = statistics.mean(int(f.run(PRIVATE).text) for f in made)
        finally:
            for f in made:
                f.close()
    return {"seconds": seconds, "fresh": fresh, "written": written}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backends", default="local,docker")
    parser.add_argument("--restores", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--min-seconds", type=float, default=1.0,
                        help="checkpoint_min_seconds of the overhead step (on a quiet machine no cell of CELLS "
                             "runs 1 s: 0.25 gives the long cells their checkpoints)")
    parser.add_argument("--overhead", default="local",
                        help="the backends of the overhead step (CELLS fit a scikit-learn model, which the docker "
                             "image does not hold)")
    parser.add_argument("--memory-limit", default="3g", help="the docker sandbox's (200 MB, a fork's, the checkpoints')")
    args = parser.parse_args()
    at = f"{args.min_seconds:g} s"
    print(f"| backend | take | restore p50 | restore p95 | cells ≥ {at}: ratio (n, s without) | cells < {at}: ratio "
          "(n, s without) | fork(4) | per fork: fresh | after 50 MB written |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in args.backends.split(","):
        options = {"memory_limit": args.memory_limit} if name == "docker" else {}
        r, f = restores(name, options, args.restores), forks(name, options)
        if name in args.overhead.split(","):
            o = overhead(name, options, args.rounds, args.min_seconds)
            cells = (f"{o['long']:.3f}× ({o['long_cells']}, {o['long_s']:.2f} s) | {o['short']:.3f}× "
                     f"({o['short_cells']}, {o['short_s']:.2f} s)")
        else:
            cells = "not run | not run"
        mib = 1024**2
        print(f"| {name} | {r['take']:.3f} s | {r['p50']:.3f} s | {r['p95']:.3f} s | {cells} | {f['seconds']:.2f} s | "
              f"{f['fresh'] / mib:.1f} MiB | {f['written'] / mib:.1f} MiB |", flush=True)


if __name__ == "__main__":
    main()

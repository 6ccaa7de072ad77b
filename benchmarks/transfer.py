"""Moving a DataFrame in and out of a docker sandbox: ``put``/``get`` (what ``%%sandbox -i``/``-o``
run: Arrow IPC through the backend's files, checked on the host) against doing it by hand
(``to_parquet``, ``upload``, ``read_parquet`` in the sandbox; and back with ``download``), in the
same run.

    .venv/bin/python benchmarks/transfer.py [--rows 1000000] [--repeats 5]

The sandbox is the docker backend with ``packages=["pyarrow"]`` (the default image has no pyarrow)
and the tests' docker set-up (tests/targets). Medians of ``--repeats`` runs, in seconds; compare
ratios, not absolutes (2 shared cores).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from sandbox_kernel import Sandbox  # noqa: E402
from tests import targets  # noqa: E402
from tests.support.backends import prepared  # noqa: E402


def frame(rows: int) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame({"id": np.arange(rows, dtype=np.int64), "x": rng.random(rows),
                         "when": pd.date_range("2026-01-01", periods=rows, freq="s"),
                         "label": rng.choice(["red", "green", "blue"], rows)})


def timed(work, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    df = frame(args.rows)
    setup = prepared("docker")
    with targets.env_vars(setup.kernel_env):
        sb = Sandbox("docker", **{**setup.traits, "packages": ["pyarrow"]})
    with sb, tempfile.TemporaryDirectory() as tmp:
        sb.run("import pandas as pd")
        local = Path(tmp) / "df.parquet"

        def by_hand_in() -> None:
            df.to_parquet(local)
            sb.upload(local, "df.parquet")
            assert sb.run("df = pd.read_parquet('df.parquet'); len(df)").status == "ok"

        def by_hand_out() -> None:
            assert sb.run("df.to_parquet('out.parquet')").status == "ok"
            sb.download("out.parquet", local)
            assert len(pd.read_parquet(local)) == args.rows

        def put() -> None:
            sb.put("df", df)

        def get() -> None:
            assert len(sb.get("df")) == args.rows

        rows = [("in", timed(put, args.repeats), timed(by_hand_in, args.repeats)),
                ("out", timed(get, args.repeats), timed(by_hand_out, args.repeats))]
    size = df.memory_usage(deep=True).sum() / 2**20
    print(f"DataFrame: {args.rows:,} rows x 4 columns (int64, float64, datetime64, str), {size:.0f} MiB in memory; "
          f"docker; median of {args.repeats}")
    print("| direction | put/get (-i/-o), s | Parquet + upload/download by hand, s | ratio |")
    print("|---|---|---|---|")
    for direction, ours, theirs in rows:
        print(f"| {direction} | {ours:.2f} | {theirs:.2f} | {ours / theirs:.2f} |")


if __name__ == "__main__":
    main()

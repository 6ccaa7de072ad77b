"""What issue 30's files features cost, measured in the same run: a warm cell with the artifact
listing on against off (local and docker; a working directory with a few files, then with a
folder of 10 000), and a sandbox's start with a workspace (docker: bound on ipc, copied on api)
against without.

    .venv/bin/python benchmarks/files.py [--repeats 30] [--workspace-mb 50]

Medians in milliseconds (starts: seconds), and their ratios; compare ratios, not absolutes
(2 shared cores). Uses the tests' set-up of each backend (tests/targets).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sandbox_kernel import Sandbox  # noqa: E402
from tests import targets  # noqa: E402
from tests.support.backends import prepared  # noqa: E402


def median_ms(sb: Sandbox, code: str, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        sb.run(code)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def sandbox(target: str, **options) -> Sandbox:
    setup = prepared(target)
    with targets.env_vars(setup.kernel_env):
        return Sandbox(targets.backend_of(target), **{**setup.traits, **options})


def warm_cells(target: str, repeats: int) -> None:
    """``1+1`` with and without artifacts, then the same with 10 000 files in the working directory."""
    rows = {}
    with sandbox(target) as on, sandbox(target, artifacts=False) as off:
        for sb in (on, off):
            sb.run("1+1")
        rows["few files"] = (median_ms(on, "1+1", repeats), median_ms(off, "1+1", repeats))
        make = "import os\nos.makedirs('many', exist_ok=True)\nfor i in range(10_000): open(f'many/{i}', 'w').close()"
        for sb in (on, off):
            sb.run(make)
        rows["a folder of 10 000"] = (median_ms(on, "1+1", repeats), median_ms(off, "1+1", repeats))
    for what, (on_ms, off_ms) in rows.items():
        print(f"{target:10} warm cell, {what:18}: artifacts on {on_ms:6.2f} ms, off {off_ms:6.2f} ms, "
              f"ratio {on_ms / off_ms:.2f}")


def starts(target: str, folder: str, repeats: int) -> None:
    """Start to first result with a read-only workspace against without."""
    def once(**options) -> float:
        start = time.perf_counter()
        with sandbox(target, **options) as sb:
            sb.run("1")
        return time.perf_counter() - start

    bare = statistics.median(once() for _ in range(repeats))
    shown = statistics.median(once(workspace="ro", workspace_dir=folder) for _ in range(repeats))
    print(f"{target:10} start + first cell: workspace {shown:.2f} s, none {bare:.2f} s, ratio {shown / bare:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--workspace-mb", type=int, default=50)
    args = parser.parse_args()
    for target in ("local", "docker"):
        warm_cells(target, args.repeats)
    with tempfile.TemporaryDirectory() as folder:
        os.chmod(folder, 0o755)  # docker's kernel (uid 1000) reads a bound folder
        for i in range(100):
            Path(folder, f"part-{i:03}.bin").write_bytes(os.urandom(args.workspace_mb * 1024 * 1024 // 100))
        print(f"workspace: {args.workspace_mb} MB in 100 files")
        for target in ("local", "docker", "docker_api"):
            starts(target, folder, max(3, args.repeats // 10))


if __name__ == "__main__":
    main()

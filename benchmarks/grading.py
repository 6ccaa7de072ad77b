"""A class's grading through sandboxes: nbgrader's ``autograde`` of 30 students' notebooks (the
course of tests/support/grading.py: two graded answers each), every notebook in its own
``sandbox-docker`` sandbox taken from a warm pool (as large as the class by default, filled before
the batch is timed: a teacher warms it before grading), against the same batch on plain
``python3``, measured in the same run, alternating (python3, sandbox, python3, sandbox ...):

  seconds   wall time of ``nbgrader autograde ps1`` for the whole class (median of the rounds)
  ratio     against python3's median in this run

Two batches: 30 ordinary submissions, and 29 plus one hostile submission that on python3 too is
harmless to the host: an endless loop (stopped by nbgrader's Execute.timeout, 10 s here), 50 MB of
output, a read of another student's file. The fork bomb of tests/test_grading.py is left out: on
python3 it would take the machine down.

    .venv/bin/python benchmarks/grading.py [--students 30] [--rounds 2] [--pool 30] [--output FILE]

Needs the Docker engine and the sandbox image (.ci/docker-setup.sh), nbgrader (the test extra).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.grading import (  # noqa: E402
    ENDLESS,
    HUGE_OUTPUT,
    READ_OTHERS,
    SOLVED,
    WRONG,
    make_course,
    nbgrader,
    release,
    submit,
)

POOLED = "sandbox-docker-pool"


def pooled_kernelspec(folder: Path, pool: int) -> dict[str, str]:
    """A ``sandbox-docker`` kernelspec with a warm pool of ``pool``, in a Jupyter path of its own."""
    spec = folder / "kernels" / POOLED
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "sandbox_kernel", "-f", "{connection_file}", "--SandboxKernel.backend=docker",
            f"--DockerBackend.pool_size={pool}", "--DockerBackend.pool_ttl=120"]  # what waits at the end goes by itself
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": POOLED, "language": "python",
                                                  "interrupt_mode": "message"}))
    return {"JUPYTER_PATH": str(folder)}


def warm(env: dict[str, str], pool: int, timeout: float = 300) -> None:
    """Start one kernel of the pooled kernelspec (its start fills the pool in the background) and
    wait until ``pool`` sandboxes of its configuration wait (the registry's folder of its key,
    the one written last)."""
    import os

    from jupyter_client.manager import start_new_kernel

    from sandbox_kernel.backends.pool import Registry, pool_root

    saved = os.environ.get("JUPYTER_PATH")
    os.environ["JUPYTER_PATH"] = env["JUPYTER_PATH"]
    try:
        km, kc = start_new_kernel(kernel_name=POOLED, startup_timeout=120)
        kc.execute_interactive("1", timeout=120, output_hook=lambda msg: None)
        kc.stop_channels()
        km.shutdown_kernel()
    finally:
        os.environ.pop("JUPYTER_PATH") if saved is None else os.environ.update(JUPYTER_PATH=saved)
    root = pool_root()
    key = max((root / "docker").iterdir(), key=lambda folder: folder.stat().st_mtime).name
    deadline = time.monotonic() + timeout
    while len(Registry("docker", key, root).entries()) < pool and time.monotonic() < deadline:
        time.sleep(1)


def batch(kernel: str, students: int, hostile: bool, env: dict[str, str]) -> float:
    """Seconds of ``nbgrader autograde`` for a fresh course of ``students`` on ``kernel``."""
    with tempfile.TemporaryDirectory(prefix="sandbox-kernel-grading-") as tmp:
        root = Path(tmp)
        make_course(root, kernel, timeout=10)
        names = ["ada"] + [f"student{i:02d}" for i in range(1, students)]
        release(root, names)
        for i, name in enumerate(names):
            extra = [ENDLESS, HUGE_OUTPUT, READ_OTHERS] if hostile and i == students - 1 else []
            submit(root, name, SOLVED if i % 3 else WRONG, extra=extra)
        started = time.monotonic()
        nbgrader(root, "autograde", "ps1", env=env)
        return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--pool", type=int, default=30)
    parser.add_argument("--output", help="also write the table (markdown) to this file")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sandbox-kernel-specs-") as specs:
        env = pooled_kernelspec(Path(specs), args.pool)
        rows = []
        for hostile in (False, True):
            times: dict[str, list[float]] = {"python3": [], POOLED: []}
            for _ in range(args.rounds):
                for kernel in times:
                    if kernel == POOLED:
                        warm(env, args.pool)
                    times[kernel].append(batch(kernel, args.students, hostile, env))
                    print(f"{kernel} hostile={hostile}: {times[kernel][-1]:.1f} s", flush=True)
            base = statistics.median(times["python3"])
            what = f"{args.students} students" + (", one hostile" if hostile else "")
            for kernel, seconds in times.items():
                rows.append(f"| {what} | {kernel} | {statistics.median(seconds):.1f} | "
                            f"{statistics.median(seconds) / base:.2f} | {', '.join(f'{s:.1f}' for s in seconds)} |")
    table = "\n".join(["| batch | kernel | seconds (median) | ratio vs python3 | rounds |", "|---|---|---|---|---|", *rows])
    print(table)
    if args.output:
        Path(args.output).write_text(table + "\n")


if __name__ == "__main__":
    main()

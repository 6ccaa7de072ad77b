"""What a local sandbox leaves when the process that started it is killed before removing it:
its scratch and connection directories (``sandbox-local-[conn-]PID-XXXX`` in the temporary
directory, PID the owner's) and its kernel, which runs in a session of its own and outlives its
owner for up to a second (ipykernel's parent poller), writing files (jedi's cache) into the
scratch directory meanwhile. The kernel's pid is recorded in the connection directory so the
kernel is stopped before the directories go."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
from pathlib import Path

from ...runtime.owners import start_time
from . import pooled

KERNEL_RECORD = "kernel.pid"
"""The file of the connection directory that names the kernel: ``PID STARTTIME``."""


def record_kernel(runtime: Path, pid: int) -> None:
    """Write the kernel's pid and start time into its connection directory ``runtime``."""
    (runtime / KERNEL_RECORD).write_text(f"{pid} {start_time(pid)}")


def _stop_kernel(runtime: Path) -> None:
    """Kill the process group of the kernel ``runtime`` records, if that very process still runs."""
    with contextlib.suppress(OSError, ValueError):
        pid, started = (runtime / KERNEL_RECORD).read_text().split()
        if start_time(int(pid)) == started:
            os.killpg(int(pid), signal.SIGKILL)


def remove_leftovers() -> list[str]:
    """Remove the sandboxes whose owning process is gone (killed before it could remove them):
    their kernels first, then their directories; and pooled kernels no session can use
    (:func:`.pooled.sweep`). Returns the directories removed."""
    gone = []
    for path in Path(tempfile.gettempdir()).glob("sandbox-local-*"):
        pid = path.name.removeprefix("sandbox-local-").removeprefix("conn-").split("-")[0]
        if pid.isdigit() and not pooled.alive(int(pid)):
            gone.append(path)
    for path in gone:
        _stop_kernel(path)
    for path in gone:
        shutil.rmtree(path, ignore_errors=True)
    pooled.sweep()
    return [str(path) for path in gone]

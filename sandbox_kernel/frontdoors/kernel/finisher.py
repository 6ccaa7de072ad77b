"""What removes a sandbox whose kernel was killed while it removed it.

A kernel that gets SIGTERM removes its sandbox before it exits (:meth:`.SandboxKernel.end_on_sigterm`),
but whoever sent it may not wait: jupyter_client sends SIGKILL to the kernel's process group 2.5 s
after its SIGTERM (half the ``shutdown_wait_time`` a Jupyter server gives a kernel), and a
removal can take longer on a busy engine (measured: a server stopped with 9 sandbox-docker
kernels on 2 loaded cores SIGKILLed 9 of them, and 3 left their volume and host directory).

So the SIGTERM starts a finisher, ``python -m sandbox_kernel.frontdoors.kernel.finisher BACKEND
--kernel-pid=PID`` (whose it is, for ``ps``), in a session of its own (a signal to the kernel's
process group does not reach it), reading a pipe from the kernel. The kernel writes ``done`` once its sandbox is removed; if the pipe ends
without it (the kernel was killed first), the finisher removes what the backend's sandboxes of
gone processes left on this host (:meth:`~sandbox_kernel.backends.base.Backend.remove_leftovers`:
a docker sandbox's container, volumes and host directory, a local one's scratch directories), as
the next sandbox start or ``sandbox-kernel gc`` would, but now.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys

from ...backends.base import Backend

DONE = b"done\n"


def start(backend: Backend) -> subprocess.Popen | None:
    """A finisher for ``backend``'s sandbox; None for a backend whose sandboxes leave nothing on
    this host (it keeps :meth:`Backend.remove_leftovers`), or if it cannot start."""
    if type(backend).remove_leftovers.__func__ is Backend.remove_leftovers.__func__:
        return None
    try:
        return subprocess.Popen([sys.executable, "-m", __name__, backend.name, f"--kernel-pid={os.getpid()}"],
                                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=_log(), start_new_session=True)
    except OSError:
        return None


def _log() -> int:
    """This process's own standard error (the server's log) for the finisher's one line: the
    kernel's ``sys.stderr`` is ipykernel's stream, whose ``fileno()`` is the original's copy
    (its fd 2 is a pipe that dies with the kernel)."""
    try:
        return sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return subprocess.DEVNULL


def done(finisher: subprocess.Popen | None) -> None:
    """Tell ``finisher`` the sandbox is removed: it exits without looking for leftovers."""
    if finisher is not None and finisher.stdin is not None:
        with contextlib.suppress(OSError):
            finisher.stdin.write(DONE)
            finisher.stdin.close()


def main(backend: str) -> int:
    """Wait for the kernel's ``done`` or its end; after its end, remove the leftovers."""
    if sys.stdin.buffer.read() == DONE:
        return 0
    from ...backends import get_backend_class  # the backend's module: only after a kill

    try:
        removed = get_backend_class(backend).remove_leftovers()
    except Exception as exc:  # noqa: BLE001 - the engine went too: the next start or `sandbox-kernel gc` removes them
        removed, failed = [], exc
    else:
        failed = None
    with contextlib.suppress(OSError):  # the server's log, if it is still open
        if removed:
            print(f"sandbox-kernel: removed what a killed kernel's sandbox left: {', '.join(removed)}", file=sys.stderr)
        if failed is not None:
            print(f"sandbox-kernel: could not remove what a killed kernel's sandbox left ({failed}); "
                  "`sandbox-kernel gc` removes it", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))

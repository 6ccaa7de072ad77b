"""Locks of this machine, for the few tests that act on what every test run shares.

Almost everything a test touches is its run's and its worker's own (:mod:`.isolation`). What
cannot be: ``sandbox-kernel gc --volumes`` removes every unused workspace volume of the engine,
and the JupyterHub rig's two Linux users (each with one rootless Podman engine) exist once per
machine. Tests that act on such a resource hold its lock exclusively; tests that only need it to
stay as they left it hold it shared. Two clones running their suites at once, or two xdist
workers of one run, then never see each other's changes.

The locks are ``flock(2)`` locks on files in ``$SANDBOX_KERNEL_TEST_LOCKS`` (default
``TMPDIR/sandbox-kernel-test-locks``), so a killed run releases them. ``flock`` itself would let a
steady stream of shared holders starve an exclusive one; a second file, the turnstile, gives the
exclusive holder its turn: every taker passes it, and the exclusive one keeps it until it holds
the lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

WORKSPACE_VOLUMES = "workspace-volumes"
"""Held shared while a test keeps a workspace volume between sandboxes; exclusively by the
test of ``gc --volumes`` (which removes every workspace volume no container uses)."""
HUB_USERS = "hub-users"
"""Held exclusively by the tests of the hub's users and their rootless engines (tests/hub.py)."""


def lock_dir() -> Path:
    """The folder of the lock files (made, mode 1777, if missing: any user's run may lock)."""
    folder = Path(os.environ.get("SANDBOX_KERNEL_TEST_LOCKS") or Path(tempfile.gettempdir()) / "sandbox-kernel-test-locks")
    if not folder.is_dir():
        folder.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):
            folder.chmod(0o1777)
    return folder


def _open(path: Path):
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    return os.fdopen(fd, "r+")


@contextlib.contextmanager
def machine_lock(name: str, *, exclusive: bool, timeout: float = 1800.0) -> Iterator[float]:
    """Hold the machine's lock ``name`` for the block, shared or ``exclusive``; yields the
    seconds spent waiting for it.

    Raises:
        TimeoutError: it was not had within ``timeout`` seconds (a run that holds it is stuck).
    """
    folder = lock_dir()
    started = time.monotonic()
    with _open(folder / f"{name}.turnstile") as turnstile, _open(folder / f"{name}.lock") as lock:
        _take(turnstile, fcntl.LOCK_EX, name, started, timeout)
        try:
            _take(lock, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH, name, started, timeout)
        finally:
            fcntl.flock(turnstile, fcntl.LOCK_UN)
        try:
            yield time.monotonic() - started
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _take(file, operation: int, name: str, started: float, timeout: float) -> None:
    while True:
        try:
            fcntl.flock(file, operation | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() - started > timeout:
                raise TimeoutError(f"the machine lock {name!r} ({file.name}) was held by another test run for "
                                   f"more than {timeout:.0f} s") from None
            time.sleep(0.2)

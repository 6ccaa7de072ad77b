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

A test holds a lock with the marker ``machine_lock(NAME, exclusive=False)`` (nbval notebooks get
theirs from tests/plugin/tiers.py), from its set-up to its teardown, or across consecutive tests
that want the same lock. Tests that hold one exclusively run in the xdist group ``machine``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

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


# -- the marker: ``@pytest.mark.machine_lock(NAME, exclusive=False)`` ---------------------------
_HELD = pytest.StashKey[dict]()


def locks_of(item: pytest.Item | None) -> set[tuple[str, bool]]:
    """The machine locks ``item`` holds while it runs: ``{(name, exclusive)}``."""
    if item is None:
        return set()
    wanted: dict[str, bool] = {}
    for mark in item.iter_markers("machine_lock"):  # a module's shared one, a test's exclusive one: exclusive
        wanted[mark.args[0]] = wanted.get(mark.args[0], False) or bool(mark.kwargs.get("exclusive", False))
    return set(wanted.items())


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "machine_lock(name, exclusive=False): hold the machine lock NAME "
                                       "(tests/plugin/locks.py) while the test, its fixtures included, runs; exclusive "
                                       "ones run in the xdist group 'machine'")
    config.stash[_HELD] = {}


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    """Take the item's machine locks before its set-up; keep them while the next item wants the
    same (a module's tests that share its fixtures), else let them go after its teardown."""
    held: dict = item.config.stash[_HELD]
    for name, exclusive in sorted(locks_of(item)):
        if (name, exclusive) not in held:
            lock = machine_lock(name, exclusive=exclusive)
            waited = lock.__enter__()
            held[name, exclusive] = lock
            if waited > 1:
                item.add_report_section("setup", "machine lock", f"waited {waited:.0f} s for the machine lock {name!r}")
    try:
        return (yield)
    finally:
        for key in set(held) - locks_of(nextitem):
            held.pop(key).__exit__(None, None, None)

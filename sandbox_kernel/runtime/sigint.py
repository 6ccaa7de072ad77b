"""SIGINT (Ctrl-C; the notebook's interrupt button signals the kernel process) while a front
door waits for its sandbox: the one place that installs and restores a handler for it.

The kernel schedules ``backend.interrupt()`` from the handler (ipykernel's own
``_cancel_on_sigint`` pattern); the magic only counts the signals and acts between queue reads,
since a KeyboardInterrupt raised inside ``queue.Queue.get`` can leave the queue's lock held.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterator


@contextlib.contextmanager
def on_sigint(handler: Callable[[], None]) -> Iterator[bool]:
    """While the block runs, SIGINT calls ``handler()`` (in the main thread, between two Python
    bytecodes: it must not take locks) instead of raising KeyboardInterrupt; the previous
    handler comes back after the block. Yields whether the handler is installed: False off the
    main thread, where Python cannot handle signals (a KeyboardInterrupt is then counted where
    it is caught, if at all)."""
    try:
        saved = signal.signal(signal.SIGINT, lambda signum, frame: handler())
    except ValueError:  # not the main thread
        yield False
        return
    try:
        yield True
    finally:
        signal.signal(signal.SIGINT, saved)


@contextlib.contextmanager
def raising() -> Iterator[None]:
    """Inside an :func:`on_sigint` block: let SIGINT raise KeyboardInterrupt again for the
    inner block (e.g. at an ``input()`` prompt, which the host kernel ends with one)."""
    current = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, current)

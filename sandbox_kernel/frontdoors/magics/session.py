"""Sessions of the ``%%sandbox`` magic, and the one loop thread that runs their coroutines.

An IPython kernel already runs an event loop on its main thread, and the cell that calls the
magic blocks it. So every backend coroutine of the magic runs on ONE asyncio loop in a daemon
thread (:class:`LoopThread`); the main thread submits work with
:func:`asyncio.run_coroutine_threadsafe` and shows the events that come back
(:mod:`sandbox_kernel.frontdoors.magics.run`). A session is a named, started backend kept across cells
(:class:`Session`); :class:`Registry` holds them and shuts them all down when the host
process exits.
"""

from __future__ import annotations

import concurrent.futures
import concurrent.futures.thread  # registers its exit hook before ours: ours then runs first
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sandbox_kernel.runtime.loop_thread import LoopThread, at_exit
from sandbox_kernel.session.session import SandboxSession

SHUTDOWN_TIMEOUT = 10.0
"""Seconds each session may take to shut down when the host process exits."""


@dataclass
class Session:
    """A named sandbox session kept across cells.

    Attributes:
        name: the session's name (``--name``).
        sandbox: its :class:`~sandbox_kernel.session.session.SandboxSession` (backend, pipeline).
        started_at: wall-clock time (``time.time()``) the current sandbox started.
        cells: cells run in the current sandbox.
        comms: its CommRelay (:mod:`.comms`) when widgets reach the host's page.
    """

    name: str
    sandbox: SandboxSession
    started_at: float = field(default_factory=time.time)
    cells: int = 0
    comms: Any = None
    _replaced: bool = False

    def __post_init__(self) -> None:
        self.sandbox.on_replaced(self._mark_replaced)

    def _mark_replaced(self) -> None:  # on the loop thread: acted on after the cell, on the main thread
        self._replaced = True

    def reset(self) -> None:
        """The sandbox was replaced (restart): its uptime and cell count start again."""
        self.started_at, self.cells, self._replaced = time.time(), 0, False
        if self.comms is not None:  # the old sandbox's widgets are gone: close them in the page
            self.comms.close_all()

    def after_cell(self) -> None:
        """Count a cell; start counting again when the session replaced a sandbox that had died."""
        if self._replaced:
            self.reset()
        self.cells += 1

    def uptime(self) -> float | None:
        """Seconds since the current sandbox started, or None while it is stopped."""
        return time.time() - self.started_at if self.sandbox.started else None


def magic_hint(option: str, value: str) -> str:
    """How a user of the magic sets an output option: ``%%sandbox --output-policy isolate``."""
    if option == "output_policy":
        return f"%%sandbox --output-policy {value}"
    return f"%config SandboxMagics.{option} = [{value!r}]"


def magic_backend_hint(session: str) -> Callable[[str, str], str]:
    """How a user of the magic sets a backend option of the session ``session``: on the
    ``%%sandbox`` line that makes it (options apply when a session is made)."""
    name = "" if session == "default" else f" --name {session}"
    return lambda option, value: (f"%sandbox stop {session}, then %%sandbox{name} --{option.replace('_', '-')} "
                                  f"{value}")


COMMS_NOTE = ("[ipywidgets inside %%sandbox need a Jupyter kernel as host (here there is none): widgets are "
              "shown as text]\n")


class Registry:
    """The magic's sessions by name, and the loop thread they run on (made on first use).

    A registry shuts every sandbox down when the interpreter exits (:func:`at_exit`); the
    extension also does so when the host kernel is asked to shut down.
    """

    def __init__(self) -> None:
        self._sessions: dict[str, Session] = {}
        self._loop: LoopThread | None = None
        self._lock = threading.Lock()
        at_exit(self.shutdown_all)

    @property
    def loop(self) -> LoopThread:
        with self._lock:
            if self._loop is None:
                self._loop = LoopThread("sandbox-magic-loop")
            return self._loop

    def get(self, name: str) -> Session | None:
        return self._sessions.get(name)

    def add(self, session: Session) -> None:
        self._sessions[session.name] = session

    def remove(self, name: str) -> Session | None:
        return self._sessions.pop(name, None)

    def sessions(self) -> list[Session]:
        """Every session, in the order they were made."""
        return list(self._sessions.values())

    def shutdown_all(self, timeout: float = SHUTDOWN_TIMEOUT) -> None:
        """Shut every session's sandbox down and forget the sessions. Never raises."""
        sessions, self._sessions = list(self._sessions.values()), {}
        if not sessions or self._loop is None:
            return
        futures = [self._loop.submit(s.sandbox.shutdown()) for s in sessions]
        concurrent.futures.wait(futures, timeout=timeout)


registry = Registry()
"""The process-wide registry used by the magic."""

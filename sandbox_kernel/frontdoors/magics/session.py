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
from dataclasses import dataclass, field
from typing import Any

from sandbox_kernel.backends.base import Backend
from sandbox_kernel.policy import OutputPolicy
from sandbox_kernel.runtime.loop_thread import LoopThread, at_exit
from sandbox_kernel.session.pipeline import OutputPipeline

SHUTDOWN_TIMEOUT = 10.0
"""Seconds each session may take to shut down when the host process exits."""


@dataclass
class Session:
    """A named sandbox kept across cells.

    Attributes:
        name: the session's name (``--name``).
        backend: its started backend.
        pipeline: its output path (policy, widget rules, notes said once); by default under the
            ``sanitize`` policy.
        started_at: wall-clock time (``time.time()``) the current sandbox started.
        cells: cells run in the current sandbox.
    """

    name: str
    backend: Backend
    pipeline: OutputPipeline | None = None
    started_at: float = field(default_factory=time.time)
    cells: int = 0
    comms: Any = None  # its CommRelay (sandbox_kernel.frontdoors.magics.comms) when widgets reach the host's page
    _sandbox_id: Any = None

    def __post_init__(self) -> None:
        self._sandbox_id = self.sandbox_id()
        if self.pipeline is None:
            self.pipeline = magic_pipeline(OutputPolicy(hint=magic_hint))

    def sandbox_id(self) -> Any:
        return self.backend.describe().get("sandbox_id")

    def reset(self) -> None:
        """The sandbox was replaced (restart): its uptime and cell count start again."""
        self.started_at, self.cells, self._sandbox_id = time.time(), 0, self.sandbox_id()
        if self.comms is not None:  # the old sandbox's widgets are gone: close them in the page
            self.comms.close_all()

    def after_cell(self) -> None:
        """Count a cell; notice when the backend replaced a sandbox that had died."""
        if self.sandbox_id() != self._sandbox_id:
            self.reset()
        self.cells += 1

    def uptime(self) -> float | None:
        """Seconds since the current sandbox started, or None while it is stopped."""
        return time.time() - self.started_at if self.backend.started else None


def magic_hint(option: str, value: str) -> str:
    """How a user of the magic sets an output option: ``%%sandbox --output-policy isolate``."""
    if option == "output_policy":
        return f"%%sandbox --output-policy {value}"
    return f"%config SandboxMagics.{option} = [{value!r}]"


COMMS_NOTE = ("[ipywidgets inside %%sandbox need a Jupyter kernel as host (here there is none): widgets are "
              "shown as text]\n")


def magic_pipeline(policy: OutputPolicy, backend: Backend | None = None, host_comms: bool = False) -> OutputPipeline:
    """The output pipeline of a magic session. Comms reach the host's page when the host is a
    Jupyter kernel (``host_comms``) and ``backend`` carries them; a backend that cannot (e2b)
    gets the sandbox kernel's one-line note naming it, a host without a kernel :data:`COMMS_NOTE`."""
    budget = "SandboxMagics.max_output_bytes"
    if backend is None or not host_comms:
        return OutputPipeline(policy, comms=False, no_comms_note=COMMS_NOTE, budget_setting=budget)
    pipeline = OutputPipeline(policy, comms=backend.capabilities.comms, budget_setting=budget)
    pipeline.backend = backend.name
    return pipeline


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
        futures = [self._loop.submit(s.backend.shutdown()) for s in sessions]
        concurrent.futures.wait(futures, timeout=timeout)


registry = Registry()
"""The process-wide registry used by the magic."""

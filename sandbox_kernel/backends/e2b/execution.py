"""How the e2b backend runs a cell on E2B's code interpreter without ever waiting forever.

E2B's server (e2b-dev/code-interpreter ``template/server``, ``messaging.py``) has races that
left cells hanging or failing (measured by hand against that server on 127.0.0.1, see
docs/explanation/benchmarks.md; reproduced by ``tests/e2b_server.py``):

* When the client closes an ``/execute`` stream (an interrupt, a cell timeout, an execution
  given up on) the server starts ``POST /api/kernels/{id}/interrupt`` but frees the context at
  once: the kernel's SIGINT comes 20-120 ms later, into whatever runs then. An execution sent
  meanwhile is hit by it: a ``KeyboardInterrupt`` error, or, before the kernel published
  ``execute_input``, never answered; or, queued behind the cell being interrupted, aborted by
  ipykernel (``stop_on_error``), which replies ``"aborted"`` where the server ends an execution
  only on ``"abort"``: never answered. So nothing is sent within ``interrupt_grace`` seconds of
  closing a stream (:meth:`Cells._run_code`).
* After the kernel's death Jupyter restarts it; an execution sent meanwhile may be lost.
* After ``POST /contexts/{id}/restart`` the fresh kernel answers its first execution only
  0.4-0.9 s later: slow, not lost.

So after an interrupt, a timeout or a death the context is *unsettled*:
:meth:`Cells._settle` sends an empty execution until one runs cleanly (one answered by
nothing but keepalives for a while is given up on and sent again), bounded by ``settle_timeout``.
And a cell answered by nothing but keepalives for ``start_timeout`` seconds was never run: it is
cancelled and sent once more after settling (:class:`Watch` tells, from the stream that
``stream`` watches).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from ...core.errors import ExecutionTimeout, SandboxDied, SandboxError
from ...core.events import Emit, Outcome, Stream
from ...runtime.traits import format_bytes
from .boundary import Connection, SandboxGone
from .results import Relay

SETTLE_BOUND = 1.0
"""Seconds an empty execution of :meth:`Cells._settle` may be answered by nothing but
keepalives at first: E2B's fresh kernel answers in 0.05-0.9 s (after a restart, the longest)."""
KEEPALIVE = re.compile(rb'\s*\{\s*"type"\s*:\s*"keepalive"')
END = re.compile(rb'\s*\{\s*"type"\s*:\s*"end_of_execution"')


class Watch:
    """What the ``/execute`` stream of one ``run_code`` call showed so far.

    Attributes:
        accepted: set at the first line that is not a keepalive (the kernel took the request).
        ended: set when ``end_of_execution`` arrived.
        on_drop: called with the size in bytes of each line skipped for being over the bound.
    """

    def __init__(self, on_drop: Callable[[int], None] | None = None) -> None:
        self.accepted = asyncio.Event()
        self.ended = False
        self.on_drop = on_drop or (lambda size: None)

    def line(self, line: bytes) -> None:
        if not KEEPALIVE.match(line):
            self.accepted.set()
        if END.match(line):
            self.ended = True


current_watch: ContextVar[Watch | None] = ContextVar("sandbox_kernel_e2b_watch", default=None)
"""The :class:`Watch` of the ``run_code`` call the current task makes (set inside its task)."""


@dataclass(frozen=True)
class Limits:
    """The e2b backend's options that the cell path uses (seconds, bytes), see :class:`~.E2BBackend`."""

    language: str
    start_timeout: float
    settle_timeout: float
    interrupt_grace: float
    request_timeout: float
    max_message_bytes: int


class Cells:
    """The cell path of one code context in one E2B sandbox.

    Made by :class:`~.E2BBackend` when its sandbox starts, and given everything it uses: the
    SDK's sandbox and code context, the :class:`Connection` (for the SDK-exception boundary)
    and the :class:`Limits`. It owns what only the cell path needs: the running request,
    whether it was interrupted, whether the context is settled, and when a stream was last
    closed.

    Attributes:
        unsettled: the context may not take code yet (after an interrupt, a timeout, a death).
        sandbox_died: set when the sandbox itself died during a cell (not only its kernel):
            the backend then drops it, and the next cell gets a fresh one.
    """

    def __init__(self, sandbox: Any, context: Any, connection: Connection, limits: Limits) -> None:
        self.sandbox, self.context, self.connection, self.limits = sandbox, context, connection, limits
        self.unsettled = False
        self.sandbox_died = False
        self._running: asyncio.Future | None = None
        self._interrupted = False
        self._closed_at = float("-inf")  # time.monotonic() when we last closed an /execute stream

    def _boundary(self):
        return self.connection.boundary(self.sandbox.sandbox_id)

    async def run(self, code: str, emit: Emit, timeout: float | None) -> Outcome:
        """Run ``code`` (``POST /execute``), settling the context first if needed.

        Raises:
            ExecutionTimeout: ``timeout`` seconds passed.
            SandboxDied: the kernel or the sandbox died during the cell.
            SandboxError: the context did not take the cell (the message says what to do).
        """
        deadline = time.monotonic() + timeout if timeout else None
        self._interrupted = False
        if self.unsettled and not await self._settle(timeout, deadline):
            return Relay(emit).interrupted()
        return await self._attempts(code, emit, timeout, deadline)

    def interrupt(self) -> None:
        """Cancel the running request (the SDK closes its stream; the sandbox interrupts its
        kernel). Does nothing when none runs."""
        task = self._running
        if task is not None and not task.done():
            self._interrupted = True
            task.cancel()

    async def restart_context(self) -> None:
        """``POST /contexts/{id}/restart``. E2B answers once Jupyter restarted the kernel: the
        fresh one takes code (its first answer comes 0.4-0.9 s later), so the context is settled,
        unless the restart failed."""
        self.unsettled = True
        with self._boundary():
            await self.sandbox.restart_code_context(self.context)
        self.unsettled = False

    async def _attempts(self, code: str, emit: Emit, timeout: float | None, deadline: float | None) -> Outcome:
        """Send the cell; once more if the kernel never took it (see the module's docstring)."""
        for attempt in (1, 2):
            relay = Relay(emit)
            watch = Watch(on_drop=lambda size: emit(Stream("stderr", self._dropped_note(size))))
            task = self._running = asyncio.ensure_future(self._run_code(code, relay, watch))
            try:
                if await self._wait_accepted(task, watch, deadline):
                    return await self._finish(task, relay, timeout, deadline)
            finally:
                self._running = None
                if not task.done():
                    task.cancel()
            # never taken (lost, or aborted behind an interrupted cell): nothing of it ran
            if attempt == 2:
                raise SandboxError(f"The {self.limits.language} kernel of E2B sandbox {self.sandbox.sandbox_id} did not "
                                   f"take the cell within {self.limits.start_timeout:g} s, twice; nothing ran. Run it "
                                   "again, or restart the kernel.")
            if not await self._settle(timeout, deadline):
                return Relay(emit).interrupted()
        raise AssertionError("unreachable")

    async def _run_code(self, code: str, relay: Relay | None, watch: Watch) -> Any:
        """``run_code`` (``POST /execute``) with ``watch`` on its stream; no SDK timeout (ours).

        Sent no sooner than ``interrupt_grace`` seconds after the last stream we closed: E2B's
        server interrupts the kernel in that time, and whatever reached the kernel first would
        get the interrupt. Closing this one (cancelling the task) starts that time again."""
        await asyncio.sleep(self._quiet_for())
        current_watch.set(watch)  # this task's own context: the transport finds it there
        callbacks = relay.callbacks() if relay is not None else {}
        try:
            return await self.sandbox.run_code(code, context=self.context, timeout=0,
                                                request_timeout=self.limits.request_timeout, **callbacks)
        except BaseException:  # the stream is closed: the server interrupts the kernel, in its own time
            self._closed_at = time.monotonic()
            raise

    def _quiet_for(self) -> float:
        """Seconds until an execution may be sent (see :meth:`_run_code`)."""
        return max(self._closed_at + self.limits.interrupt_grace - time.monotonic(), 0.0)

    async def _wait_accepted(self, task: asyncio.Future, watch: Watch, deadline: float | None,
                             bound: float | None = None) -> bool:
        """Wait until the kernel took the request, the request ended, or the cell's deadline
        passed (True); False, with the request cancelled, after ``bound`` (default
        ``start_timeout``) seconds of nothing but keepalives."""
        bound = self.limits.start_timeout if bound is None else bound
        if not bound:
            return True
        bound += self._quiet_for()  # counted from when the request is sent
        waiter = asyncio.ensure_future(watch.accepted.wait())
        limit = bound if deadline is None else min(bound, max(deadline - time.monotonic(), 0))
        try:
            await asyncio.wait({task, waiter}, timeout=limit, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
        if task.done() or watch.accepted.is_set() or (deadline is not None and time.monotonic() >= deadline):
            return True
        task.cancel()  # the SDK closes the connection; the sandbox interrupts its (idle) kernel
        await asyncio.wait({task})
        self.unsettled = True
        return False

    async def _finish(self, task: asyncio.Future, relay: Relay, timeout: float | None,
                      deadline: float | None) -> Outcome:
        await asyncio.wait({task}, timeout=None if deadline is None else max(deadline - time.monotonic(), 0))
        if not task.done():
            task.cancel()  # the SDK closes the connection; the sandbox interrupts its kernel
            await asyncio.wait({task})
            self.unsettled = True
            relay.flush()
            raise ExecutionTimeout(timeout)
        if task.cancelled() and self._interrupted:
            self.unsettled = True
            return relay.interrupted()
        try:
            with self._boundary():
                execution = task.result()
        except SandboxDied as exc:
            if not isinstance(exc, SandboxGone):  # it died during the cell: the next one makes a new one
                self.sandbox_died = True
            raise
        if relay.died is not None:  # E2B starts a new kernel in the same sandbox
            self.unsettled = True
            relay.flush()
            raise SandboxDied(f"the {self.limits.language} kernel in E2B sandbox {self.sandbox.sandbox_id} died "
                              f"({relay.died.value.strip().rstrip('.') or relay.died.name}: out of memory, "
                              "or its process was killed or exited)")
        return relay.outcome(execution)

    async def _settle(self, timeout: float | None = None, cell_deadline: float | None = None) -> bool:
        """Wait until the code context takes code again (True; False: interrupted meanwhile).

        An empty execution is sent until one runs cleanly. One answered by nothing but
        keepalives (aborted behind an interrupted cell, or lost while a dead kernel restarts)
        is given up on after ``SETTLE_BOUND`` seconds (then twice that), and sent again once
        its own interrupt has landed (:meth:`_run_code`). One that ran but failed is sent again:
        at once after a ``KeyboardInterrupt`` (an interrupt landed: the kernel took code), a
        moment later otherwise (``ContextRestarting``: the kernel is still coming back).

        Raises:
            SandboxError: the context did not take code within ``settle_timeout`` seconds.
            ExecutionTimeout: the cell's own ``timeout`` (ending at ``cell_deadline``) passed first.
        """
        deadline, bound = time.monotonic() + self.limits.settle_timeout, SETTLE_BOUND
        if cell_deadline is not None and cell_deadline < deadline:
            deadline = cell_deadline
        while True:
            watch, failed = Watch(), "never taken"
            task = self._running = asyncio.ensure_future(self._run_code("", None, watch))
            try:
                if await self._wait_accepted(task, watch, None, bound=bound):
                    await asyncio.wait({task}, timeout=max(deadline - time.monotonic(), 0))
                if task.done() and not task.cancelled():
                    with self._boundary():
                        error = task.result().error
                    failed = error.name if error is not None else "" if watch.ended else "cut short"
            finally:
                self._running = None
                if not task.done():
                    task.cancel()
                    await asyncio.wait({task})
            if self._interrupted:
                return False
            if not failed:
                self.unsettled = False
                return True
            if time.monotonic() > deadline:
                if deadline == cell_deadline:
                    raise ExecutionTimeout(timeout)
                raise SandboxError(f"The {self.limits.language} kernel of E2B sandbox {self.sandbox.sandbox_id} did not "
                                   f"take code within {self.limits.settle_timeout:g} s after it was interrupted "
                                   "or died; nothing ran. Run the cell again, or restart the kernel.")
            if failed == "never taken":
                bound = min(bound * 2, 2 * SETTLE_BOUND)  # a lost one costs its bound: keep it short
            elif failed != "KeyboardInterrupt":
                await asyncio.sleep(SETTLE_BOUND / 4)

    def _dropped_note(self, size: int) -> str:
        return (f"[a message of {format_bytes(size)} from the sandbox was dropped: over the "
                f"{format_bytes(self.limits.max_message_bytes)} of E2BBackend.max_message_bytes]\n")


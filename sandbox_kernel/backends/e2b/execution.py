"""How the e2b backend runs a cell on E2B's code interpreter without ever waiting forever.

E2B's server (e2b-dev/code-interpreter ``template/server``, ``messaging.py``) has two races
that left cells hanging (measured; reproduced by ``tests/e2b_server.py``):

* When the client closes an ``/execute`` stream (an interrupt, a cell timeout) the server
  interrupts the kernel (``POST /api/kernels/{id}/interrupt``) but does not wait for it. The
  next execution reaches the kernel while the interrupted cell still runs; ipykernel aborts it
  (``stop_on_error``) and replies ``"aborted"``, while the server ends an execution only on
  ``"abort"`` (or ``idle`` after ``execute_input``): that execution never ends, only keepalives.
* After the kernel's death Jupyter restarts it; an execution sent meanwhile is lost.

So after an interrupt, a timeout, a restart or a death the context is *unsettled*:
:meth:`ExecutionMixin._settle` sends an empty execution until one runs cleanly (one answered by
nothing but keepalives is cancelled and sent again), bounded by ``settle_timeout``. And a cell
answered by nothing but keepalives for ``start_timeout`` seconds was never run: it is cancelled
and sent once more after settling (:class:`Watch` tells, from the stream that ``stream`` watches).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from ...errors import ExecutionTimeout, SandboxDied, SandboxError
from ...events import Emit, Outcome, Stream
from ...traits import format_bytes
from .results import Relay
from .boundary import SandboxGone

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


class ExecutionMixin:
    """The cell path of :class:`~.e2b.E2BBackend` (its traits and sandbox are used here)."""

    _sandbox: Any
    _context: Any
    _running: asyncio.Future | None
    _interrupted: bool
    _unsettled: bool

    async def _run(self, code: str, emit: Emit, timeout: float | None) -> Outcome:
        while self._notices:
            emit(Stream("stderr", self._notices.pop(0)))
        deadline = time.monotonic() + timeout if timeout else None
        self._interrupted = False
        renewal = asyncio.ensure_future(self._renew_while_running())  # a long cell keeps its sandbox
        try:
            if self._unsettled and not await self._settle(timeout, deadline):
                return Relay(emit).interrupted()
            return await self._attempts(code, emit, timeout, deadline)
        finally:
            renewal.cancel()

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
                raise SandboxError(f"The {self.language} kernel of E2B sandbox {self._sandbox.sandbox_id} did not "
                                   f"take the cell within {self.start_timeout:g} s, twice; nothing ran. Run it "
                                   "again, or restart the kernel.")
            if not await self._settle(timeout, deadline):
                return Relay(emit).interrupted()
        raise AssertionError("unreachable")

    async def _run_code(self, code: str, relay: Relay | None, watch: Watch) -> Any:
        """``run_code`` (``POST /execute``) with ``watch`` on its stream; no SDK timeout (ours)."""
        current_watch.set(watch)  # this task's own context: the transport finds it there
        callbacks = relay.callbacks() if relay is not None else {}
        return await self._sandbox.run_code(code, context=self._context, timeout=0,
                                            request_timeout=self.request_timeout, **callbacks)

    async def _wait_accepted(self, task: asyncio.Future, watch: Watch, deadline: float | None,
                             bound: float | None = None) -> bool:
        """Wait until the kernel took the request, the request ended, or the cell's deadline
        passed (True); False, with the request cancelled, after ``bound`` (default
        ``start_timeout``) seconds of nothing but keepalives."""
        bound = self.start_timeout if bound is None else bound
        if not bound:
            return True
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
        self._unsettled = True
        return False

    async def _finish(self, task: asyncio.Future, relay: Relay, timeout: float | None,
                      deadline: float | None) -> Outcome:
        await asyncio.wait({task}, timeout=None if deadline is None else max(deadline - time.monotonic(), 0))
        if not task.done():
            task.cancel()  # the SDK closes the connection; the sandbox interrupts its kernel
            await asyncio.wait({task})
            self._unsettled = True
            relay.flush()
            raise ExecutionTimeout(timeout)
        if task.cancelled() and self._interrupted:
            self._unsettled = True
            return relay.interrupted()
        try:
            with self._boundary():
                execution = task.result()
        except SandboxDied as exc:
            if not isinstance(exc, SandboxGone):  # it died during the cell: the next one makes a new one
                self._sandbox = self._context = None
            raise
        if relay.died is not None:  # E2B starts a new kernel in the same sandbox
            self._unsettled = True
            relay.flush()
            raise SandboxDied(f"the {self.language} kernel in E2B sandbox {self._sandbox.sandbox_id} died "
                              f"({relay.died.value.strip().rstrip('.') or relay.died.name}: out of memory, "
                              "or its process was killed or exited)")
        return relay.outcome(execution)

    async def _settle(self, timeout: float | None = None, cell_deadline: float | None = None) -> bool:
        """Wait until the code context takes code again (True; False: interrupted meanwhile).

        After an interrupt or a cell timeout E2B's server interrupts the kernel but does not
        wait for it, and ipykernel aborts what arrives meanwhile (an execution E2B's server
        never ends); after the kernel's death, what arrives while Jupyter restarts it is lost.
        So an empty execution is sent until one runs cleanly; one answered by nothing but
        keepalives is cancelled and sent again.

        Raises:
            SandboxError: the context did not take code within ``settle_timeout`` seconds.
            ExecutionTimeout: the cell's own ``timeout`` (ending at ``cell_deadline``) passed first.
        """
        deadline, wait = time.monotonic() + self.settle_timeout, 0.25
        if cell_deadline is not None and cell_deadline < deadline:
            deadline = cell_deadline
        while True:
            watch, ran, clean = Watch(), False, False
            task = self._running = asyncio.ensure_future(self._run_code("", None, watch))
            try:
                if await self._wait_accepted(task, watch, None, bound=wait):
                    await asyncio.wait({task}, timeout=max(deadline - time.monotonic(), wait))
                if task.done() and not task.cancelled():
                    with self._boundary():
                        clean = task.result().error is None and watch.ended
                    ran = True
            finally:
                self._running = None
                if not task.done():
                    task.cancel()
            if self._interrupted:
                return False
            if clean:
                self._unsettled = False
                return True
            if time.monotonic() > deadline:
                if deadline == cell_deadline:
                    raise ExecutionTimeout(timeout)
                raise SandboxError(f"The {self.language} kernel of E2B sandbox {self._sandbox.sandbox_id} did not "
                                   f"take code within {self.settle_timeout:g} s after it was interrupted, restarted "
                                   "or died; nothing ran. Run the cell again, or restart the kernel.")
            if ran:  # it ran but failed (ContextRestarting: the kernel is still restarting)
                await asyncio.sleep(wait)
            wait = min(wait * 2, 2.0)

    def _dropped_note(self, size: int) -> str:
        return (f"[a message of {format_bytes(size)} from the sandbox was dropped: over the "
                f"{format_bytes(self.max_message_bytes)} of E2BBackend.max_message_bytes]\n")


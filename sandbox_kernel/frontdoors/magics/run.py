"""Running one sandboxed cell from the host's main thread.

The backend's ``execute`` runs on the loop thread (:mod:`sandbox_kernel.frontdoors.magics.session`) and its ``emit``
puts each event on a thread-safe queue; the main thread drains that queue while it waits, so
every output is shown live and in the calling cell. The same queue carries ``input()``
prompts (the main thread asks the host kernel's ``builtins.input``, so the prompt reaches the
notebook user). Ctrl-C (the notebook's interrupt button: SIGINT, a KeyboardInterrupt on the
main thread) schedules ``backend.interrupt()`` and the draining goes on until the cell ends.
"""

from __future__ import annotations

import asyncio
import builtins
import concurrent.futures
import contextlib
import getpass
import queue
import sys
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from sandbox_kernel.core.errors import SandboxError, StillRunning
from sandbox_kernel.policy import OutputPolicy
from sandbox_kernel.runtime import sigint
from sandbox_kernel.runtime.sigint import on_sigint

from .comms import host_parent
from .display import CellOutputs, SandboxResult, infrastructure_error, show, show_pages
from .session import LoopThread, Session

GIVE_UP_AFTER = 3
"""Ctrl-Cs after which the magic stops waiting for a sandbox that ignores interrupts."""

_DONE = object()


@dataclass(frozen=True)
class _InputRequest:
    """A prompt from the sandbox, to be answered on the main thread."""

    prompt: str
    password: bool
    answer: concurrent.futures.Future


class _Sigints:
    """Counts SIGINTs (the interrupt button) instead of raising KeyboardInterrupt.

    A KeyboardInterrupt raised at an arbitrary point can leave a lock held: raised inside
    ``queue.Queue.get`` it leaves the queue's mutex locked, and the loop thread's next ``put``
    deadlocks. So while the magic waits, SIGINT only bumps :attr:`count` (no locks taken in the
    handler) and the waiting loop acts on it between queue reads.
    """

    def __init__(self) -> None:
        self.count = 0
        self._installed = False
        self._stack = contextlib.ExitStack()

    def _bump(self) -> None:
        self.count += 1

    def __enter__(self) -> _Sigints:
        self._installed = self._stack.enter_context(on_sigint(self._bump))
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stack.close()

    def raising(self) -> contextlib.AbstractContextManager:
        """Let SIGINT raise KeyboardInterrupt again, e.g. at an ``input()`` prompt, which the
        host kernel ends with KeyboardInterrupt."""
        return sigint.raising() if self._installed else contextlib.nullcontext()


def wait(loop: LoopThread, coro: Coroutine[Any, Any, Any], *, inbox: queue.Queue | None = None,
         handle: Callable[[Any], None] = show, on_interrupt: Callable[[], Coroutine] | None = None,
         session: str = "NAME") -> Any:
    """Run ``coro`` on the loop thread and wait for it on this (the main) thread.

    While waiting, items put on ``inbox`` are handed to ``handle`` (``_InputRequest`` items are
    answered here). On Ctrl-C, ``on_interrupt()`` is scheduled when given (and waiting goes on;
    after :data:`GIVE_UP_AFTER` Ctrl-Cs :class:`StillRunning` is raised); without it, the
    coroutine is cancelled and KeyboardInterrupt propagates.

    Returns:
        What ``coro`` returns; its exception is raised here.
    """
    inbox = inbox if inbox is not None else queue.Queue()
    future = loop.submit(coro)
    future.add_done_callback(lambda _: inbox.put(_DONE))
    handled = 0
    with _Sigints() as sigints:
        while True:
            item = None
            try:
                item = inbox.get(timeout=0.1)
                if isinstance(item, _InputRequest):
                    with sigints.raising():
                        _answer(item)
                    item = None
            except queue.Empty:
                pass
            except KeyboardInterrupt:
                sigints.count += 1
            if item is _DONE:
                return future.result()
            if sigints.count > handled:
                handled = sigints.count
                if on_interrupt is None:
                    future.cancel()
                    raise KeyboardInterrupt
                if handled >= GIVE_UP_AFTER:
                    raise StillRunning(session, GIVE_UP_AFTER)
                loop.submit(on_interrupt())
            if item is not None:
                handle(item)


def _answer(request: _InputRequest) -> None:
    """Ask the host's user (the host kernel patches ``builtins.input`` and ``getpass``).

    A Ctrl-C at the prompt cancels the request, so no answer is sent: the interrupt that
    follows ends the sandbox's ``input()`` with KeyboardInterrupt, as in a plain kernel.
    """
    try:
        value = getpass.getpass(request.prompt) if request.password else builtins.input(request.prompt)
    except KeyboardInterrupt:
        request.answer.cancel()
        raise
    except Exception as exc:  # noqa: BLE001 - e.g. EOFError: the sandbox's input() ends with EOF
        request.answer.set_exception(exc)
        return
    request.answer.set_result(value)


def host_allows_stdin() -> bool:
    """Whether the host frontend accepts ``input()`` for the running cell (always True outside
    a kernel, e.g. in terminal IPython)."""
    from IPython import get_ipython

    kernel = getattr(get_ipython(), "kernel", None)
    return bool(getattr(kernel, "_allow_stdin", True))


def run_cell(loop: LoopThread, session: Session, code: str, *, timeout: float | None = None,
             max_output_bytes: int = 0, policy: OutputPolicy | None = None) -> SandboxResult | None:
    """Run ``code`` in ``session``'s sandbox, showing its outputs live in the current cell.

    The events pass the session's cell pipeline (``policy``, default the session's; budget
    ``max_output_bytes``) on the loop thread, then a queue to this thread, which shows them.
    The sandbox's request gets the host cell's msg_id (an ``Output`` widget captures by it).

    Returns:
        The cell's last expression as a :class:`SandboxResult`, or None.

    Raises:
        SandboxCellError: the sandboxed code raised (its traceback is the sandbox's), or the
            sandbox failed (dead, timed out: a one-line message).
    """
    inbox: queue.Queue = queue.Queue()
    outputs = CellOutputs(session.comms)

    async def ask(prompt: str, password: bool) -> str:  # on the loop thread
        answer: concurrent.futures.Future = concurrent.futures.Future()
        inbox.put(_InputRequest(prompt, password, answer))
        return await asyncio.wrap_future(answer)

    stdin = ask if host_allows_stdin() else None
    work = session.sandbox.run(code, inbox.put, request=host_parent(), stdin=stdin, timeout=timeout,  # sink: loop thread
                               max_output_bytes=max_output_bytes, policy=policy)
    try:
        outcome = wait(loop, work, inbox=inbox, handle=outputs.take, on_interrupt=session.sandbox.interrupt,
                       session=session.name)
    except SandboxError as exc:  # the magic stopped waiting (StillRunning)
        raise infrastructure_error(exc) from None
    finally:
        session.after_cell()
        _drain(inbox, outputs)
    show_pages(outcome.payload)
    failure = outputs.finish(outcome)
    if failure is not None:
        raise failure
    return outputs.result


def _drain(inbox: queue.Queue, outputs: CellOutputs) -> None:
    """Show what the cell put on the queue after the waiting ended (its closing marker)."""
    while True:
        try:
            item = inbox.get_nowait()
        except queue.Empty:
            break
        if item is not _DONE and not isinstance(item, _InputRequest):
            outputs.take(item)
    sys.stdout.flush()


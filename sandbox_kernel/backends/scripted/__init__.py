"""``scripted``: a backend that runs no code, answering each cell from a script you give it.

As httpx ships ``MockTransport``, sandbox-kernel ships this backend, so code built on the front
doors (an agent on the Python API, a test of the kernel's or the magic's logic) can be tested
without an engine, a service or a kernel process::

    from sandbox_kernel import Sandbox
    from sandbox_kernel.backends.scripted import reply
    from sandbox_kernel.core.events import Display, Stream

    script = {"1 + 1": reply(Display({"text/plain": "2"}), result=True),
              "print('hi')": reply(Stream("stdout", "hi\\n"))}
    with Sandbox("scripted", script=script) as sb:
        assert sb.run("1 + 1").text == "2"

A script is either a mapping ``{code: Step}`` or a function ``script(code, run) -> Step | None``
(sync or async) that may ``run.emit(event)`` and ``await run.input(prompt)`` itself. Code the
script does not know ends as an ``Error`` (``ScriptError``), as user code would. It implements
the whole backend contract and every capability it declares: completion and inspection from
the script's ``complete``/``inspect`` (by default: no matches, nothing found), ``input()``
through :meth:`ScriptRun.input`, comms (the frontend's messages are kept in :attr:`comms_received`
and answered by ``on_comm``), display updates (events pass as given), and files (kept in memory).

It is not a sandbox and runs nothing: there is no kernelspec for it (``sandbox-kernel install``
leaves it out).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from traitlets import Any as AnyTrait
from traitlets import Bool, Float

from ...core.errors import ExecutionTimeout, SandboxStartError
from ...core.events import Comm, Display, Emit, Error, Event, Outcome
from ..base import Backend, Capabilities, StdinHandler
from ..bounded import write_chunks


@dataclass(frozen=True)
class Step:
    """What one scripted cell shows and how it ends.

    Attributes:
        events: the outputs, in order (``Display`` with ``execution_count`` set is replaced by
            the cell's own count when ``result`` is True).
        status: ``"ok"`` or ``"error"`` (then the last ``Error`` event, if any, is the outcome's error).
        result: the last ``Display`` is the cell's ``execute_result``.
        delay: seconds the cell takes before it ends (interruptible).
    """

    events: tuple[Event, ...] = ()
    status: str = "ok"
    result: bool = False
    delay: float = 0.0


def reply(*events: Event, result: bool = False, delay: float = 0.0) -> Step:
    """A step that shows ``events`` and ends ``ok`` (``result``: the last Display is the
    execute_result)."""
    return Step(tuple(events), "ok", result, delay)


def fail(ename: str, evalue: str, *events: Event) -> Step:
    """A step that shows ``events`` and then raises ``ename: evalue`` as user code would."""
    return Step((*events, Error(ename, evalue, [f"{ename}: {evalue}"])), "error")


@dataclass
class ScriptRun:
    """Given to a script function while its cell runs."""

    code: str
    execution_count: int
    emit: Emit
    stdin: StdinHandler | None
    state: dict[str, Any] = field(default_factory=dict)
    """The session's state: kept across cells, emptied by ``restart``."""

    async def input(self, prompt: str = "", password: bool = False) -> str:
        """Ask the frontend's user, as ``input()`` in the sandbox would.

        Raises:
            RuntimeError: the frontend takes no input (StdinNotImplementedError in a kernel)."""
        if self.stdin is None:
            raise RuntimeError("the frontend does not accept input")
        return await self.stdin(prompt, password)


Script = Mapping[str, Step] | Callable[[str, ScriptRun], "Step | None | Awaitable[Step | None]"]


class ScriptedBackend(Backend):
    """A backend answering from :attr:`script` (see the module docstring)."""

    name = "scripted"
    capabilities = Capabilities(completion=True, inspection=True, stdin=True, comms=True, display_updates=True,
                                files=True)

    script = AnyTrait(None, allow_none=True, help="{code: Step} or script(code, run) -> Step; None: no cell "
                                                  "is known (each ends with ScriptError).").tag(config=True)
    complete_with = AnyTrait(None, allow_none=True, help="complete(code, cursor_pos) -> list of matches.").tag(
        config=True)
    inspect_with = AnyTrait(None, allow_none=True, help="inspect(code, cursor_pos) -> MIME bundle or None.").tag(
        config=True)
    on_comm = AnyTrait(None, allow_none=True, help="on_comm(msg_type, content, emit): answers a frontend's "
                                                   "comm message (emit Comm events back).").tag(config=True)
    fail_start = AnyTrait(None, allow_none=True, help="A message: start() fails with it (to test start "
                                                      "failures).").tag(config=True)
    start_delay = Float(0.0, help="Seconds start() takes (to test what waits for a start).").tag(config=True)
    starts_quickly = Bool(False, help="What the backend says of its start (Backend.starts_quickly).").tag(
        config=True)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._started = False
        self._count = 0
        self._state: dict[str, Any] = {}
        self._files: dict[str, bytes] = {}
        self._running: asyncio.Task | None = None
        self._comm_handler: Callable[[Event, str | None], None] | None = None
        self.comms_received: list[tuple[str, dict[str, Any]]] = []
        """Every comm message the frontend sent, as ``(msg_type, content)``."""
        self.open_comms: dict[str, str] = {}

    # -- lifecycle ---------------------------------------------------------------------------
    async def start(self) -> None:
        if self.fail_start:
            raise SandboxStartError(str(self.fail_start))
        if self.start_delay and not self._started:
            await asyncio.sleep(self.start_delay)
        self._started = True

    async def shutdown(self) -> None:
        await self.interrupt()
        self._started = False

    @property
    def started(self) -> bool:
        return self._started

    async def restart(self) -> None:
        await self.interrupt()
        self._count, self._state = 0, {}
        await self.start()

    async def interrupt(self) -> None:
        if self._running is not None and not self._running.done():
            self._running.cancel()

    # -- running code ------------------------------------------------------------------------
    async def execute(self, code: str, emit: Emit, *, timeout: float | None = None,
                      stdin: StdinHandler | None = None, silent: bool = False, store_history: bool = True,
                      user_expressions: dict[str, str] | None = None) -> Outcome:
        """The script's step for ``code`` (``silent``, ``store_history``, ``user_expressions``:
        ignored, as ``capabilities.payloads`` says)."""
        await self.start()
        self._count += 1
        run = ScriptRun(code, self._count, emit, stdin, self._state)
        self._running = asyncio.ensure_future(self._step(run))
        try:
            step = await asyncio.wait_for(asyncio.shield(self._running), timeout)
        except asyncio.TimeoutError:
            await self.interrupt()
            raise ExecutionTimeout(timeout) from None
        except asyncio.CancelledError:
            if not self._running.cancelled():
                raise
            error = Error("KeyboardInterrupt", "", ["KeyboardInterrupt"])
            emit(error)
            return Outcome("error", self._count, error)
        finally:
            self._running = None
        return self._finish(step, emit)

    async def _step(self, run: ScriptRun) -> Step:
        script = self.script
        if isinstance(script, Mapping):
            step = script.get(run.code, script.get(run.code.strip()))
        elif callable(script):
            step = script(run.code, run)
            if inspect.isawaitable(step):
                step = await step
        else:
            step = None
        if step is None:
            return fail("ScriptError", f"the script has no step for {run.code!r}")
        if step.delay:
            await asyncio.sleep(step.delay)
        return step

    def _finish(self, step: Step, emit: Emit) -> Outcome:
        events = list(step.events)
        last_display = max((i for i, e in enumerate(events) if isinstance(e, Display)), default=None)
        for i, event in enumerate(events):
            if step.result and i == last_display:
                event = replace(event, execution_count=self._count)
            emit(event)
        errors = [e for e in events if isinstance(e, Error)]
        if step.status == "error":
            return Outcome("error", self._count, errors[-1] if errors else Error("ScriptError", "the step failed"))
        return Outcome("ok", self._count)

    # -- completion and inspection -----------------------------------------------------------
    async def complete(self, code: str, cursor_pos: int) -> dict[str, Any]:
        matches = list(self.complete_with(code, cursor_pos)) if self.complete_with else []
        start = cursor_pos - len(code[:cursor_pos].split()[-1]) if code[:cursor_pos].split() and matches else cursor_pos
        return {"status": "ok", "matches": matches, "cursor_start": start, "cursor_end": cursor_pos, "metadata": {}}

    async def inspect(self, code: str, cursor_pos: int, detail_level: int = 0) -> dict[str, Any]:
        data = self.inspect_with(code, cursor_pos) if self.inspect_with else None
        return {"status": "ok", "found": bool(data), "data": data or {}, "metadata": {}}

    async def is_complete(self, code: str) -> dict[str, Any]:
        from IPython.core.inputtransformer2 import TransformerManager

        status, indent = TransformerManager().check_complete(code)
        return {"status": status, **({"indent": " " * indent} if indent else {})}

    # -- comms -------------------------------------------------------------------------------
    def set_comm_handler(self, handler: Callable[[Event, str | None], None] | None) -> None:
        self._comm_handler = handler

    def send_unsolicited(self, event: Event, parent_msg_id: str | None = None) -> None:
        """Hand ``event`` to the front door as output from outside any cell (a sandbox thread's
        output, a widget it changes)."""
        if isinstance(event, Comm):
            self._track(event)
        if self._comm_handler is not None:
            self._comm_handler(event, parent_msg_id)

    def _track(self, event: Comm) -> None:
        comm_id = event.content.get("comm_id", "")
        if event.msg_type == "comm_open":
            self.open_comms[comm_id] = event.content.get("target_name", "")
        elif event.msg_type == "comm_close":
            self.open_comms.pop(comm_id, None)

    async def send_comm(self, msg_type: str, content: dict[str, Any], metadata: dict[str, Any] | None = None,
                        buffers: list[bytes] | None = None, emit: Emit | None = None) -> None:
        await self.start()
        self.comms_received.append((msg_type, content))
        if msg_type == "comm_open":
            self.open_comms[content.get("comm_id", "")] = content.get("target_name", "")
        elif msg_type == "comm_close":
            self.open_comms.pop(content.get("comm_id", ""), None)
        if self.on_comm is not None:
            def answer(event: Event) -> None:
                if emit is None:
                    self.send_unsolicited(event)
                    return
                if isinstance(event, Comm):
                    self._track(event)
                emit(event)

            self.on_comm(msg_type, content, answer)

    async def comm_info(self, target_name: str | None = None) -> dict[str, Any]:
        return {"status": "ok", "comms": {comm_id: {"target_name": target} for comm_id, target in
                                          self.open_comms.items() if target_name in (None, target)}}

    # -- files -------------------------------------------------------------------------------
    async def upload(self, local: str | Path, remote: str) -> str:
        await self.start()
        self._files[remote] = Path(local).read_bytes()
        return remote

    async def download(self, remote: str, local: str | Path, *, max_bytes: int = 0) -> Path:
        await self.start()
        if remote not in self._files:
            raise FileNotFoundError(f"no such file in the scripted sandbox: {remote}")
        return write_chunks([self._files[remote]], local, max_bytes, remote)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "sandbox_id": "scripted" if self._started else None,
                "note": "a test double: runs no code"}


__all__ = ["ScriptRun", "ScriptedBackend", "Step", "fail", "reply"]

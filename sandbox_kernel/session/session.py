"""``SandboxSession``: one sandbox and everything done with it, under every front door.

The kernel, the ``%%sandbox`` magic, the Python API and the MCP server each own sessions and
differ only in their wire code and their *sink* (the function that shows an event: IOPub
messages, IPython's display machinery, an execution result). Everything else is written once,
here::

    door ─► SandboxSession.run(code, sink, request=...) ─► Cell (pipeline) ─► backend.execute
         ─► SandboxSession.comm(message, sink)          ─► widget rules    ─► backend.send_comm
    backend's unsolicited output ─► pipeline.outside_cell ─► the door's outside sink(event, request)

A session makes its backend by name (:func:`~sandbox_kernel.backends.make_backend`, with the
door's option check), wires the output pipeline from the backend's ``capabilities``, knows
which frontend request it is serving (:data:`~sandbox_kernel.backends.base.request_msg_id`,
and the recent requests by msg_id, which parent what the sandbox sends later), and offers
files, variables and shell commands behind the capability each needs.
"""

from __future__ import annotations

import contextlib
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from traitlets.config import Configurable

from ..backends import make_backend
from ..backends.base import Backend, Capabilities, StdinHandler, request_msg_id, request_subshell_id
from ..core.errors import SandboxDied, SandboxError
from ..core.events import Comm, Display, Emit, Event, Outcome
from ..policy import OutputPolicy
from . import commands, replies, transfer
from .checkpoints import SessionCheckpoints
from .files import FileOptions, SessionFiles
from .lines import Lines, leading
from .pipeline import NO_COMMS_NOTE, Cell, OutputPipeline
from .results import Collector, CommandResult

OutsideSink = Callable[[Event, dict[str, Any] | None], None]
"""``sink(event, request)``: shows what the sandbox sent outside any cell (policed), with the
frontend request it belongs to (the one the sandbox names as parent, else the latest), or None;
``{}`` (no parent, so a frontend shows it in no cell) for output the sandbox's kernel itself sent
with no parent; a comm message then still gets the latest request."""

RECENT_REQUESTS = 256
"""Frontend requests remembered by msg_id, to parent what the sandbox sends on their behalf later."""

WIDGET_EVENT = "of this widget event"
"""Whose output the budget of a comm message's handling speaks of."""


def weakly(method: Callable[..., Any]) -> Callable[..., Any]:
    """The bound ``method`` called through a weak reference to its object (nothing happens once
    that is gone). The session gives its backend its handlers so: the backend's strong reference
    to a bound method of the session would close a cycle (session -> backend -> handler ->
    session), and a closed session's objects would wait for a full collection instead of being
    freed when its door lets go of it (issue 37)."""
    ref = weakref.WeakMethod(method)

    def call(*args: Any, **kwargs: Any) -> Any:
        bound = ref()
        return None if bound is None else bound(*args, **kwargs)

    return call


def msg_id_of(request: dict[str, Any] | None) -> str | None:
    """The msg_id in a frontend message's header (the Jupyter messaging spec), or None."""
    return ((request or {}).get("header") or {}).get("msg_id")


class SandboxSession:
    """One sandbox (a backend by name), its output pipeline, and the operations on it.

    Args:
        backend: the registered backend's name (``local``, ``docker``, ...), or a backend made
            already (a fork of another session's: :meth:`Backend.fork`).
        parent: the front door's configurable; its config reaches the backend's traits.
        policy: the output policy of the session's outputs.
        options: given the backend's class, checks the option names the door was given (each
            door words its own error) and returns the traits to make the backend with.
        output_budget: ``(bytes, setting)``: output one cell may show (0: no limit) and the
            option that sets it, named by the budget's marker.
        page_comms: whether the door's page can hold widget views (a kernel or a host kernel:
            yes; the API: no). Comms pass only when the backend carries them too.
        no_comms_note: the note said once when widgets cannot work.
        completions: whether the door answers a person's completion requests (the kernel); the
            sandbox then warms its completer as it starts.

    Raises:
        ConfigError: an unknown backend or option; BadValue: a refused option value.
        BackendUnavailable: the backend's package is not installed.
    """

    def __init__(self, backend: str | Backend, *, parent: Configurable, policy: OutputPolicy,
                 options: Callable[[type[Backend]], dict[str, Any]] = lambda cls: {},
                 output_budget: tuple[int, str] = (0, "max_output_bytes"), page_comms: bool = True,
                 no_comms_note: str = NO_COMMS_NOTE, files: FileOptions = FileOptions(),
                 line_commands: str | None = None, egress_commands: str = "ask", completions: bool = False) -> None:
        self.backend: Backend = backend if isinstance(backend, Backend) else make_backend(
            backend, parent=parent, options=options, output_budget=output_budget, completions=completions)
        self.max_output_bytes, self.budget_setting = output_budget
        comms = page_comms and self.backend.capabilities.comms
        self.pipeline = OutputPipeline(policy, comms=comms, no_comms_note=no_comms_note,
                                       budget_setting=self.budget_setting)
        self.pipeline.backend = self.backend.name
        self._requests: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._outside: OutsideSink | None = None
        self._replaced: list[Callable[[], None]] = []
        self._lost = False  # the sandbox died during the last cell
        self._progress: Emit | None = None
        self._progress_cell: tuple[Emit, set[str]] | None = None  # a cell waiting for the start
        self._progress_handler = weakly(self._show_progress)
        self.backend.set_comm_handler(weakly(self._unsolicited))
        self.files = SessionFiles(self.backend, files)
        self.on_replaced(self.files.replaced)
        self.checkpoints = SessionCheckpoints(self.backend)
        """Automatic checkpoints after long cells, and undo / restore (docs/how-to/checkpoints.md)."""
        self.lines = None if line_commands is None else Lines(self, self.files.folder, line_commands,
                                                              egress_commands=egress_commands)

    # -- what it is --------------------------------------------------------------------------
    @property
    def name(self) -> str:
        """The backend's registry name."""
        return self.backend.name

    @property
    def capabilities(self) -> Capabilities:
        return self.backend.capabilities

    @property
    def started(self) -> bool:
        return self.backend.started

    def describe(self) -> dict[str, Any]:
        """The backend's description (``backend``, ``sandbox_id``, ``limits``, ...), JSON-able."""
        return self.backend.describe()

    def status(self) -> dict[str, Any]:
        """What every door's status shows: :meth:`describe`, with ``started`` (bool) and
        ``capabilities`` (the names the backend declares); JSON-able, no secrets."""
        return {**self.describe(), "started": self.started, "capabilities": self.capabilities.names()}

    @property
    def backend_class(self) -> type[Backend]:
        """The backend's class, whose traits are the session's options."""
        return type(self.backend)

    @property
    def language(self) -> str:
        """The language the sandbox runs (``python``; e2b's ``language``)."""
        return getattr(self.backend, "language", "python")

    @property
    def kernel_info(self) -> dict[str, Any] | None:
        """The sandbox kernel's ``kernel_info_reply`` content while it runs (``language_info``,
        ``banner``, ``supported_features``), else None."""
        return self.backend.kernel_info

    @property
    def runs_other_language(self) -> bool:
        """Whether the sandbox may run a kernel of another language than Python (a door learns
        which only once it runs: :attr:`kernel_info`)."""
        return self.backend.runs_other_language

    @property
    def starts_quickly(self) -> bool:
        """Whether a start is done well within a frontend's first request's timeout
        (:attr:`~sandbox_kernel.backends.base.Backend.starts_quickly`)."""
        return self.backend.starts_quickly

    def starts_at_launch(self, setting: bool | None) -> bool:
        """Whether a door that opens now should start the sandbox at once: ``setting`` when
        given (an option of the door), else as the backend prefers
        (:attr:`~sandbox_kernel.backends.base.Backend.starts_at_launch`)."""
        return self.backend.starts_at_launch if setting is None else setting

    # -- lifecycle ---------------------------------------------------------------------------
    async def start(self) -> None:
        """Start the sandbox (idempotent). Raises what :meth:`Backend.start` raises."""
        await self.backend.start()

    async def shutdown(self) -> None:
        """Remove the sandbox (idempotent; never raises for one already gone)."""
        await self.backend.shutdown()

    async def restart(self) -> None:
        """A fresh interpreter with the same settings; the state is lost (its checkpoints stay,
        where the backend keeps them: ``%sandbox restore`` brings it back)."""
        await self.backend.restart()
        await self.checkpoints.forget_cells()
        self._said_replaced()

    async def interrupt(self) -> None:
        """Interrupt the running cell; the state survives."""
        await self.backend.interrupt()

    async def usage(self) -> dict[str, int] | None:
        """The sandbox's resource use (``{"memory_bytes": n}``, ``cpu_percent``, ``cpu_count``), or
        None (not running, or the backend cannot tell)."""
        return await self.backend.usage() if self.backend.started else None

    async def paused_sandboxes(self) -> list[str]:
        """The ids of the session's paused sandboxes, for a backend that declares ``pause`` (e2b;
        also noted in :meth:`describe` as ``paused_sandboxes``); empty for the others."""
        return await self.backend.paused_sandboxes() if self.capabilities.pause else []

    def on_replaced(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` whenever the sandbox is replaced by a fresh one (a restart, or a
        dead sandbox replaced at the next cell): its widgets and its state are gone."""
        self._replaced.append(callback)

    def _said_replaced(self) -> None:
        for callback in self._replaced:
            callback()

    # -- the request being served --------------------------------------------------------------
    @contextlib.contextmanager
    def serving(self, request: dict[str, Any] | None) -> Iterator[None]:
        """Around the backend calls for the frontend's ``request`` (a Jupyter message): the
        sandbox's request gets its msg_id (:data:`request_msg_id`: ipywidgets routes echoes and
        an ``Output`` widget captures by it), and it is remembered as the parent of what the
        sandbox later sends on its behalf."""
        msg_id = msg_id_of(request)
        if msg_id:
            self._requests[msg_id] = request
            self._requests.move_to_end(msg_id)
            while len(self._requests) > RECENT_REQUESTS:
                self._requests.popitem(last=False)
        token = request_msg_id.set(msg_id)
        subshell = request_subshell_id.set(((request or {}).get("header") or {}).get("subshell_id"))
        try:
            yield
        finally:
            request_msg_id.reset(token)
            request_subshell_id.reset(subshell)

    # -- running code ------------------------------------------------------------------------
    def cell(self, sink: Emit, *, max_output_bytes: int | None = None, policy: OutputPolicy | None = None,
             scope: str = "of this cell", say_changes: bool = True) -> Cell:
        """The pipeline's :class:`Cell` for one execution into ``sink`` (budget: the session's
        unless given), which also tells the session when the backend replaced the sandbox."""
        budget = self.max_output_bytes if max_output_bytes is None else max_output_bytes
        cell = self.pipeline.cell(sink, budget, policy, scope=scope, say_changes=say_changes)
        cell.on_replaced = self._said_replaced
        return cell

    async def run(self, code: str, sink: Emit, *, request: dict[str, Any] | None = None,
                  stdin: StdinHandler | None = None, timeout: float | None = None,
                  max_output_bytes: int | None = None, policy: OutputPolicy | None = None,
                  raise_failures: bool = False, silent: bool = False, store_history: bool = True,
                  user_expressions: dict[str, str] | None = None) -> Outcome:
        """Run ``code`` in the sandbox (started if needed); its events pass the cell pipeline
        (policy, widget rules, budget) into ``sink``, live and in order.

        Args:
            code: the cell's source.
            sink: shows each event the door may show.
            request: the frontend's request being served (a Jupyter message), or None.
            stdin: answers ``input()`` prompts; None: the frontend takes no input.
            timeout: seconds before the cell is interrupted; None: no limit.
            max_output_bytes: this cell's budget (default: the session's).
            policy: this cell's output policy (default: the session's).
            raise_failures: raise a :class:`SandboxError` again after the pipeline showed it
                (the API does; the kernel and the magic only show it).
            silent, store_history, user_expressions: as the messaging spec's ``execute_request``
                (a backend without ``capabilities.payloads`` ignores them).

        Returns:
            The :class:`Outcome`; a failure of the sandbox is ``status="error"`` with a short
            ``Error`` shown (never a traceback of ours). Its payloads and user_expressions are
            policed (:mod:`.replies`).
        """
        self.pipeline.renew_outside_budget(self.max_output_bytes if max_output_bytes is None else max_output_bytes)
        if self.lines is not None:
            answered, code = await self._answer_lines(code, self.cell(sink, max_output_bytes=max_output_bytes,
                                                                      policy=policy), stdin)
            if answered is not None:
                return answered
        failures: list[SandboxError] = []
        if self._lost:  # the sandbox died during the last cell: this one starts a fresh sandbox
            self._lost = False
            self._said_replaced()

        async def work(emit: Emit) -> Outcome:
            with self.serving(request):
                try:
                    return await self._execute(code, emit, timeout, stdin, silent=silent, store_history=store_history,
                                               user_expressions=user_expressions)
                except SandboxError as exc:
                    failures.append(exc)
                    self._lost = isinstance(exc, SandboxDied) and not exc.restored
                    if isinstance(exc, SandboxDied) and exc.restored:
                        self.checkpoints.recovered(exc.checkpoint)
                    raise

        outcome = await self.cell(sink, max_output_bytes=max_output_bytes, policy=policy).run(work)
        if outcome.payload or outcome.user_expressions:
            policy = policy or self.pipeline.policy
            outcome = replace(outcome, payload=tuple(replies.payload(outcome.payload, policy)),
                              user_expressions=replies.user_expressions(outcome.user_expressions, user_expressions,
                                                                        policy))
        if failures and raise_failures:
            failures[0].outcome = outcome
            raise failures[0]
        return outcome

    async def _execute(self, code: str, emit: Emit, timeout: float | None, stdin: StdinHandler | None,
                       **request: Any) -> Outcome:
        """The backend's execution of ``code`` (``request``: ``silent``, ``store_history``,
        ``user_expressions``), with the session's files around it (:mod:`.files`); the cell's
        number joins the line of the session's checkpoints (:mod:`.checkpoints`)."""
        async def counted(watched: Emit) -> Outcome:
            outcome = await self.backend.execute(code, watched, timeout=timeout, stdin=stdin, **request)
            if not request.get("silent"):
                self.checkpoints.after_cell(outcome)
            return outcome

        return await self.files.run_cell(emit, counted, lambda: self._start_showing(emit))

    async def _answer_lines(self, code: str, cell: Cell, stdin: StdinHandler | None) -> tuple[Outcome | None, str]:
        """Answer the cell's leading ``%sandbox`` lines (:mod:`.lines`) into ``cell``; returns the
        outcome when nothing is left to run (all answered, or one failed), and the rest."""
        said, rest = leading(code)
        outcome = Outcome("ok", None)
        for line in said:
            outcome = await self.lines.run(line, cell.emit, stdin)
            if outcome.status != "ok":
                break
        cell.finish()
        return (outcome if said and (outcome.status != "ok" or not rest.strip()) else None), rest

    # -- comms (ipywidgets) ------------------------------------------------------------------
    async def comm(self, msg_type: str, content: dict[str, Any], sink: Emit, *, request: dict[str, Any] | None = None,
                   metadata: dict[str, Any] | None = None, buffers: list[bytes] | None = None) -> bool:
        """Send the frontend's ``comm_open``/``comm_msg``/``comm_close`` into the sandbox and show
        what handling it produced (an ``echo_update``, ``interact``'s output) in ``sink``, under
        a budget of its own and without the policy's per-cell note (a slider would repeat it).

        Returns:
            False when nothing was sent: no running sandbox, or one that carries no comms
            (then no target can take a ``comm_open``: the door answers ``comm_close``).
        """
        if not self.backend.started or not self.pipeline.comms:
            return False
        self.pipeline.from_frontend(msg_type, content)
        outputs = self.cell(sink, scope=WIDGET_EVENT, say_changes=False)
        with self.serving(request):
            try:
                await self.backend.send_comm(msg_type, content, metadata, buffers or [], emit=outputs.emit)
            except SandboxError as exc:
                self.backend.log.warning("A %s did not reach the sandbox: %s", msg_type, exc)
            finally:
                outputs.finish()
        return True

    async def comm_settled(self, msg_id: str) -> bool:
        """Whether the sandbox's kernel answered the comm message ``msg_id``, sent while a cell
        ran, with ``status: idle`` (waiting for it); False when it will not tell."""
        with contextlib.suppress(SandboxError):
            return await self.backend.comm_settled(msg_id)
        return False

    async def comm_info(self, target_name: str | None = None) -> dict[str, Any]:
        """``{comm_id: {"target_name": ...}}`` of the comms open in the sandbox's kernel (empty
        when it is not running, carries no comms, or fails)."""
        with contextlib.suppress(SandboxError):
            if self.backend.started and self.backend.capabilities.comms:
                return (await self.backend.comm_info(target_name)).get("comms", {})
        return {}

    # -- history, the debugger, subshells -----------------------------------------------------
    async def history(self, content: dict[str, Any], *, request: dict[str, Any] | None = None) -> dict[str, Any]:
        """A ``history_reply``'s content for a ``history_request``'s ``content``, from the sandbox's
        IPython (started if needed; a ``tail`` asked while it starts is read from where that
        IPython keeps it, where the backend can: :meth:`Backend.history_while_starting`); no rows
        when the backend has no ``capabilities.history`` or fails."""
        with contextlib.suppress(SandboxError):
            if self.backend.capabilities.history:
                if not self.backend.started and (early := await self.backend.history_while_starting(content)):
                    return replies.history(early)
                await self.backend.start()
                with self.serving(request):
                    return replies.history(await self.backend.history(content))
        return replies.no_history()

    async def debug(self, content: dict[str, Any]) -> dict[str, Any]:
        """A ``debug_reply``'s content for a ``debug_request``'s ``content`` (a Debug Adapter
        Protocol request), from the sandbox kernel's debugger (started if needed), policed; a DAP
        error response when the backend has no ``capabilities.debugger`` or fails. The debugger's
        events come through the outside sink as :class:`~sandbox_kernel.core.events.DebugEvent`."""
        try:
            self.backend.require("debugger", "the debugger")
            await self.backend.start()
            reply = await self.backend.debug_request(content)
        except SandboxError as exc:
            return replies.debug_error(content, str(exc))
        return replies.debug_reply(content, reply, self.pipeline.policy)

    async def delete_subshell(self, subshell_id: str) -> None:
        """The frontend deleted its kernel subshell ``subshell_id``: so is the sandbox kernel's."""
        with contextlib.suppress(SandboxError):
            if self.backend.capabilities.subshells and self.backend.started:
                await self.backend.delete_subshell(subshell_id)

    # -- output outside any cell -------------------------------------------------------------
    def set_outside_sink(self, sink: OutsideSink | None) -> None:
        """Show what the sandbox sends outside any request (a sandbox thread's output, a widget
        it changes) with ``sink(event, request)``, after the policy and the outside-cell budget."""
        self._outside = sink

    def _unsolicited(self, event: Event, parent_id: str | None) -> None:
        sink = self._outside
        if sink is None:
            return
        request = self._requests.get(parent_id) if parent_id else None
        if parent_id is None and not isinstance(event, Comm):
            # The sandbox's kernel published it with no parent (as ipykernel 7.4 does with its
            # "No such comm" line for a comm message it handles beside a busy cell): python3's
            # frontend shows such output in no cell, so it keeps no parent here either.
            request = {}
        elif request is None and self._requests:
            request = next(reversed(self._requests.values()))
        self.pipeline.outside_cell(event, lambda shown: sink(shown, request))

    def set_progress_sink(self, sink: Emit | None) -> None:
        """Show what the backend reports while it prepares a sandbox (an image build) in ``sink``
        while no cell waits for the start (then it goes to that cell: :meth:`_start_showing`)."""
        self._progress = sink
        self.backend.set_progress_handler(self._progress_handler if sink is not None else None)

    async def _start_showing(self, emit: Emit) -> None:
        """Start the sandbox for a cell, what it reports meanwhile (an image build) shown in it,
        also when the start was already under way (a kernel starts its sandbox at launch, and a
        scripted run's first cell must say what it waits for)."""
        if self.backend.started:
            return
        self._progress_cell = (emit, set())
        self.backend.set_progress_handler(self._progress_handler)
        try:
            await self.backend.start()
        finally:
            self._progress_cell = None
            self.backend.set_progress_handler(self._progress_handler if self._progress is not None else None)

    def _show_progress(self, event: Event) -> None:
        """The backend's progress event, to the cell waiting for the start, else to the door's
        sink. A cell that comes in during a build first gets the build's display as
        ``display_data``: an ``update_display_data`` for a display it never had is ignored."""
        if self._progress_cell is None:
            if self._progress is not None:
                self._progress(event)
            return
        emit, shown = self._progress_cell
        if isinstance(event, Display) and event.display_id is not None and event.display_id not in shown:
            shown.add(event.display_id)
            event = replace(event, update=False)
        emit(event)

    # -- completion and inspection ----------------------------------------------------------
    async def _answering(self, capability: str) -> Backend | None:
        """The started backend when it declares ``capability``, else None (also on a failure)."""
        with contextlib.suppress(SandboxError):
            if getattr(self.backend.capabilities, capability):
                await self.backend.start()
                return self.backend
        return None

    async def complete(self, code: str, cursor_pos: int) -> dict[str, Any]:
        """A ``complete_reply``'s content from the sandbox; no matches when it cannot answer."""
        if (backend := await self._answering("completion")) is not None:
            with contextlib.suppress(SandboxError):
                return await backend.complete(code, cursor_pos)
        return replies.no_completion(cursor_pos)

    async def inspect(self, code: str, cursor_pos: int, detail_level: int = 0) -> dict[str, Any]:
        """An ``inspect_reply``'s content from the sandbox, its MIME bundle policed like any
        output (the tooltip renders it in the page); ``found: False`` when it cannot answer."""
        if (backend := await self._answering("inspection")) is not None:
            with contextlib.suppress(SandboxError):
                reply = await backend.inspect(code, cursor_pos, detail_level)
                data = reply.get("data")
                policed = self.pipeline.policy.bundle(data if isinstance(data, dict) else {}, reply.get("metadata"))
                return {**reply, "data": policed.data, "metadata": policed.metadata}
        return replies.not_found()

    async def is_complete(self, code: str) -> dict[str, Any]:
        """An ``is_complete_reply``'s content from the sandbox, else IPython's own judgement; also
        while a Python sandbox is not up yet (a console asks at every Enter and waits 1 s: the same
        judgement, without the wait for a start)."""
        starting = not self.backend.started and not self.backend.runs_other_language
        if not starting and (backend := await self._answering("completion")) is not None:
            with contextlib.suppress(SandboxError):
                return await backend.is_complete(code)
        return replies.judged(code)

    # -- egress ------------------------------------------------------------------------------
    async def allow(self, *hosts: str) -> list[str]:
        """Let the sandbox reach ``hosts`` as well (``allow_hosts`` entries: ``example.org``,
        ``api.example.com:8443``, ``*.example.com``, an address or network, the preset ``pypi``),
        keeping its state: in force when this returns (within a second).

        Returns:
            The entries now in force, presets expanded.

        Raises:
            EgressError: a bad entry, or a running sandbox started without ``allow_hosts`` (it has
                no egress proxy to change: restart it, which loses the state).
            NotSupported: the backend cannot change a running sandbox's hosts
                (``capabilities.egress_update``; local never can).
        """
        self.backend.require("egress_update", "changing the allowed hosts of a running sandbox")
        current = list(self.backend.allow_hosts)
        return await self.backend.set_allow_hosts(current + [h for h in hosts if h not in current])

    # -- files, variables, commands ----------------------------------------------------------
    async def upload(self, local: str | Path, remote: str) -> str:
        """Copy the host file ``local`` into the sandbox at ``remote`` (relative: its working
        directory); returns the path inside. Raises FileNotFoundError, NotSupported (no
        ``capabilities.files``), SandboxError."""
        self.backend.require("files", "file upload")
        where = await self.backend.upload(local, remote)
        self.files.uploaded(remote, Path(local).stat().st_size)
        return where

    async def download(self, remote: str, local: str | Path, *, max_bytes: int = 0) -> Path:
        """Copy the sandbox's file ``remote`` to the host path ``local``; returns that path.
        ``max_bytes``: the most bytes read (0: no bound). Raises FileNotFoundError, FileTooLarge,
        NotSupported (no ``capabilities.files``), SandboxError."""
        self.backend.require("files", "file download")
        return await self.backend.download(remote, local, max_bytes=max_bytes)

    async def put(self, name: str, value: Any, *, max_bytes: int, setting: str) -> int:
        """Set the sandbox's variable ``name`` to a copy of ``value``, as data only; returns the
        encoded size in bytes. Raises TransferError (``setting`` named when over ``max_bytes``),
        NotSupported."""
        return await transfer.put(self.backend, name, value, max_bytes=max_bytes, setting=setting)

    async def get(self, name: str, *, max_bytes: int, setting: str) -> Any:
        """A host copy of the sandbox's variable ``name``, built from data only. Raises
        TransferError, NotSupported."""
        return await transfer.get(self.backend, name, max_bytes=max_bytes, setting=setting)

    async def run_command(self, command: str, *, timeout: float | None, max_output_bytes: int,
                          allowlist: Any = None) -> CommandResult:
        """Run the shell command line ``command`` in the sandbox's working directory.

        Raises:
            CommandRefused: ``command`` matches none of ``allowlist``
                (:func:`~sandbox_kernel.session.commands.compile_allowlist`).
            ExecutionTimeout: it ran past ``timeout`` seconds and was killed.
            SandboxError: the sandbox failed, or cannot run Python.
        """
        commands.check(command, allowlist)
        collector = Collector()
        code = commands.runner_code(command, timeout, max_output_bytes)
        outcome = await self.run(code, collector, timeout=None if timeout is None else timeout + 30,
                                 max_output_bytes=0, raise_failures=True)
        error = outcome.error and f"{outcome.error.ename}: {outcome.error.evalue}"
        return commands.parse(collector.text("stdout"), error or collector.text("stderr"), timeout)

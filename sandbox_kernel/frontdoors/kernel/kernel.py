"""``SandboxKernel``: a Jupyter wrapper kernel whose cells run in a sandbox backend.

It overrides ipykernel's ``do_*`` methods and a few request handlers whose replies depend on
the sandbox (``kernel_info_request``, ``comm_info_request``, ``interrupt_request``, the comm
messages); the rest of the wire protocol is ipykernel's. Each ``execute_request`` becomes
:meth:`SandboxSession.run` with IOPub messages as its sink.
Options are traitlets config: ``--SandboxKernel.backend=docker --DockerBackend.memory_limit=2g``
on the kernelspec's argv, or in ``sandbox_kernel_config.py`` in a Jupyter config directory.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
from contextvars import ContextVar
from typing import Any

import zmq
from ipykernel.kernelbase import Kernel
from traitlets import Bool, CaselessStrEnum, Float, TraitError, Unicode

from ..._version import __version__
from ...backends.base import Backend
from ...core.errors import ConfigError, SandboxError
from ...core.events import Comm, Emit, Event, Outcome
from ...core.iopub import publish, to_iopub
from ...policy import OutputOptions, OutputPolicy
from ...runtime import compat
from ...runtime.config_check import unknown_options
from ...runtime.sigint import on_sigint
from ...runtime.traits import ByteSize
from ...session import replies
from ...session.files import FileOptions
from ...session.lines import FILE_COMMANDS
from ...session.pipeline import OutputPipeline
from ...session.session import SandboxSession
from . import finisher

BESIDE: ContextVar[bool] = ContextVar("sandbox_kernel_beside", default=False)
"""True while ipykernel dispatches a message beside another request of its shell."""


class SandboxKernel(Kernel, OutputOptions):
    """The wrapper kernel. One backend per kernel process, started at the first cell.

    Every cell, comm message and unsolicited output of the sandbox goes through its
    :class:`~sandbox_kernel.session.session.SandboxSession` (output policy, widget rules,
    budget) before it becomes an IOPub message.
    """

    implementation = "sandbox_kernel"
    implementation_version = __version__
    python_language_info = {
        "name": "python",
        "version": "3",
        "mimetype": "text/x-python",
        "codemirror_mode": {"name": "ipython", "version": 3},
        "pygments_lexer": "ipython3",
        "nbconvert_exporter": "python",
        "file_extension": ".py",
    }

    backend = Unicode("local", config=True, help="The sandbox backend: local, docker, e2b, gateway, or any "
                           "name registered under the 'sandbox_kernel.backends' entry point.")
    cell_timeout = Float(None, allow_none=True, config=True,
                         help="Seconds a cell may run; then it is interrupted and the cell says so (the state "
                              "is kept). None: no limit.")
    max_output_bytes = ByteSize(10 * 1024**2, config=True,
                                help="Output (stdout, stderr, rich data) one cell may show, e.g. '10m'; "
                                     "the rest is dropped with a marker saying how much. The same bound holds "
                                     "for what one widget event's handler shows, and for all a sandbox thread "
                                     "prints between one cell's start and the next. 0: no limit.")
    start_sandbox_at_launch = Bool(None, allow_none=True, config=True,
                                   help="Start the sandbox when the kernel starts, not at the first cell. "
                                        "None (default): as the backend prefers: at launch for local and "
                                        "docker (a new notebook's first Tab and the debugger find the sandbox "
                                        "up) and for a backend that keeps a warm pool (pool_size > 0), else at "
                                        "the first cell.")
    artifacts = Bool(True, config=True, help="After a cell, list the files it created or changed in the sandbox's "
                                             "working directory (%sandbox download --artifacts copies them here).")
    file_commands = CaselessStrEnum(list(FILE_COMMANDS), "ask", config=True,
                                    help="%sandbox upload/download in a cell touch this computer's files: 'ask' "
                                         "the notebook user first (refused where nobody can answer: nbclient, "
                                         "papermill), 'allow', or 'deny'. A notebook may come from anyone.")
    egress_commands = CaselessStrEnum(list(FILE_COMMANDS), "ask", config=True,
                                      help="%sandbox allow HOST in a cell widens what the sandbox may reach: 'ask' the "
                                           "notebook user first (refused where nobody can answer), 'allow', or "
                                           "'deny'. A notebook may come from anyone.")

    # ipykernel sleeps 0.5 ms before each execute_reply to let output flush; our outputs are
    # published before do_execute returns, so that sleep is pure latency.
    _execute_sleep = 0.0

    def __init__(self, **kwargs: Any) -> None:
        self._config_error: ConfigError | None = None
        super().__init__(**kwargs)
        self.sandbox: SandboxSession | None = None
        # the main thread's loop, which owns the session: ipykernel runs control requests and
        # each kernel subshell's requests on threads (and loops) of their own
        self._loop = asyncio.get_event_loop()
        try:
            self._policy = self.make_policy()
        except ConfigError as exc:  # e.g. beyond the administrator's lock: every cell says it
            self._config_error, self._policy = exc, OutputPolicy()
        for msg_type in ("comm_open", "comm_msg", "comm_close"):
            self.shell_handlers[msg_type] = self._forward_comm
        self._launching: asyncio.Task | None = None
        self._ending: asyncio.Task | None = None  # SIGTERM's (end_on_sigterm)
        self._comms_served = 0  # comm messages the main shell is serving (see _relay_in_turn)
        if self.start_sandbox_at_launch is not False:  # a failure here is reported again by the first cell
            task = self._launching = self._loop.create_task(self._start_at_launch())
            task.add_done_callback(lambda t: t.cancelled() or t.exception() and self.log.warning(
                "The sandbox did not start: %s", t.exception()))

    async def _start_at_launch(self) -> None:
        """Start the sandbox now if ``start_sandbox_at_launch`` says so (None: as its backend
        prefers: :meth:`SandboxSession.starts_at_launch`)."""
        try:
            at_launch = self._session().starts_at_launch(self.start_sandbox_at_launch)
        except SandboxError:  # the first cell says it
            return
        if at_launch:
            await self._ensure_sandbox()

    LANGUAGE_WAIT_S = 30.0
    """Seconds ``kernel_info_request`` waits for a sandbox that runs another language's kernel."""

    @property
    def language_info(self) -> dict[str, Any]:
        """The sandbox kernel's ``language_info`` once it runs (so a bash or R kernel in the
        sandbox is highlighted as such), else Python's."""
        inner = self.sandbox.kernel_info if self.sandbox else None
        return (inner or {}).get("language_info") or self.python_language_info

    @property
    def banner(self) -> str:
        info = self.sandbox.describe() if self.sandbox else {"backend": self.backend}
        details = ", ".join(f"{k}={v}" for k, v in info.items() if v and k != "backend")
        language = self.language_info.get("name", "python")
        text = f"sandbox-kernel {__version__}: {'Python' if language == 'python' else language} in a " \
               f"{info['backend']} sandbox" + (f" ({details})" if details else "")
        inner = (self.sandbox.kernel_info or {}).get("banner") if self.sandbox else None
        return text + (f"\n{inner}" if inner and language != "python" else "")

    STARTING_WAIT_S = 2.5
    """Seconds ``kernel_info_request`` waits for a sandbox starting at launch that does not start
    quickly (a container created now), under JupyterLab's 3 s ``kernelInfoTimeout``: the
    frontend's first Tab, pressed as the kernel shows ready, then finds the sandbox up instead of
    waiting past the completer's 1 s."""

    async def kernel_info_request(self, stream, ident, parent):
        """``kernel_info_request``: frontends ask when they connect, then highlight cells in the
        language of the reply and send their first requests. So a sandbox that runs another
        language's kernel is started first (up to :data:`LANGUAGE_WAIT_S`), and one starting at
        launch is waited for (up to :data:`STARTING_WAIT_S`) unless its backend
        :attr:`~sandbox_kernel.backends.base.Backend.starts_quickly` (local, a warm pool's take):
        python3 answers at once, and so does this kernel then, so that the frontend's own wait
        after the reply (jupyter_client's ``wait_for_ready`` drains IOPub until 0.2 s pass without
        a message) overlaps the start; waiting made a new notebook's first result 1.56-1.71x a
        plain ipykernel's on sandbox-local, 1.41-1.45x on a pooled sandbox-docker
        (benchmarks/run.py). The requests that need the sandbox (completion, inspection,
        history, ``debugInfo``) wait for its start themselves. A failure is reported again by the
        first cell."""
        with contextlib.suppress(Exception):
            await self._on_main(self._sandbox_for_kernel_info())
        await super().kernel_info_request(stream, ident, parent)

    async def _sandbox_for_kernel_info(self) -> None:
        if self._session().started:
            return
        if self.sandbox.runs_other_language:
            await asyncio.wait_for(asyncio.shield(self._ensure_sandbox()), self.LANGUAGE_WAIT_S)
        elif self._launching is not None and not self._launching.done() and not self.sandbox.starts_quickly:
            await asyncio.wait_for(asyncio.shield(self._launching), self.STARTING_WAIT_S)

    @property
    def kernel_info(self) -> dict[str, Any]:
        """The ``kernel_info_reply`` content: ipykernel's, with ``supported_features`` saying what
        the sandbox serves: ``kernel subshells`` when its backend runs subshell requests
        concurrently, ``debugger`` when it relays the sandbox kernel's debugger and that kernel
        has one (ipykernel would list it whenever debugpy imports here, which would debug this
        wrapper's process; and importing it costs 65 ms of the first reply). Spec: the messaging
        spec's "Kernel info" (JEP 92 for ``supported_features``, JEP 91 for subshells)."""
        from ipykernel._version import kernel_protocol_version

        return {"protocol_version": kernel_protocol_version, "implementation": self.implementation,
                "implementation_version": self.implementation_version, "language_info": self.language_info,
                "banner": self.banner, "help_links": self.help_links, "supported_features": self._features()}

    def _features(self) -> list[str]:
        try:
            capabilities = self._session().capabilities
        except SandboxError:
            return []
        inner = (self.sandbox.kernel_info or {}).get("supported_features") if self.sandbox.started else None
        features = ["kernel subshells"] if capabilities.subshells and compat.supports_subshells(self) else []
        if capabilities.debugger and (inner is None or "debugger" in inner):
            features.append("debugger")
        return features

    def _load_config(self, cfg, section_names=None, traits=None):
        """Keep a bad option value from killing the kernel process: the kernel starts, and
        every cell reports the bad value (a frontend would only say "the kernel died")."""
        try:
            super()._load_config(cfg, section_names=section_names, traits=traits)
        except (TraitError, ValueError) as exc:
            self._config_error = ConfigError(f"Bad option for the sandbox kernel: {exc}")

    # -- the sandbox session ----------------------------------------------------------------
    async def _ensure_sandbox(self) -> SandboxSession:
        """The session, created from config on first use, with its sandbox started.

        Raises:
            SandboxError: an unknown backend, a bad option value, or a start failure.
        """
        await self._session().start()
        return self.sandbox

    def _session(self) -> SandboxSession:
        """The session, created from config on first use (its sandbox not started).

        Raises:
            SandboxError: an unknown backend or a bad option value.
        """
        if self._config_error is not None:
            raise self._config_error
        if self.sandbox is None:
            def options(cls: type[Backend]) -> dict[str, Any]:
                if unknown := unknown_options(self.config, [type(self), cls]):  # traitlets only warns
                    raise ConfigError(f"Bad option for the sandbox kernel: {'; '.join(unknown)}.")
                return {}  # the backend's traits come from this kernel's config

            self.sandbox = SandboxSession(self.backend, parent=self, policy=self._policy, options=options,
                                          output_budget=(self.max_output_bytes, "SandboxKernel.max_output_bytes"),
                                          files=FileOptions(artifacts=self.artifacts), line_commands=self.file_commands,
                                          egress_commands=self.egress_commands, completions=True)
            self.sandbox.set_outside_sink(self._publish)
            self.sandbox.set_progress_sink(self._publish)  # e.g. an image build at the first cell
        return self.sandbox

    def _publish(self, event: Event, parent: dict | None = None) -> None:
        """Publish one (policed) event on IOPub as a reply to ``parent`` (default: the shell
        request being served)."""
        msg_type, _ = to_iopub(event)
        publish(self.session, self.iopub_socket, event, self.get_parent("shell") if parent is None else parent,
                ident=compat.iopub_topic(self, msg_type))

    # -- comms (ipywidgets) -------------------------------------------------------------------
    async def _forward_comm(self, stream, ident, msg) -> None:
        """A frontend's ``comm_open``/``comm_msg``/``comm_close``: pass it into the sandbox and
        publish what handling it produced (e.g. ipywidgets' ``echo_update``) before this
        request goes idle. (No reply: comm messages have none.)

        It never starts a sandbox: JupyterLab's widget manager opens a comm at every connect.
        With no running sandbox, or one that cannot carry comms, no target can take the comm,
        so a ``comm_open`` is answered with ``comm_close``, as a kernel without the target does.

        A comm message for a shell (main or subshell) that serves another request is dispatched by
        ipykernel 7.4 beside that request, which then gets back the shell parent of the moment the
        comm arrived (``Kernel.shell_main``): if relaying it outlasts that request, the next one
        published its ``idle`` under the wrong parent and JupyterLab waited for ever ([*] after a
        reopen). So that relay goes on in the background and this handler returns at once: beside
        another comm message, in its turn after it and with a status of its own, as python3
        answers it (:meth:`_relay_in_turn`); beside a cell, at once (a cell waiting for a widget's
        change gets it), with a status of its own only once the sandbox's kernel gives it one
        (:meth:`_relay_at_once`).
        """
        on_main = asyncio.get_running_loop() is self._loop
        if not BESIDE.get():
            if not on_main:
                await self._on_main(self._relay_comm(msg))
                return
            await self._relay_counted(msg)
        elif on_main and self._comms_served:
            relay = self._loop.create_task(self._relay_in_turn(msg))  # python3's order and status
            relay.add_done_callback(self._relayed_beside)
        else:
            relay = asyncio.run_coroutine_threadsafe(self._relay_at_once(msg), self._loop)  # from any thread
            relay.add_done_callback(self._relayed_beside)

    async def _relay_at_once(self, msg: dict) -> None:
        """A comm message that came beside a cell: relayed at once (a cell waiting for a widget's
        change gets it). When the sandbox's kernel handles it after a sync cell, as python3
        does, it answers with an ``idle``: then so does this kernel, with a ``busy`` before, for
        ipywidgets' frontend sends that widget's next change only at that idle."""
        await self._relay_comm(msg)
        if self.sandbox is not None and await self.sandbox.comm_settled(msg["header"]["msg_id"]):
            async with compat.main_shell_lock(self):  # after the cell's idle, as on python3
                compat.publish_status(self, "busy", msg)
                compat.publish_status(self, "idle", msg)

    async def _relay_in_turn(self, msg: dict) -> None:
        """A comm message that came while the main shell served another comm message (its relay
        awaits the sandbox, so ipykernel 7.4 dispatches the next one beside it, with no status):
        relayed after it, between ``status: busy`` and ``idle`` of its own, as python3 handles
        it. ipywidgets' frontend sends a model's next change only at the ``idle`` of its last one
        (``WidgetModel._pending_msgs``): a change answered by no ``idle`` held back every later
        one, and a dragged slider stayed at its previous value."""
        async with compat.main_shell_lock(self):
            compat.publish_status(self, "busy", msg)
            try:
                await self._relay_counted(msg)
            finally:
                compat.publish_status(self, "idle", msg)

    async def _relay_counted(self, msg: dict) -> None:
        """:meth:`_relay_comm` on the main shell, counted in ``_comms_served`` while it runs."""
        self._comms_served += 1
        try:
            await self._relay_comm(msg)
        finally:
            self._comms_served -= 1

    async def dispatch_shell(self, msg, *args: Any, **kwargs: Any):
        """ipykernel's, noting for the handler whether the message is dispatched beside another
        request (``concurrent``, ipykernel 7: a comm message while its shell is busy)."""
        token = BESIDE.set(bool(kwargs.get("concurrent")))
        try:
            return await super().dispatch_shell(msg, *args, **kwargs)
        finally:
            BESIDE.reset(token)

    def _relayed_beside(self, relay: concurrent.futures.Future) -> None:
        """Log the failure of a comm relay that went on in the background (no request awaits it)."""
        if not relay.cancelled() and (exc := relay.exception()) is not None:
            self.log.error("relaying a comm message into the sandbox failed: %s", exc, exc_info=exc)

    async def _relay_comm(self, msg: dict) -> None:
        msg_type, content = msg["header"]["msg_type"], msg["content"]
        sent = self.sandbox is not None and await self.sandbox.comm(
            msg_type, content, lambda event: self._publish(event, msg), request=msg, metadata=msg.get("metadata"),
            buffers=[bytes(b) for b in msg.get("buffers", [])])
        if not sent and msg_type == "comm_open":
            self._publish(Comm("comm_close", {"comm_id": content.get("comm_id"), "data": {}}), msg)

    async def comm_info_request(self, stream, ident, parent):
        """``comm_info_request``: the comms open in the sandbox's kernel."""
        comms = await self._on_main(self.sandbox.comm_info(parent["content"].get("target_name"))) \
            if self.sandbox else {}
        self.session.send(stream, "comm_info_reply", {"status": "ok", "comms": comms}, parent, ident)

    # -- execute_request ---------------------------------------------------------------------
    async def do_execute(self, code, silent, store_history=True, user_expressions=None, allow_stdin=False,
                         *, cell_meta=None, cell_id=None):
        """``execute_request``: the cell runs in the sandbox; its outputs pass the cell pipeline
        and become IOPub messages; a failure of the sandbox is one short ``error``. The reply
        carries the sandbox's payloads (the pager's ``page``, ``set_next_input``, ``ask_exit``...)
        and ``user_expressions``, policed; ``silent`` and ``store_history`` reach the sandbox,
        whose kernel leaves out what they leave out (a backend that cannot: nothing is shown)."""
        # The request's parent and routing id, taken now: ipykernel keeps them in context
        # variables, and the input_request comes through the backend's stdin reader, a task
        # whose context is the sandbox's start (at launch: no request at all, and the prompt
        # went nowhere, so the cell waited for ever).
        parent, ident = self.get_parent("shell"), compat.parent_ident(self, "shell")
        stdin = functools.partial(self._ask_frontend, parent=parent, ident=ident) if allow_stdin else None
        outcome = await self._on_main(self._run(code, parent, stdin, silent=silent, store_history=store_history,
                                                user_expressions=user_expressions))
        if outcome.execution_count is not None and not silent:
            self.execution_count = outcome.execution_count
        reply: dict[str, Any] = {"status": outcome.status, "execution_count": self.execution_count}
        if outcome.status == "ok":
            reply.update(payload=list(outcome.payload), user_expressions=outcome.user_expressions)
            if any(item["source"] == "ask_exit" and not item["keepkernel"] for item in outcome.payload):
                self._loop.create_task(self._exit())
        elif outcome.error is not None:
            reply.update(ename=outcome.error.ename, evalue=outcome.error.evalue, traceback=outcome.error.traceback)
        return reply

    async def _run(self, code: str, parent: dict, stdin, *, silent: bool, **request: Any) -> Outcome:
        """The cell on the session (on the main loop: SIGINT handlers can only be set there)."""
        try:
            session = self._session()
        except SandboxError as exc:  # a bad option or backend: one short error, every cell
            return await self._failure(exc, (lambda event: None) if silent else self._publish)
        shown = not silent or session.capabilities.payloads  # the sandbox's kernel leaves out what silent does
        sink = (lambda event: self._publish(event, parent)) if shown else (lambda event: None)
        with self._sigint_interrupts():
            return await session.run(code, sink, request=parent, stdin=stdin, timeout=self.cell_timeout,
                                     silent=silent, **request)

    EXIT_DELAY_S = 1.0
    """Seconds between ``exit`` in a cell and the removal of the sandbox and this kernel's end: the
    sandbox's ipykernel ends by itself 0.1 s after its reply and writes out its history as it
    exits (removed sooner, it lost the session's last cells)."""

    async def _exit(self) -> None:
        """``exit`` (or ``quit``) in the sandbox, which ends its kernel: end this one too, as a
        python3 kernel ends (ipykernel's ``ZMQInteractiveShell`` stops its loop when ``exit_now``
        is set), after removing the sandbox."""
        await asyncio.sleep(self.EXIT_DELAY_S)
        if self.sandbox is not None:
            await self.sandbox.shutdown()
        self.io_loop.stop()

    def end_on_sigterm(self) -> None:
        """SIGTERM (the kernel app's handler, on the main thread): remove the sandbox, waiting for
        a removal already under way (a ``shutdown_request``'s), then stop this kernel's loop so
        the process ends, as a python3 kernel ends on SIGTERM, leaving nothing behind. A
        :mod:`.finisher` removes the sandbox if this process is killed before it is done."""
        if self._ending is None:
            # a removal under way has already marked the backend as not started: always a finisher
            helper = finisher.start(self.sandbox.backend) if self.sandbox is not None else None
            self._ending = self._loop.create_task(self._end(helper))

    async def _end(self, helper: Any) -> None:
        try:
            if self.sandbox is not None:
                await self.sandbox.shutdown()
            finisher.done(helper)
        finally:
            self.io_loop.stop()

    async def _failure(self, exc: SandboxError, sink: Emit) -> Outcome:
        """Show ``exc`` as the cell's one short error, through a pipeline of its own (there is
        no session to hold one)."""
        async def fail(emit: Emit) -> Outcome:
            raise exc

        return await OutputPipeline(self._policy).cell(sink, self.max_output_bytes).run(fail)

    def _sigint_interrupts(self):
        """While a cell runs, SIGINT to this process interrupts the sandbox (ipykernel's
        ``_cancel_on_sigint`` pattern) instead of raising KeyboardInterrupt here."""
        loop = asyncio.get_running_loop()
        return on_sigint(lambda: loop.call_soon_threadsafe(lambda: asyncio.ensure_future(self.sandbox.interrupt())))

    async def interrupt_request(self, stream, ident, parent):
        """``interrupt_request`` (control channel; kernelspec ``interrupt_mode: message``):
        interrupt the sandbox's running cell; the sandbox's state survives."""
        content: dict[str, Any] = {"status": "ok"}
        if self.sandbox is not None:
            try:
                await self._on_main(self.sandbox.interrupt(), timeout=10)
            except Exception as exc:
                content = {"status": "error", "ename": type(exc).__name__, "evalue": str(exc), "traceback": []}
        self.session.send(stream, "interrupt_reply", content, parent, ident=ident)

    async def _on_main(self, coro, timeout: float | None = None):
        """Await ``coro`` on the main thread's event loop, which owns the session, from a handler
        that ipykernel runs on another thread's loop: control requests (the control thread) and
        every request of a kernel subshell (the subshell's own thread). The backend's sockets,
        locks and queues belong to the main loop: used from another, a waiter was woken only by
        that loop's next message (a widget's ``idle`` came with the next slider move).

        Raises:
            TimeoutError: not done within ``timeout`` seconds (None: no limit).
        """
        here = asyncio.get_running_loop()
        if self._loop is here or not self._loop.is_running():
            return await asyncio.wait_for(coro, timeout)
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        return await asyncio.wait_for(asyncio.wrap_future(future), timeout)

    async def _ask_frontend(self, prompt: str, password: bool, *, parent: dict, ident: Any) -> str:
        """Send ``input_request`` for the request ``parent`` (from the frontend ``ident``) on
        the stdin channel and await its ``input_reply`` without blocking the event loop
        (cancellable, unlike ipykernel's blocking ``_input_request``)."""
        while True:  # drop stale replies
            try:
                self.stdin_socket.recv_multipart(zmq.NOBLOCK)
            except zmq.ZMQError:
                break
        self.session.send(self.stdin_socket, "input_request", {"prompt": prompt, "password": password},
                          parent, ident=ident)
        while True:
            try:
                _, reply = self.session.recv(self.stdin_socket, zmq.NOBLOCK)
            except zmq.ZMQError:
                reply = None
            if reply is not None:
                return reply["content"].get("value", "")
            await asyncio.sleep(0.02)

    # -- completion, inspection, is_complete ---------------------------------------------------
    # The session answers what the sandbox cannot (no capability, not started, gone); a session
    # that cannot be made (a bad option) gets the same answers (:mod:`...session.replies`).
    async def do_complete(self, code, cursor_pos):
        with contextlib.suppress(SandboxError):
            return await self._on_main(self._session().complete(code, cursor_pos))
        return replies.no_completion(cursor_pos)

    async def do_inspect(self, code, cursor_pos, detail_level=0, omit_sections=()):
        with contextlib.suppress(SandboxError):
            return await self._on_main(self._session().inspect(code, cursor_pos, detail_level))
        return replies.not_found()

    async def do_is_complete(self, code):
        with contextlib.suppress(SandboxError):
            return await self._on_main(self._session().is_complete(code))
        return replies.judged(code)

    async def do_shutdown(self, restart):
        """``shutdown_request`` (control channel): end the sandbox's session on the loop that
        owns its tasks, then reply."""
        if self.sandbox is not None:
            await self._on_main(self.sandbox.shutdown(), timeout=None)
        return {"status": "ok", "restart": restart}

    # -- history, the debugger, usage, subshells -------------------------------------------------
    async def do_history(self, hist_access_type, output, raw, session=0, start=0, stop=None, n=None, pattern=None,
                         unique=False):
        """``history_request``: answered by the sandbox's IPython (tail, range, search, unique)."""
        content = {"hist_access_type": hist_access_type, "output": output, "raw": raw, "session": session,
                   "start": start, "stop": stop, "n": n, "pattern": pattern, "unique": unique}
        with contextlib.suppress(SandboxError):
            return await self._on_main(self._session().history(content, request=self.get_parent("shell")))
        return replies.no_history()

    async def do_debug_request(self, msg):
        """``debug_request`` (control channel): relayed to the sandbox kernel's debugger, whose
        ``debug_event`` messages the session's outside sink publishes."""
        try:
            session = self._session()
        except SandboxError as exc:
            return replies.debug_error(msg, str(exc))
        return await self._on_main(session.debug(msg))

    async def usage_request(self, stream, ident, parent):
        """``usage_request`` (control channel; JupyterLab's kernel usage panel): the sandbox's own
        CPU and memory, not this wrapper's, marked ``"sandbox"`` (the reply's shape is ipykernel's)."""
        figures = await self._on_main(self.sandbox.usage()) if self.sandbox is not None else None
        described = self.sandbox.describe() if self.sandbox is not None else {"backend": self.backend}
        content = usage_reply(figures or {}, described)
        self.session.send(stream, "usage_reply", content, parent, ident)

    async def delete_subshell_request(self, socket, ident, parent) -> None:
        """``delete_subshell_request`` (control channel, JEP 91): ipykernel's, then the sandbox
        kernel's subshell that stood for this one goes too."""
        await super().delete_subshell_request(socket, ident, parent)
        subshell = (parent.get("content") or {}).get("subshell_id")
        if self.sandbox is not None and isinstance(subshell, str):
            await self._on_main(self.sandbox.delete_subshell(subshell))


def usage_reply(figures: dict[str, Any], described: dict[str, Any]) -> dict[str, Any]:
    """A ``usage_reply``'s content with ipykernel's fields (its ``usage_request`` handler is the
    reference): ``kernel_cpu`` in percent of one CPU, ``kernel_memory`` in bytes, ``cpu_count``,
    ``hostname``, ``pid``, ``host_cpu_percent`` (left out when 0 or unknown, as ipykernel does) and
    ``host_virtual_memory`` (psutil's field names; always there, {} when the backend cannot tell:
    jupyter-resource-usage's Kernel Usage panel reads ``host_virtual_memory.active`` and went blank
    without it), for the sandbox's ``figures`` (:meth:`Backend.usage`), with ``"sandbox"``:
    ``{"backend", "sandbox_id"}``, so the figures read as the sandbox's."""
    sandbox = {"backend": described.get("backend"), "sandbox_id": described.get("sandbox_id")}
    content = {"hostname": f"sandbox ({sandbox['backend']} {sandbox['sandbox_id'] or 'not started'})",
               "pid": None, "kernel_cpu": figures.get("cpu_percent") or 0.0,
               "kernel_memory": figures.get("memory_bytes") or 0, "cpu_count": figures.get("cpu_count"),
               "host_virtual_memory": dict(figures.get("host_memory") or {}), "sandbox": sandbox}
    if figures.get("host_cpu_percent"):
        content["host_cpu_percent"] = figures["host_cpu_percent"]
    return content

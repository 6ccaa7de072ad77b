"""``KernelClientBackend``: the shared base of backends that run a real Jupyter kernel.

A subclass only launches and stops the kernel (:meth:`_launch`, :meth:`_terminate`) and says
when and why it died (:meth:`_wait_dead`). This class speaks the Jupyter messaging protocol
through ``jupyter_client``'s async client: it relays the IOPub messages of each
``execute_request`` (matched by the parent header's msg_id) as events, answers ``input_request``
on the stdin channel, sends ``interrupt_request`` on the control channel, and passes completion,
inspection and comm messages through (the client and its sockets: :mod:`.client`). Each message
from the sandbox is bounded in size before it is received (``max_message_bytes``,
:mod:`.message_bound`); a dropped one is reported in the cell, whose request is then recovered.
Spec: https://jupyter-client.readthedocs.io/en/latest/messaging.html
"""

from __future__ import annotations

import asyncio
import contextlib
from abc import abstractmethod
from collections.abc import Callable
from typing import Any

from jupyter_client.asynchronous import AsyncKernelClient
from traitlets import Float

from ...core.errors import CheckpointError, ExecutionTimeout, SandboxDied, SandboxError, SandboxStartError
from ...core.events import Emit, Event, Outcome, SandboxReplaced, Stream
from ...runtime.traits import ByteSize
from ..base import Backend, Capabilities, StdinHandler, request_msg_id, request_subshell_id
from ..checkpoint import Checkpoint, death_of
from ..checkpoint.link import KeeperLink
from .checkpoints import KeptCheckpoints
from .client import FILES_PER_SESSION, SandboxKernelClient, check_open_files, shared_context
from .control import ControlChannel, Subshells, route_replies
from .message_bound import (
    DEFAULT_OUTPUT_BUDGET,
    DropRecovery,
    drop_note,
    message_limit,
)
from .message_bound import Request as _Request
from .messages import event_from_iopub, receive
from .relay import relay_outputs, relay_reply


class KernelClientBackend(Backend):
    """A backend whose sandbox runs ipykernel, reached through ``jupyter_client``."""

    capabilities = Capabilities(completion=True, inspection=True, stdin=True, comms=True, display_updates=True,
                                payloads=True, history=True, subshells=True, debugger=True)

    ready_timeout = Float(60.0, help="Seconds to wait for the sandbox's kernel to become ready.").tag(config=True)
    interrupt_grace = Float(
        5.0, help="Seconds a timed-out cell gets to stop after the interrupt before the sandbox is restarted."
    ).tag(config=True)
    request_timeout = Float(30.0, help="Seconds to wait for a completion, inspection or comm_info reply.").tag(
        config=True
    )
    max_message_bytes = ByteSize(
        None, allow_none=True,
        help="Largest message (one frame: an output's content, or one buffer of a widget message) the host "
             "accepts from the sandbox, e.g. '64m'; a larger one is refused before it is read, so it never sits "
             "in host memory, and the cell says in one line that it was dropped (with any output right after "
             "it) and which option raises the limit; the session and its state go on. None (default): twice the front door's max_output_bytes, at least 32 MiB, none "
             "when that budget is 0. 0: no limit.",
    ).tag(config=True)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._client: AsyncKernelClient | None = None
        self._tasks: list[asyncio.Task] = []
        self._death: asyncio.Task | None = None
        self._requests: dict[str, _Request] = {}
        self._comm_handler: Callable[[Event, str | None], None] | None = None
        self._unsettled: dict[str, asyncio.Future] = {}  # see comm_settled
        self._lock = asyncio.Lock()
        self._recovery: DropRecovery | None = None  # of the connection to the running kernel
        self._control: ControlChannel | None = None  # ... its control channel
        self._subshells: Subshells | None = None  # ... the subshells made on it
        self._warming: asyncio.Future | None = None  # ... its completion warm-up
        self._kept: KeptCheckpoints | None = None  # the sandbox's keeper, when it runs one
        self._restored: Checkpoint | None = None  # what the keeper put in place of a kernel that died
        self._last_count = 0  # the highest execution_count a cell ended with
        self._met: asyncio.Future | None = None  # done once the start met the keeper (or found none)

    @property
    def message_bound(self) -> tuple[int, str]:
        """``(bytes, setting)``: the bound on each message from the sandbox (0: none) and the
        option that raises it, as the note of a cell whose output was dropped names it."""
        if self.max_message_bytes is not None:
            return self.max_message_bytes, f"{type(self).__name__}.max_message_bytes"
        budget, setting = self._output_budget or (DEFAULT_OUTPUT_BUDGET, "max_output_bytes")
        return message_limit(budget), setting

    # -- what a subclass provides ------------------------------------------------------------
    @abstractmethod
    async def _launch(self) -> dict[str, Any]:
        """Start the kernel; return its connection info (the connection file's dict).

        Raises:
            BackendUnavailable, SandboxStartError."""

    @abstractmethod
    async def _terminate(self) -> None:
        """Stop the kernel and remove what :meth:`_launch` made. Must not raise."""

    @abstractmethod
    async def _wait_dead(self) -> str:
        """Return, with the reason as a phrase ("it ran out of memory (limit 1 GiB)"), once
        the kernel's process has stopped. Cancelled at shutdown."""

    async def _open_keeper(self) -> KeeperLink | None:
        """After :meth:`_launch`: the link to the keeper the sandbox runs (:mod:`..checkpoint`),
        or None when it runs none (no checkpoints; the default).

        Raises:
            CheckpointError: the keeper did not answer."""
        return None

    def _keeper_death_reason(self, status: Any, oom: bool | None) -> str:
        """Why the kernel died, from what the keeper reports (it outlived the kernel): its
        status, and whether the OOM killer took it (None: unknown): "its kernel was killed by
        SIGKILL: it ran out of memory" (the signal, as without checkpoints, and its cause)."""
        reason = death_of(status)
        return f"{reason}: it ran out of memory" if oom else reason

    # -- lifecycle ---------------------------------------------------------------------------
    @property
    def started(self) -> bool:
        return self._client is not None

    async def start(self) -> None:
        async with self._lock:
            if self._client is not None:
                return
            check_open_files(FILES_PER_SESSION)
            info = await self._launch()
            try:
                self._met = asyncio.get_running_loop().create_future()
                if self.WATCH_FROM_LAUNCH:
                    self._death = asyncio.get_running_loop().create_task(self._watch_death())
                await self._meet_keeper()
                self._client, self.kernel_info = await self._connect(info)
            except BaseException:
                if self._death is not None:  # its watch would fail on the terminated kernel
                    self._death.cancel()
                    self._death = None
                if self._kept is not None:
                    self._kept.close()
                    self._kept = None
                await self._terminate()
                raise
            self._start_readers()
            if self._kept is not None:
                await self._checkpoint_after(getattr(self, "checkpoint_min_seconds", -1.0))
            if self.warm_completion and not self.completer_cached:
                self._warming = asyncio.ensure_future(self._warm_completion())
                self._tasks.append(self._warming)

    completer_cached = False
    """Whether the sandbox's IPython finds jedi's cache already built (a local sandbox's shared
    cache, an image that holds one), so its first completion costs about 0.3 s, not 1.3-1.7 s,
    and :meth:`_warm_completion` is left out: it would compete with the first cell for the
    sandbox's interpreter (measured: start to first result 2.2x a plain kernel with it)."""

    WARM_UP = "sandbox-kernel-warm-up"
    """The name of the subshell the completion warm-up runs on (see :meth:`_warm_completion`)."""

    async def _warm_completion(self) -> None:
        """Ask a Python sandbox for one completion as soon as it is up, so a person's first Tab is
        answered at once: IPython's first completion loads jedi and builds its cache of the
        builtins, which a sandbox's empty cache directory makes cost 1.3-1.7 s here (python3's kept
        cache: 0.3 s), past JupyterLab's 1 s. On a subshell of the sandbox's kernel, beside its main
        shell: the first cell does not wait for it, and an interrupt cannot land in it. A frontend's
        completion or inspection waits for it (:meth:`_after_warm_up`): IPython's completer is not
        safe to run in two threads at once. Only where :attr:`warm_completion` (the kernel front
        door); a kernel without subshells is not warmed."""
        request_msg_id.set(None)  # this task copied the context of the start: never a cell's msg_id
        if ((self.kernel_info or {}).get("language_info") or {}).get("name") != "python" or \
                not self._subshells.available:
            return
        with contextlib.suppress(Exception):  # a death meanwhile is the next request's to report
            msg = self._message("complete_request", {"code": "zi", "cursor_pos": 2},
                                subshell=await self._subshells.inner(self.WARM_UP))
            request = self._requests[msg["header"]["msg_id"]] = _Request(shown=False)
            try:
                self._client.shell_channel.send(msg)
                await self._until_replied(request.reply, self.request_timeout)
                if request.reply.done() and request.reply.result().get("content", {}).get("matches"):
                    await self._completer_warmed()  # answered, with "zip": jedi's cache is built
            finally:
                request.iopub.close()
                self._requests.pop(msg["header"]["msg_id"], None)
            await self._subshells.delete(self.WARM_UP)

    WATCH_FROM_LAUNCH = False
    """Whether :meth:`_wait_dead` works as soon as :meth:`_launch` returned (before the client
    connects): then the death watch runs while the keeper is met, so a sandbox that stopped while
    starting says why (the backends that run a keeper set it)."""

    KEEPER_DEATH_GRACE_S = 2.0
    """Seconds a start whose keeper did not answer waits for the death watch's reason (a sandbox
    that stopped while starting, e.g. an image without python: its reason carries the fix)."""

    async def _meet_keeper(self) -> None:
        """Connect to the sandbox's keeper, if it runs one, and tell it its bounds; the death watch
        runs meanwhile (:attr:`_death`), and a sandbox that stopped is reported as
        :meth:`_connect` reports it, with its reason (the keeper never answers a dead sandbox)."""
        meeting = asyncio.ensure_future(self._greet_keeper())
        watch = {self._death} if self._death is not None else set()
        try:
            await asyncio.wait({meeting, *watch}, return_when=asyncio.FIRST_COMPLETED)
            if watch and (not meeting.done() or isinstance(meeting.exception(), CheckpointError)):
                await asyncio.wait(watch, timeout=0 if not meeting.done() else self.KEEPER_DEATH_GRACE_S)
            if watch and self._death.done():
                raise SandboxStartError(f"The sandbox stopped while starting: {self._death.result()}.")
            if isinstance(exc := meeting.exception(), CheckpointError):
                raise SandboxStartError(f"The sandbox started, but {exc}") from exc
            meeting.result()
        finally:
            meeting.cancel()
            if not self._met.done():
                self._met.set_result(None)

    async def _greet_keeper(self) -> None:
        link = await self._open_keeper()
        if link is not None:
            self._kept = KeptCheckpoints(link, self, self.run_silently)
            await self._kept.hello()

    async def _completer_warmed(self) -> None:
        """The warm-up's completion was answered with matches: a backend whose sandboxes share
        jedi's cache publishes it (:attr:`completer_cached`)."""

    def _start_readers(self) -> None:
        loop = asyncio.get_running_loop()
        self._control = ControlChannel(self._client, self._requests, self._until_replied)
        features = (self.kernel_info or {}).get("supported_features")
        self._subshells = Subshells(self._control, isinstance(features, list) and "kernel subshells" in features,
                                    self.request_timeout)
        self._tasks = [loop.create_task(reader()) for reader in (self._read_iopub, self._read_shell, self._read_stdin,
                                                                  self._control.read)]

    async def _open_client(self, info: dict[str, Any]) -> AsyncKernelClient:
        """A client with started channels for the kernel :meth:`_launch` described."""
        context = self._client_context()
        client = SandboxKernelClient(max_message_bytes=self.message_bound[0], iopub_taken=self._iopub_taken(),
                                     **({"context": context} if context is not None else {}))
        client.load_connection_info(info)
        # No heartbeat: death is known from the process or the engine (_wait_dead), and a
        # heartbeat unanswered for 1 s while a loaded machine still boots the kernel made
        # wait_for_ready() report "Kernel died before replying to kernel_info".
        client.start_channels(hb=False)
        return client

    async def _connect(self, info: dict[str, Any]) -> tuple[AsyncKernelClient, dict[str, Any]]:
        """The started client of the kernel ``info`` describes, once it answered, and the content
        of its ``kernel_info_reply`` (its language_info and banner).

        Raises:
            SandboxStartError: the kernel stopped, or did not answer within ``ready_timeout``."""
        client = await self._open_client(info)
        if self._death is None or self._death.cancelled():  # none from the launch (or a restart cancelled it)
            self._death = asyncio.get_running_loop().create_task(self._watch_death())
        ready = asyncio.ensure_future(self._first_kernel_info(client))
        await asyncio.wait({ready, self._death}, return_when=asyncio.FIRST_COMPLETED)
        if not ready.done():
            ready.cancel()
            client.stop_channels()
            raise SandboxStartError(f"The sandbox stopped while starting: {self._death.result()}.")
        if ready.exception() is not None:
            client.stop_channels()
            raise SandboxStartError(
                f"The sandbox's kernel did not become ready within {self.ready_timeout:g} s "
                f"(raise --{type(self).__name__}.ready_timeout).{self._unreachable_hint()}"
            ) from ready.exception()
        self._watch_drops(client)
        return client, ready.result()

    STDIN_PROOF_S = 5.0
    """Seconds a ready kernel's stdin handshake may take before the start goes on without it
    (and says so in the log)."""

    READY_RESEND_S = 1.0
    """Seconds between ``kernel_info_request`` messages while the kernel is not answering yet
    (a kernel that is still binding its sockets may miss the first)."""

    async def _first_kernel_info(self, client: AsyncKernelClient) -> dict[str, Any]:
        """The content of the kernel's ``kernel_info_reply`` once the kernel answers on shell
        and its IOPub reaches the client: ``kernel_info_request`` is sent every
        :data:`READY_RESEND_S` until a reply has come and an IOPub message too (ipykernel 7's
        ``iopub_welcome``, JEP 65, or the ``status`` of a kernel_info request), which proves the
        client's subscription is in place, so no output of the first cell is lost (ZMQ drops
        what a PUB socket publishes before a SUB's subscription arrives). jupyter_client's
        ``wait_for_ready`` instead waits for 0.2 s of IOPub silence, which was 0.2 s of every start.

        Raises:
            TimeoutError: no answer within ``ready_timeout``."""
        import queue

        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.ready_timeout
        content = None
        while (left := deadline - loop.time()) > 0:
            msg_id = client.kernel_info()
            until = loop.time() + min(self.READY_RESEND_S, left)
            while content is None and (wait := until - loop.time()) > 0:
                try:
                    reply = await client.get_shell_msg(timeout=wait)
                except queue.Empty:
                    break
                if reply.get("parent_header", {}).get("msg_id") == msg_id or reply.get("msg_type") == "kernel_info_reply":
                    content = reply["content"]
            if content is None:
                continue
            try:
                await client.get_iopub_msg(timeout=max(0.0, min(until - loop.time(), deadline - loop.time())))
            except queue.Empty:
                continue  # not subscribed yet: the next request's status will say when
            await self._stdin_settled(client)
            return content
        raise TimeoutError(f"no kernel_info_reply within {self.ready_timeout:g} s")

    async def _stdin_settled(self, client: Any) -> None:
        """Return once ``client``'s stdin channel is connected (:meth:`SandboxKernelClient.stdin_connected`):
        the kernel's stdin ROUTER drops an ``input_request`` for a peer not yet connected, and a
        first cell calling ``input()`` at once then waited for ever."""
        if not await client.stdin_connected(self.STDIN_PROOF_S):
            self.log.warning("The sandbox's kernel is ready but its stdin channel did not connect within %g s; "
                             "a first input() may not reach this client.", self.STDIN_PROOF_S)

    def _iopub_taken(self) -> Callable[[int], None] | None:
        """What the client tells the size in bytes of each IOPub message it reads (see
        :class:`SandboxKernelClient`), or None."""
        return None

    def _client_context(self) -> Any:
        """The ZMQ context for the client's sockets (a ``zmq.asyncio.Context``): the process's
        :func:`shared_context`; None would give the client a context of its own."""
        return shared_context()

    def _unreachable_hint(self) -> str:
        """A sentence appended to the "did not become ready" message when this backend knows a
        likelier cause than a slow start (empty: none)."""
        return ""

    def _watch_drops(self, client: AsyncKernelClient) -> None:
        """Recover from messages over the bound that libzmq drops (see :mod:`.message_bound`)."""
        self._recovery = DropRecovery(client, self._requests, self._death, note=drop_note(*self.message_bound),
                                      ready_timeout=self.ready_timeout, request_timeout=self.request_timeout,
                                      on_unclaimed=self._unclaimed, log=self.log,
                                      kernel_pid=self._kept.kernel_pid if self._kept is not None else None)
        self._recovery.watch()

    def _unclaimed(self, event: Event) -> None:
        """An event for no request (a dropped message's note): to the comm handler, if any."""
        if self._comm_handler is not None:
            self._comm_handler(event, None)

    END_GRACE_S = 2.0
    """Seconds a running kernel gets to end by itself after ``shutdown_request`` before it is
    stopped: IPython writes out the session's history as it exits (killed at once, the last
    cells were missing from the next session's Up-arrow). ipykernel ends in about 0.2 s."""

    async def _ask_to_end(self) -> None:
        """Send ``shutdown_request`` on the control channel and wait up to :data:`END_GRACE_S` for
        the kernel to end (the death watch sees it)."""
        death, control = self._death, self._control
        if not self.END_GRACE_S or death is None or death.done() or control is None:
            return
        with contextlib.suppress(Exception):
            ended = asyncio.ensure_future(control.request("shutdown_request", {"restart": False}, self.END_GRACE_S))
            await asyncio.wait({death}, timeout=self.END_GRACE_S)
            ended.cancel()

    async def _watch_death(self) -> str:
        """The death watch: :meth:`_wait_dead`, or the keeper's word that the kernel died. When the
        keeper put a checkpoint in its place, that is :attr:`_restored` (the sandbox runs on)."""
        dead = asyncio.ensure_future(self._wait_dead())
        try:
            if self._met is not None:
                await asyncio.wait({dead, self._met}, return_when=asyncio.FIRST_COMPLETED)  # the keeper, once met
        except asyncio.CancelledError:
            dead.cancel()
            raise
        if self._kept is None:
            return await dead
        said = asyncio.ensure_future(self._kept.death())
        try:
            await asyncio.wait({dead, said}, return_when=asyncio.FIRST_COMPLETED)
            if dead.done():
                return dead.result()
            event = said.result()
            if event["restored"] is None:  # the keeper ends the sandbox: the subclass says why
                return await dead
            self._restored = event["restored"]
            return self._keeper_death_reason(event["status"], event["oom"])
        finally:
            dead.cancel()
            said.cancel()

    async def shutdown(self) -> None:
        async with self._lock:
            await self._ask_to_end()
            for task in [*self._tasks, *([self._death] if self._death else [])]:
                task.cancel()
            self._tasks, self._death, self.kernel_info = [], None, None
            self._control = self._subshells = self._warming = self._restored = None
            if self._kept is not None:
                self._kept.close()
                self._kept = None
            if self._recovery is not None:
                self._recovery.stop()
                self._recovery = None
            if self._client is not None:
                self._client.stop_channels()
                self._client = None
            for request in self._requests.values():
                if not request.reply.done():
                    request.reply.cancel()
            self._requests.clear()
            for settled in self._unsettled.values():
                settled.cancel()
            self._unsettled.clear()
            await self._terminate()

    # -- readers: route every message to the request it answers ------------------------------
    async def _read_iopub(self) -> None:
        while True:
            msg = await receive(self._client.iopub_channel)
            parent_id = msg["parent_header"].get("msg_id")
            request = self._requests.get(parent_id)
            if msg["header"]["msg_type"] == "debug_event":  # the debugger's, never a cell's output
                if self._comm_handler is not None:
                    self._comm_handler(event_from_iopub(msg), parent_id)
            elif request is not None:  # waits while the request's relay is behind (bytes, see .held)
                await request.iopub.put(msg)
            elif self._comm_handler is not None and (event := event_from_iopub(msg)) is not None:
                self._comm_handler(event, parent_id)
            elif msg["header"]["msg_type"] == "status" and msg["content"].get("execution_state") == "idle" \
                    and (settled := self._unsettled.get(parent_id)) is not None and not settled.done():
                settled.set_result(None)

    async def _read_shell(self) -> None:
        await route_replies(self._client.shell_channel, self._requests)

    async def _read_stdin(self) -> None:
        while True:
            msg = await receive(self._client.stdin_channel)
            request = self._requests.get(msg["parent_header"].get("msg_id"))
            if self._recovery is not None:  # the kernel got past a dropped input_request
                self._recovery.end_input = False
            if msg["header"]["msg_type"] == "input_request" and request is not None and request.stdin:
                asyncio.ensure_future(self._answer_input(request.stdin, msg["content"]))

    async def _answer_input(self, stdin: StdinHandler, content: dict[str, Any]) -> None:
        try:
            value = await stdin(content.get("prompt", ""), content.get("password", False))
        except Exception:  # the prompt was interrupted: end the input with EOF
            value = "\x04"
        if self._client is not None:
            self._client.input(value)

    # -- running code ------------------------------------------------------------------------
    KEEPER_WORD_S = 5.0
    """Seconds a cell waits for the keeper's word after the kernel's connections closed between
    cells (the kernel died, and the keeper is putting a checkpoint in its place), before it is sent."""

    async def _ensure_alive(self, emit: Emit) -> None:
        """Start the sandbox, or replace one that stopped between cells (saying so): by the
        checkpoint its keeper put in place of a dead kernel, else by a fresh sandbox."""
        death, recovery, loop = self._death, self._recovery, asyncio.get_running_loop()
        waited_until = loop.time() + self.KEEPER_WORD_S
        while self._kept is not None and death is not None and not death.done() and recovery is not None and \
                recovery.dropped_at is not None and loop.time() < waited_until:
            await asyncio.sleep(0.05)  # not sent into a kernel being replaced (a lost message's recovery ends sooner)
        if self._death is not None and self._death.done() and self._restored is not None:
            reason, restored = self._death.result(), self._restored
            await self._after_recovery()
            emit(Stream("stderr", f"[The sandbox had stopped ({reason}); this cell runs on {restored.phrase()}.]\n"))
            return
        if self._death is not None and self._death.done():
            reason = self._death.result()
            await self.shutdown()
            emit(SandboxReplaced("stderr", f"The sandbox had stopped ({reason}); its state is lost. Starting a fresh one.\n"))
        await self.start()

    async def execute(self, code: str, emit: Emit, *, timeout: float | None = None,
                      stdin: StdinHandler | None = None, silent: bool = False, store_history: bool = True,
                      user_expressions: dict[str, str] | None = None) -> Outcome:
        await self._ensure_alive(emit)
        # stop_on_error is the front door's (ipykernel aborts the frontend's queue there)
        msg = self._message("execute_request", {"code": code, "silent": silent, "store_history": store_history,
                                                "user_expressions": user_expressions or {},
                                                "allow_stdin": stdin is not None, "stop_on_error": False},
                            subshell=await self._subshell())
        msg_id = msg["header"]["msg_id"]
        request = self._requests[msg_id] = _Request(stdin=stdin, execute=True)
        self._client.shell_channel.send(msg)
        relay = asyncio.ensure_future(relay_reply(request, emit, drop_note(*self.message_bound)))
        try:
            await self._race(relay, timeout)
            if relay.done():
                count = relay.result().execution_count
                self._last_count = max(self._last_count, count if isinstance(count, int) else 0)
                return relay.result()
            request.timed_out = True  # the interrupt's KeyboardInterrupt output is ours to replace
            await self.interrupt()
            await self._race(relay, self.interrupt_grace)
            if not relay.done():  # the interrupt did not stop it: give up on this interpreter
                emit(SandboxReplaced("stderr", "The interrupt did not stop the cell within "
                                               f"{self.interrupt_grace:g} s; restarting the sandbox (its state is lost).\n"))
                await self.restart()
                raise ExecutionTimeout(timeout, restarted=True)
            raise ExecutionTimeout(timeout)
        finally:
            relay.cancel()
            request.iopub.close()
            self._requests.pop(msg_id, None)

    async def _race(self, work: asyncio.Future, timeout: float | None, *, in_cell: bool = True) -> None:
        """Wait for ``work`` up to ``timeout`` seconds; raise SandboxDied if the kernel dies first.
        In a cell the death is reported there and the sandbox shut down; outside one (``in_cell``
        False: a completion, a comm message) it is left for the next cell, which says the sandbox
        was replaced (:meth:`_ensure_alive`): shut down here, the next cell started a fresh one
        without a word."""
        death = self._death
        await asyncio.wait({work, death}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        if not work.done() and death.done():
            reason = death.result()
            if self._restored is not None:  # the keeper runs a checkpoint instead: the next cell says so
                raise SandboxDied(reason, restored=self._restored.phrase(), checkpoint=self._restored)
            if in_cell:
                await self.shutdown()
            raise SandboxDied(reason)

    async def _until_replied(self, reply: asyncio.Future, timeout: float | None) -> None:
        """Wait for ``reply`` up to ``timeout`` seconds; raise SandboxDied if the kernel dies first
        (without shutting down: the request's caller, or the next cell, handles the death)."""
        death = self._death
        await asyncio.wait({reply} | ({death} if death is not None else set()), timeout=timeout,
                           return_when=asyncio.FIRST_COMPLETED)
        if not reply.done() and death is not None and death.done():
            raise SandboxDied(death.result())

    def _message(self, msg_type: str, content: dict[str, Any], metadata: dict[str, Any] | None = None,
                 subshell: str | None = None) -> dict:
        """A shell message whose msg_id is the frontend's (:data:`request_msg_id`) when a
        frontend request is being served, so the sandbox's outputs name it as their parent;
        for the sandbox kernel's subshell ``subshell`` (None: its main shell)."""
        msg = self._client.session.msg(msg_type, content, metadata=metadata or {})
        msg_id = request_msg_id.get()
        if msg_id and msg_id not in self._requests:
            msg["header"]["msg_id"] = msg["msg_id"] = msg_id
        if subshell is not None:
            msg["header"]["subshell_id"] = subshell
        return msg

    async def _subshell(self) -> str | None:
        """The sandbox kernel's subshell for the frontend's (:data:`request_subshell_id`), made at
        its first request; None: the main shell (also for a kernel without subshells)."""
        return await self._subshells.inner(request_subshell_id.get())

    async def _call(self, msg_id: str) -> dict[str, Any]:
        """The content of the shell reply to ``msg_id`` (completion, inspection, ...)."""
        request = self._requests[msg_id] = _Request()
        try:
            work = asyncio.ensure_future(asyncio.shield(request.reply))
            await self._race(work, self.request_timeout, in_cell=False)
            if not work.done():
                raise SandboxError(f"The sandbox did not answer within {self.request_timeout:g} s.")
            return work.result()["content"]  # raises MessageDropped when the reply was too large
        finally:
            request.iopub.close()
            self._requests.pop(msg_id, None)

    async def restart(self) -> None:
        """A fresh kernel. When the sandbox holds checkpoints, from its keeper, in the same
        sandbox, so that ``restore`` brings a state back: the old kernel's process group is
        killed, the checkpoints (and the sandbox's files) stay. Else, as without checkpoints,
        :meth:`shutdown`, then :meth:`start`: a new sandbox, nothing of the old one kept."""
        if self._kept is not None and self._death is not None and not self._death.done() and \
                await self._holds_checkpoints():
            self._replacing()
            try:
                await self._kept.fresh()
                await self._kernel_replaced()
                self._last_count = 0
                await self._checkpoint_after(getattr(self, "checkpoint_min_seconds", -1.0))
                return
            except (CheckpointError, SandboxError) as exc:
                self.log.warning("The sandbox's keeper could not start a fresh kernel (%s); restarting the sandbox", exc)
        await self.shutdown()
        await self.start()

    async def _holds_checkpoints(self) -> bool:
        try:
            return bool(await self._kept.list_held())
        except CheckpointError:
            return False

    # -- checkpoints (a keeper in the sandbox: ..checkpoint) -------------------------------------
    def _keeper(self) -> KeptCheckpoints:
        if self._kept is None:
            why = "they are turned off (checkpoints=False)" if not getattr(self, "checkpoints", False) else \
                "this sandbox runs no keeper (a kernel other than Python's, or it is not started)"
            raise CheckpointError(f"This {self.name} sandbox keeps no checkpoints: {why}.")
        return self._kept

    async def checkpoint(self, name: str | None = None, *, cell: int | None = None) -> Checkpoint:
        await self.start()
        return await self._keeper().take(name, cell)

    async def list_checkpoints(self) -> list[Checkpoint]:
        if not self.started:
            return []
        return await self._keeper().list()

    async def restore(self, checkpoint: int) -> Checkpoint:
        await self.start()
        kept = self._keeper()
        self._replacing()
        try:
            restored = await kept.restore(checkpoint)
        finally:
            await self._kernel_replaced()
        await self._continue_count(self._last_count + 1)
        return restored

    async def drop_checkpoint(self, checkpoint: int) -> bool:
        return await self._keeper().drop(checkpoint) if self.started else False

    async def _checkpoint_after(self, seconds: float) -> None:
        """Have the kernel checkpoint itself after each cell that ran ``seconds`` (negative: none)."""
        from ..checkpoint.inside import MODULE

        expression = f"__import__({MODULE!r}).configure({float(seconds)!r})"
        try:  # not run_silently(): start() calls this holding the lock run_silently's start() takes
            await self._call(self._client.execute("", silent=True, store_history=False,
                                                  user_expressions={"c": expression}))
        except SandboxError as exc:
            self.log.warning("The sandbox's kernel takes no automatic checkpoints: %s", exc)

    def _replacing(self) -> None:
        """Before the keeper replaces the kernel: its connections will close, which is no lost
        message (the drop watch would take it for one)."""
        if self._recovery is not None:
            self._recovery.stop()
            self._recovery = None

    async def _after_recovery(self) -> None:
        """The keeper put a checkpoint in place of a dead kernel: watch the new one and continue."""
        self._restored = None
        self._replacing()
        self._death = asyncio.get_running_loop().create_task(self._watch_death())
        await self._kernel_replaced()
        await self._continue_count(self._last_count + 2)  # the cell that died had the next number

    async def _kernel_replaced(self) -> None:
        """The kernel process behind the connection changed (a restore, a recovery, a fresh
        interpreter): the old one's subshells are gone; returns once the new one answers a
        ``kernel_info_request`` on shell and IOPub (the client's sockets reconnected by themselves).

        Raises:
            SandboxError: it did not within ``ready_timeout``."""
        self._replacing()
        self._warming = None
        self._subshells = Subshells(self._control, self._subshells.available if self._subshells else False,
                                    self.request_timeout)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.ready_timeout
        while loop.time() < deadline and not self._death.done():
            msg = self._client.session.msg("kernel_info_request", {})
            request = self._requests[msg["header"]["msg_id"]] = _Request(shown=False)
            try:
                self._client.shell_channel.send(msg)
                await asyncio.wait({request.reply}, timeout=self.READY_RESEND_S)
                if request.reply.done():
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(request.iopub.get(), self.READY_RESEND_S)
                        self._watch_drops(self._client)
                        return
            finally:
                request.iopub.close()
                self._requests.pop(msg["header"]["msg_id"], None)
        raise SandboxError(f"The sandbox's kernel did not answer within {self.ready_timeout:g} s after it was "
                           "replaced.")

    async def _continue_count(self, count: int) -> None:
        """Number the next cell ``count`` (a restored state's own count is older: numbers stay unique)."""
        if count > 1:
            with contextlib.suppress(SandboxError):
                await self.run_silently(f"get_ipython().execution_count = max(get_ipython().execution_count, {count})")

    async def run_silently(self, code: str, expressions: dict[str, str] | None = None) -> dict[str, Any]:
        """Run ``code`` as a silent ``execute_request`` (no outputs, no history, no new execution
        count) with ``user_expressions`` (evaluated as they are, without IPython's input
        transformers); returns the ``execute_reply`` content."""
        await self.start()
        return await self._call(self._client.execute(code, silent=True, store_history=False,
                                                     user_expressions=expressions or {}))

    async def interrupt(self) -> None:
        """Send ``interrupt_request`` on the control channel (ipykernel then raises
        KeyboardInterrupt in the running code); wait up to 5 s for ``interrupt_reply``."""
        if self._control is None:
            return
        with contextlib.suppress(Exception):  # no reply in time: the relay's death watch decides
            await self._control.request("interrupt_request", {}, 5)

    async def _after_warm_up(self) -> None:
        """Start the sandbox, and wait for its completion warm-up, if under way."""
        await self.start()
        if self._warming is not None and not self._warming.done():
            await asyncio.wait({asyncio.shield(self._warming)}, timeout=self.request_timeout)

    async def complete(self, code: str, cursor_pos: int) -> dict[str, Any]:
        await self._after_warm_up()
        return await self._call(self._client.complete(code, cursor_pos))

    async def inspect(self, code: str, cursor_pos: int, detail_level: int = 0) -> dict[str, Any]:
        await self._after_warm_up()
        return await self._call(self._client.inspect(code, cursor_pos, detail_level))

    async def is_complete(self, code: str) -> dict[str, Any]:
        await self.start()
        return await self._call(self._client.is_complete(code))

    # -- comms -------------------------------------------------------------------------------
    def set_comm_handler(self, handler: Callable[[Event, str | None], None] | None) -> None:
        self._comm_handler = handler

    COMM_STATUS_WAIT_S = 0.5
    """Seconds a comm message for a subshell of the sandbox's kernel, sent while a cell runs, waits
    for the first IOPub message of its handling before the relay stops waiting for its ``idle``."""

    async def send_comm(self, msg_type: str, content: dict[str, Any], metadata: dict[str, Any] | None = None,
                        buffers: list[bytes] | None = None, emit: Emit | None = None) -> None:
        """Send a comm message into the sandbox; with ``emit``, relay what handling it produced
        until the sandbox's ``status: idle`` for it (no timeout: a slow widget callback holds
        the frontend's request, as in a plain kernel; an interrupt ends it).

        While a cell runs, ipykernel handles a message for its main shell either concurrently,
        without any status, or after the cell: then the message is only sent, and what comes back
        goes to the comm handler. A message for one of its subshells (the frontend's, see
        :data:`request_subshell_id`) is handled at once, with its status, unless ipykernel routes
        it to the busy main shell (a comm's messages go where it last published): it is waited
        for while its first IOPub message comes within :data:`COMM_STATUS_WAIT_S`."""
        await self.start()
        subshell = await self._subshell()
        msg = self._message(msg_type, content, metadata, subshell=subshell)
        msg_id = msg["header"]["msg_id"]
        running = any(r.execute for r in self._requests.values())
        wait = emit is not None and (subshell is not None or not running)
        if wait:
            request = self._requests[msg_id] = _Request()
        msg["buffers"] = buffers or []
        if not wait and emit is not None and subshell is None:  # its idle, if the sandbox's kernel sends one
            self._unsettled[msg_id] = asyncio.get_running_loop().create_future()
            while len(self._unsettled) > self.UNSETTLED_KEPT:  # answered by none (beside an async cell)
                self._unsettled.pop(next(iter(self._unsettled))).cancel()
        self._client.shell_channel.send(msg)
        if not wait:
            return
        relay = asyncio.ensure_future(relay_outputs(request, emit, drop_note(*self.message_bound)))
        try:
            if running:
                await self._race(relay, self.COMM_STATUS_WAIT_S, in_cell=False)
                if not relay.done() and not request.iopub.received:
                    return
            await self._race(relay, None, in_cell=False)
        finally:
            relay.cancel()
            request.iopub.close()
            self._requests.pop(msg_id, None)

    UNSETTLED_KEPT = 256
    """Comm messages sent beside a running cell whose ``idle`` :meth:`comm_settled` may still
    await; ipykernel answers one handled beside an async cell with no status at all."""

    async def comm_settled(self, msg_id: str) -> bool:
        settled = self._unsettled.get(msg_id)
        if settled is None:
            return False
        try:
            await asyncio.shield(settled)
        except asyncio.CancelledError:
            if not settled.cancelled():
                raise
            return False
        finally:
            if settled.done():
                self._unsettled.pop(msg_id, None)
        return True

    async def comm_info(self, target_name: str | None = None) -> dict[str, Any]:
        await self.start()
        content = {"target_name": target_name} if target_name else {}
        msg = self._client.session.msg("comm_info_request", content)
        self._client.shell_channel.send(msg)
        return await self._call(msg["header"]["msg_id"])

    # -- what else a Jupyter frontend asks ---------------------------------------------------------
    async def history(self, content: dict[str, Any]) -> dict[str, Any]:
        await self.start()
        msg = self._message("history_request", content, subshell=await self._subshell())
        self._client.shell_channel.send(msg)
        return await self._call(msg["header"]["msg_id"])

    async def debug_request(self, content: dict[str, Any]) -> dict[str, Any]:
        await self.start()
        return await self._control.request("debug_request", content, self.request_timeout)

    async def delete_subshell(self, subshell_id: str) -> None:
        if self._subshells is not None:
            await self._subshells.delete(subshell_id)

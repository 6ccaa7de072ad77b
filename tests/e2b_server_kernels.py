"""Code contexts of the E2B test server (``tests/e2b_server.py``): kernels and events.

A Python context is a real ipykernel started through ``jupyter_client``'s
``AsyncKernelManager`` (IPC transport) with the context's cwd; a bash context runs
each execution as ``bash -c`` in a subprocess. All kernels, ZMQ sockets and
subprocesses live on one asyncio loop in a daemon thread (:class:`KernelLoop`); the
HTTP handler threads talk to it through ``run_coroutine_threadsafe`` and receive
execution events through a queue.

Events are the newline-delimited JSON objects of the code interpreter's
``POST /execute`` stream, built by ``e2b_server_wire`` as E2B's server builds them, with its
:class:`~e2b_server_wire.Timings` (when an interrupt lands, how long a restart takes).
"""

from __future__ import annotations

import asyncio
import codecs
import concurrent.futures
import contextlib
import json
import os
import queue
import signal
import sys
import threading
import uuid
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import AsyncKernelManager

try:
    from .e2b_server_wire import RESTART_LOST, Timings, error_event, iopub_to_event, stream_event
except ImportError:  # tests/ itself is on sys.path
    from e2b_server_wire import RESTART_LOST, Timings, error_event, iopub_to_event, stream_event

Emit = Callable[[dict], None]
"""Receives one execution event (a JSON-able dict); must be thread-safe."""

KERNEL_NAME = "e2b-test-python"
POLL_SECONDS = 0.2
"""How often a waiting execution checks that its kernel is still alive."""


class KernelLoop:
    """An asyncio loop in a daemon thread that owns every kernel client and subprocess."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="e2b-kernels", daemon=True)
        self._thread.start()

    def submit(self, coro: Coroutine) -> concurrent.futures.Future:
        """Schedule ``coro`` on the loop; cancelling the future cancels the task."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def call(self, coro: Coroutine, timeout: float | None = 120) -> Any:
        """Run ``coro`` on the loop and wait for its result (seconds)."""
        return self.submit(coro).result(timeout)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)
        self.loop.close()


class KernelFactory:
    """Starts ipykernels of this interpreter over IPC sockets under ``root``."""

    def __init__(self, root: Path) -> None:
        spec_dir = root / "kernels" / KERNEL_NAME
        spec_dir.mkdir(parents=True)
        # E2B's template (ipython_kernel_config.py): plain tracebacks, no truncated sequences
        argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}",
                "--InteractiveShell.colors=NoColor", "--PlainTextFormatter.max_seq_length=0"]
        spec = {"argv": argv, "display_name": "E2B test server", "language": "python"}
        (spec_dir / "kernel.json").write_text(json.dumps(spec))
        self._spec_manager = KernelSpecManager(kernel_dirs=[str(root / "kernels")])
        self._ipc_dir = root / "ipc"
        self._ipc_dir.mkdir()

    async def start(self, cwd: Path, env: dict[str, str]) -> tuple[AsyncKernelManager, Any]:
        """Start a kernel with ``cwd`` and ``env``; return its manager and a ready client."""
        km = AsyncKernelManager(kernel_name=KERNEL_NAME, kernel_spec_manager=self._spec_manager,
                                transport="ipc", ip=str(self._ipc_dir / uuid.uuid4().hex[:12]))
        await km.start_kernel(cwd=str(cwd), env=env)
        kc = km.client()
        kc.start_channels()
        try:
            await kc.wait_for_ready(timeout=60)  # also waits for IOPub to connect
        except BaseException:
            kc.stop_channels()
            await km.shutdown_kernel(now=True)
            raise
        return km, kc


class Context:
    """A code context (``POST /contexts``): id, language, cwd and one execution at a time."""

    language = ""

    def __init__(self, cwd: Path, env: dict[str, str]) -> None:
        self.id = str(uuid.uuid4())
        self.cwd = cwd
        self.env = env
        self._lock: asyncio.Lock | None = None  # created on the loop
        self._task: asyncio.Task | None = None
        self._stop_reason: str | None = None

    def to_json(self) -> dict:
        """The code interpreter's ``Context`` model: ``{"id", "language", "cwd"}``."""
        return {"id": self.id, "language": self.language, "cwd": str(self.cwd)}

    @property
    def started(self) -> bool:
        """Whether an execution can begin without starting a process first."""
        return True

    async def execute(self, code: str, env_vars: dict[str, str], emit: Emit, lost: bool = False) -> None:
        """Run ``code``, emitting events; serialised per context like a Jupyter kernel (``lost``:
        never sent, never answered)."""
        async with self._guard():
            self._task = asyncio.current_task()
            try:
                await (asyncio.Future() if lost else self._execute(code, env_vars, emit))
            except asyncio.CancelledError:
                if self._stop_reason:  # restart/remove/kill: E2B closes its websocket to Jupyter
                    for name, value in RESTART_LOST:
                        emit(error_event(name, value))
                else:  # the client closed the stream: E2B interrupts the kernel, without waiting
                    self._client_left()
                raise
            finally:
                self._task = None

    async def never_answer(self) -> None:
        """An execution E2B's server never answers (one sent while Jupyter restarts a dead
        kernel): it holds the context until the client closes the stream, then the kernel is
        interrupted as for any closed stream."""
        await self.execute("", {}, lambda event: None, lost=True)

    def _client_left(self) -> None:
        """The client closed an execution's stream (see :class:`PythonContext`)."""

    async def stop(self, reason: str) -> None:
        """Cancel the running execution (if any) and release the context's resources."""
        self._stop_reason = reason
        if self._task is not None:
            self._task.cancel()
        async with self._guard():
            await self._shutdown()
        self._stop_reason = None

    async def start(self) -> None:
        """Start the context's process (kernel) if it is not running."""
        async with self._guard():
            await self._start()

    async def restart(self) -> None:
        """``POST /contexts/{id}/restart``: stop (a running execution ends with E2B's
        :data:`~e2b_server_wire.RESTART_LOST` errors), then start afresh."""
        await self.stop("The context was restarted.")
        await self.start()

    def _guard(self) -> asyncio.Lock:
        if self._lock is None:  # an asyncio.Lock must be created on the loop
            self._lock = asyncio.Lock()
        return self._lock

    async def _start(self) -> None:
        """Start the process if needed; called with the context's lock held."""

    async def _execute(self, code: str, env_vars: dict[str, str], emit: Emit) -> None:
        raise NotImplementedError("The '_execute' method must be implemented.")

    async def _shutdown(self) -> None:
        """Release resources; the next execution starts afresh."""


class PythonContext(Context):
    """A Python context: one ipykernel, cwd = the context's cwd."""

    language = "python"

    def __init__(self, cwd: Path, env: dict[str, str], kernels: KernelFactory, timings: Timings,
                 global_envs: dict[str, str] | None = None) -> None:
        super().__init__(cwd, env)
        self.global_envs = global_envs or {}
        """What envd's ``GET /envs`` answers: E2B's server sets them in the first execution it runs
        on a context (and after each restart), before the code, so that execution counts."""
        self._envs_due = True
        self._kernels = kernels
        self.timings = timings
        self.km: AsyncKernelManager | None = None
        self.kc = None
        self._restarting: asyncio.Future | None = None
        self._warm_at = 0.0  # loop time before which a restarted kernel does not answer yet
        self._interrupts: set[asyncio.Future] = set()  # on their way to the kernel
        self.raced = 0
        """Executions sent to the kernel while the interrupt of a closed stream was on its way."""

    async def restart(self) -> None:
        await super().restart()
        self._envs_due = True
        self._warm_at = asyncio.get_running_loop().time() + self.timings.restart_warmup

    @property
    def started(self) -> bool:
        return self.km is not None or self._restarting is not None

    async def _start(self) -> None:
        if self.km is not None and await self.km.is_alive():
            return
        await self._shutdown()
        self.km, self.kc = await self._kernels.start(self.cwd, self.env)

    async def _shutdown(self) -> None:
        if self._restarting is not None and self._restarting is not asyncio.current_task():
            with contextlib.suppress(Exception):
                await asyncio.shield(self._restarting)  # let Jupyter's restart finish, then stop it
        km, kc, self.km, self.kc = self.km, self.kc, None, None
        if kc is not None:
            kc.stop_channels()
        if km is not None:
            await km.shutdown_kernel(now=True)

    async def _execute(self, code: str, env_vars: dict[str, str], emit: Emit) -> None:
        if self._restarting is not None:  # sent while Jupyter restarts the dead kernel: lost
            await asyncio.Future()  # no event, no end: only keepalives, until the client leaves
        if self.km is not None and not await self.km.is_alive():  # died between executions
            return self._kernel_died(emit)
        await self._start()
        if self._envs_due and self.global_envs:  # messaging.py: complete_code = f"{env code}\n{code}"
            self._envs_due = False
            code = "\n".join(f"import os; os.environ['{k}'] = '{v}'" for k, v in self.global_envs.items()) \
                + "\n\n" + code
        if env_vars:
            await self._run(_SET_ENV % (sorted(env_vars), env_vars), None)
        try:
            await self._run(code, emit)
        finally:
            if env_vars and self.kc is not None and self._restarting is None and not self._stop_reason:
                await self._run(_RESTORE_ENV, None)

    async def _run(self, code: str, emit: Emit | None) -> None:
        """Send an execute_request and forward its IOPub messages until it ends, as E2B's server
        (``messaging.py``) ends it: on ``status: idle`` only once the kernel took the request
        (``execute_input``, or ``status: busy`` for a silent one). A request ipykernel aborts
        (queued behind a cell that failed, ``stop_on_error``) gets ``busy``/``idle`` but no
        ``execute_input``, and its ``execute_reply`` says ``"aborted"`` where E2B's server waits
        for ``"abort"``: it never ends. A kernel found dead ends the execution with
        ``ContextRestarting`` while a new kernel starts in the background (Jupyter's restarter)."""
        await self._drain_shell_replies()
        await asyncio.sleep(self._warm_at - asyncio.get_running_loop().time())  # a fresh kernel's first answer
        self.raced += bool(self._interrupts)
        # E2B's code interpreter sends execute_request with allow_stdin=False, so input() raises
        # StdinNotImplementedError; jupyter_client's default (True) would hang on an input_request.
        msg_id = self.kc.execute(code, silent=emit is None, store_history=emit is not None, allow_stdin=False,
                                 stop_on_error=True)
        accepted = errored = False
        while True:
            try:
                msg = await self.kc.get_iopub_msg(timeout=POLL_SECONDS)
            except queue.Empty:
                if not await self.km.is_alive():
                    return self._kernel_died(emit)
                continue
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            msg_type, content = msg["msg_type"], msg["content"]
            if msg_type == "status":
                accepted = accepted or (emit is None and content["execution_state"] == "busy")
                if content["execution_state"] == "idle" and accepted:
                    return
                continue
            accepted = accepted or msg_type == "execute_input"
            if msg_type == "error" and errored:  # E2B forwards an execution's first error only
                continue
            errored = errored or msg_type == "error"
            event = iopub_to_event(msg)
            if emit and event:
                emit(event)

    def _client_left(self) -> None:
        """Interrupt the kernel ``timings.interrupt_latency`` seconds from now, as E2B's server
        does when a client closes its stream: the context is free at once, so the next
        execution may reach the kernel before this interrupt does (and be hit by it)."""
        async def deliver() -> None:
            await asyncio.sleep(self.timings.interrupt_latency)
            if self.km is not None:
                with contextlib.suppress(Exception):
                    await self.km.interrupt_kernel()

        task = asyncio.ensure_future(deliver())
        self._interrupts.add(task)
        task.add_done_callback(self._interrupts.discard)

    def _kernel_died(self, emit: Emit | None) -> None:
        """What E2B's server does when Jupyter says ``status: restarting``: end the execution
        with ``ContextRestarting`` and restart the kernel in the background."""
        if emit:
            emit(error_event("ContextRestarting", "Context was restarted"))
        self._restarting = asyncio.ensure_future(self._autorestart())

    async def _autorestart(self) -> None:
        try:
            await self._shutdown()
            await asyncio.sleep(self.timings.dead_restart)
            self.km, self.kc = await self._kernels.start(self.cwd, self.env)
        finally:
            self._restarting = None

    async def _drain_shell_replies(self) -> None:
        """Discard earlier execute_replies: outputs come from IOPub, the status from ``error``."""
        try:
            while True:
                await self.kc.get_shell_msg(timeout=0)
        except queue.Empty:
            pass


# Per-execution env_vars: set before the user's code, restored after it (silently).
_SET_ENV = (
    "_e2b_saved_env = {k: __import__('os').environ.get(k) for k in %r}\n"
    "__import__('os').environ.update(%r)\n"
)
_RESTORE_ENV = (
    "[__import__('os').environ.pop(k, None) if v is None else __import__('os').environ.update({k: v})\n"
    " for k, v in _e2b_saved_env.items()]\n"
    "del _e2b_saved_env\n"
)


class BashContext(Context):
    """A bash context: each execution is ``bash -c CODE`` in the context's cwd.

    Unlike E2B's bash kernel, shell state (variables, ``cd``) does not persist
    between executions. A non-zero exit status is reported as an error event.
    """

    language = "bash"

    def __init__(self, cwd: Path, env: dict[str, str]) -> None:
        super().__init__(cwd, env)
        self._count = 0

    async def _execute(self, code: str, env_vars: dict[str, str], emit: Emit) -> None:
        self._count += 1
        emit({"type": "number_of_executions", "execution_count": self._count})
        proc = await asyncio.create_subprocess_exec(
            "bash", "-c", code, cwd=self.cwd, env={**self.env, **env_vars},
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, start_new_session=True,
        )
        try:
            await asyncio.gather(_pump(proc.stdout, "stdout", emit), _pump(proc.stderr, "stderr", emit))
            status = await proc.wait()
        except asyncio.CancelledError:
            await _terminate(proc)
            raise
        if status != 0:
            emit(error_event("CalledProcessError", f"Command returned non-zero exit status {status}."))


async def _pump(stream: asyncio.StreamReader, name: str, emit: Emit) -> None:
    """Forward a subprocess pipe as it is produced (not line-buffered)."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    while chunk := await stream.read(65536):
        if text := decoder.decode(chunk):
            emit(stream_event(name, text))
    if tail := decoder.decode(b"", final=True):
        emit(stream_event(name, tail))


async def _terminate(proc: asyncio.subprocess.Process) -> None:
    """SIGINT the process group, SIGKILL it after 2 s."""
    for sig, grace in ((signal.SIGINT, 2), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
            await asyncio.wait_for(proc.wait(), grace)
            return
        except (TimeoutError, ProcessLookupError):
            continue

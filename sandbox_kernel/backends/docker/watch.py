"""How the docker backend watches its container's processes: :class:`ContainerWatch`, one per
container :class:`~sandbox_kernel.backends.docker.DockerBackend` starts.

Death is learned from the engine (``POST /containers/{id}/wait``, then the container's state
and events for the reason), not from a heartbeat. When the engine itself stops answering, the
container cannot be removed, so its kernel is told to exit over its own control channel. After
a cell that filled the pids limit (a fork bomb), the other processes are stopped and reaped.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jupyter_client.asynchronous import AsyncKernelClient

from ...core.errors import EngineLost, SandboxError
from ...core.events import Emit, Stream
from . import engine
from .boundary import stats
from .spec import PIDS_HEADROOM, REAPER


def run_blocking(fn, *args, **kwargs) -> asyncio.Future:
    """``fn(*args, **kwargs)`` in the loop's default executor (docker-py is blocking)."""
    return asyncio.get_running_loop().run_in_executor(None, functools.partial(fn, *args, **kwargs))


@dataclass(frozen=True)
class Limits:
    """What :func:`.engine.death_reason` needs to say why a container stopped."""

    memory_limit: int
    """Bytes (0: none)."""
    pids_limit: int
    """Processes and threads (0: none)."""
    runtime: str
    """The OCI runtime ("runsc") or "" for the engine's default."""
    image: str
    """The image as messages name it."""
    podman: bool = False
    """The engine is Podman's Docker-compatible API (it reports no OOM kill, see :mod:`.podman`)."""


class ContainerWatch:
    """Watches one running container for the backend: its death (``_wait_dead``), the kernel's
    farewell when the engine is gone, and its process slots after each cell.

    Args:
        client: the docker-py client.
        container: the docker-py container running the kernel.
        connection: the kernel's connection info (to tell it to exit over its control channel),
            or None when the kernel goes by itself with the engine (the api transport's relay).
        limits: the container's limits and image, for the reasons it gives.
        created: when the container was created (unix time, seconds).
    """

    def __init__(self, client: Any, container: Any, connection: dict[str, Any] | None, limits: Limits,
                 created: int) -> None:
        self.client, self.container = client, container
        self.connection = dict(connection) if connection is not None else None
        self.limits, self.created = limits, created
        self.pids_file: Path | None = None
        """The container's cgroup ``pids.current`` on this host, when it has it (set once ready)."""
        self._farewell: asyncio.Future | None = None  # telling the kernel to exit, the engine being gone

    # -- death -----------------------------------------------------------------------------------
    async def wait_dead(self, starting: Callable[[], bool]) -> str:
        """Return why the container stopped, once it has (``starting()``: whether the kernel
        never became ready, which reads its log for the reason)."""
        client, container_id = self.client, self.container.id
        loop = asyncio.get_running_loop()
        stopped: asyncio.Future = loop.create_future()

        def settle(result: BaseException | None) -> None:
            if not stopped.done():
                stopped.set_result(result)

        def watch() -> None:
            try:
                engine.wait_for_exit(client, container_id)
                result = None
            except EngineLost as exc:
                result = exc
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
                loop.call_soon_threadsafe(settle, result)

        threading.Thread(target=watch, name=f"sandbox-kernel-wait-{container_id[:12]}", daemon=True).start()
        lost = await stopped
        if lost is not None:  # dead from now on (a cell ends with this reason, not with the
            # interrupt's KeyboardInterrupt); await_farewell waits for the kernel to be told to exit
            if self.connection is not None:
                self._farewell = asyncio.ensure_future(self._shutdown_kernel_by_message())
            return "the Docker engine stopped answering (is dockerd running?)"
        limits = self.limits
        return await run_blocking(engine.death_reason, client, container_id, memory_limit=limits.memory_limit,
                                  image=limits.image, created=self.created, starting=starting(),
                                  runtime=limits.runtime, pids_limit=limits.pids_limit, podman=limits.podman)

    async def _shutdown_kernel_by_message(self) -> None:
        """With the engine gone the container cannot be removed: ask the kernel itself to exit
        (``interrupt_request`` to end a running cell, which a busy kernel needs before it
        honours ``shutdown_request``, both on the control channel), so nothing keeps running."""
        client = AsyncKernelClient()
        client.load_connection_info(self.connection)
        client.start_channels(shell=False, iopub=False, stdin=False, hb=False, control=True)
        try:
            for request in ("interrupt_request", "shutdown_request"):
                client.control_channel.send(client.session.msg(request, {"restart": False}))
                with contextlib.suppress(Exception):
                    await client.get_control_msg(timeout=2)
        finally:
            client.stop_channels()

    async def await_farewell(self) -> None:
        """Wait until the kernel was told to exit (if the engine was lost); call before the
        host directory, which holds the kernel's ipc sockets, is removed."""
        farewell, self._farewell = self._farewell, None
        if farewell is not None:
            with contextlib.suppress(Exception):
                await farewell

    # -- process slots -----------------------------------------------------------------------------
    def pids_in_use(self) -> int:
        """Processes and threads in the container: its cgroup file (microseconds) when this host
        has it, else the engine's one-shot stats (milliseconds). Blocking."""
        if self.pids_file is not None:
            with contextlib.suppress(OSError, ValueError):
                return int(self.pids_file.read_text())
        return stats(self.container).get("pids_stats", {}).get("current", 0)

    async def free_process_slots(self, emit: Emit, failed: bool,
                                 run_silently: Callable[[str], Awaitable[Any]]) -> None:
        """After a cell, if the container is at its pids limit (a fork bomb's children, alive or
        zombies the kernel never reaps), stop every process but the kernel and init and reap
        them with ``run_silently(REAPER)`` (Python code run by the kernel), so the next cell can
        start its threads; the state survives. Checked after every cell when the cgroup file is
        readable, else only after failed cells."""
        pids_limit = self.limits.pids_limit
        if not pids_limit or not (failed or self.pids_file):
            return
        try:
            if self.pids_file is not None:
                in_use = self.pids_in_use()
            else:
                in_use = await run_blocking(self.pids_in_use)
        except SandboxError:  # gone meanwhile: the death watch reports it
            return
        if in_use < pids_limit - PIDS_HEADROOM:
            return
        await run_silently(REAPER)
        emit(Stream("stderr", f"[the sandbox reached its process limit ({pids_limit}); its other processes "
                              "were stopped]\n"))

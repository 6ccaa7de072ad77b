"""How the docker backend watches its container's processes: :class:`ContainerWatch`, a part of
:class:`~.docker.DockerBackend`.

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
from typing import Any

from jupyter_client.asynchronous import AsyncKernelClient

from ...events import Emit, Stream
from . import engine
from .spec import PIDS_HEADROOM, REAPER


def run_blocking(fn, *args, **kwargs) -> asyncio.Future:
    """``fn(*args, **kwargs)`` in the loop's default executor (docker-py is blocking)."""
    return asyncio.get_running_loop().run_in_executor(None, functools.partial(fn, *args, **kwargs))


class ContainerWatch:
    """Uses the backend's ``_docker`` (docker-py client), ``_container``, ``_info`` (the
    kernel's connection info), ``_client``, ``_pids_file`` and its options."""

    _farewell: asyncio.Future | None = None  # telling the kernel to exit, the engine being gone
    _pids_file: Any = None  # the container's cgroup pids.current, when this host has it

    # -- death -----------------------------------------------------------------------------------
    async def _wait_dead(self) -> str:
        client, container_id = self._docker, self._container.id
        loop = asyncio.get_running_loop()
        stopped: asyncio.Future = loop.create_future()

        def settle(result: BaseException | None) -> None:
            if not stopped.done():
                stopped.set_result(result)

        def watch() -> None:
            try:
                engine.wait_for_exit(client, container_id)
                result = None
            except engine.EngineLost as exc:
                result = exc
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
                loop.call_soon_threadsafe(settle, result)

        threading.Thread(target=watch, name=f"sandbox-kernel-wait-{container_id[:12]}", daemon=True).start()
        lost = await stopped
        if lost is not None:  # dead from now on (a cell ends with this reason, not with the
            # interrupt's KeyboardInterrupt); _terminate waits for the kernel to be told to exit
            self._farewell = asyncio.ensure_future(self._shutdown_kernel_by_message(dict(self._info)))
            return "the Docker engine stopped answering (is dockerd running?)"
        return await run_blocking(engine.death_reason, client, container_id, memory_limit=self.memory_limit,
                                  image=self._image_label, created=self._created, starting=not self._ready,
                                  runtime=self.runtime, pids_limit=self.pids_limit)

    async def _shutdown_kernel_by_message(self, info: dict[str, Any]) -> None:
        """With the engine gone the container cannot be removed: ask the kernel itself to exit
        (``interrupt_request`` to end a running cell, which a busy kernel needs before it
        honours ``shutdown_request``, both on the control channel), so nothing keeps running."""
        client = AsyncKernelClient()
        client.load_connection_info(info)
        client.start_channels(shell=False, iopub=False, stdin=False, hb=False, control=True)
        try:
            for request in ("interrupt_request", "shutdown_request"):
                client.control_channel.send(client.session.msg(request, {"restart": False}))
                with contextlib.suppress(Exception):
                    await client.get_control_msg(timeout=2)
        finally:
            client.stop_channels()

    async def _await_farewell(self) -> None:
        """Wait until the kernel was told to exit (if the engine was lost); call before the
        host directory, which holds the kernel's ipc sockets, is removed."""
        farewell, self._farewell = self._farewell, None
        if farewell is not None:
            with contextlib.suppress(Exception):
                await farewell

    # -- process slots -----------------------------------------------------------------------------
    def _pids_in_use(self, container: Any) -> int:
        """Processes and threads in the container: its cgroup file (microseconds) when this host
        has it, else the engine's one-shot stats (milliseconds). Blocking."""
        if self._pids_file is not None:
            with contextlib.suppress(OSError, ValueError):
                return int(self._pids_file.read_text())
        return container.stats(stream=False, one_shot=True).get("pids_stats", {}).get("current", 0)

    async def _free_process_slots(self, emit: Emit, failed: bool) -> None:
        """After a cell, if the container is at its pids limit (a fork bomb's children, alive or
        zombies the kernel never reaps), stop every process but the kernel and init and reap
        them, so the next cell can start its threads; the state survives. Checked after every
        cell when the cgroup file is readable, else only after failed cells."""
        container = self._container
        if self.kernel_name:  # the reaper is Python code
            return
        if not self.pids_limit or container is None or self._client is None or not (failed or self._pids_file):
            return
        try:
            if self._pids_file is not None:
                in_use = self._pids_in_use(container)
            else:
                in_use = await run_blocking(self._pids_in_use, container)
        except Exception:  # gone meanwhile: the death watch reports it
            return
        if in_use < self.pids_limit - PIDS_HEADROOM:
            return
        await self._call(self._client.execute(REAPER, silent=True, store_history=False))
        emit(Stream("stderr", f"[the sandbox reached its process limit ({self.pids_limit}); its other processes "
                              "were stopped]\n"))

"""A kernel forked from a checkpoint beside a sandbox's kernel (:meth:`Forking.fork`):
a copy of the state that runs on, in the same sandbox (its limits, its files, its keeper), on
sockets of its own, reached as the backend it was forked from reaches a kernel: ``local``
directly, ``docker`` through a relay the engine starts by ``exec`` (:mod:`..docker.inside`).
Its memory is copy-on-write: what one fork writes no other fork, nor the sandbox, sees; its
files are the sandbox's. It ends with the sandbox, or when closed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from ...core.errors import CheckpointError
from ..base import Backend
from ..checkpoint import Checkpoint
from .backend import KernelClientBackend
from .checkpoints import KeptCheckpoints

Connect = Callable[..., Awaitable[tuple[dict[str, Any], Any]]]
"""``await connect(answer, on_drop, on_end)`` → the fork's connection info and the bridge that
carries it (an :class:`..docker.bridge.AttachBridge`, or None when the host reaches its sockets):
the parent backend's way to reach a kernel of its sandbox from the keeper's answer."""


class ForkedBackend(KernelClientBackend):
    """One fork (see the module's text).

    Args:
        parent: the backend whose sandbox it runs in.
        kept: the parent's checkpoints (its keeper), whose link this fork shares.
        answer: the keeper's answer to the fork (``fork``, ``connection_file``, ``ip``).
        connect: the parent's way to reach it (:data:`Connect`).
    """

    capabilities = replace(KernelClientBackend.capabilities, files=True, checkpoints=True)
    checkpoints = True
    checkpoint_min_seconds = -1.0
    """No automatic checkpoints in a fork (they would fill its sandbox's list); on demand only."""

    @property
    def checkpoint_keep(self) -> int:
        return self._parent.checkpoint_keep

    @property
    def checkpoint_max_bytes(self) -> int | None:
        return self._parent.checkpoint_max_bytes

    @property
    def memory_limit(self) -> int:
        return getattr(self._parent, "memory_limit", 0)

    def __init__(self, parent: KernelClientBackend, kept: KeptCheckpoints, answer: dict[str, Any],
                 connect: Connect, **kwargs: Any) -> None:
        super().__init__(parent=parent, session=f"{parent.session}-fork{answer['fork']}", **kwargs)
        self.name = parent.name
        self._parent, self._answer, self._connect_to = parent, answer, connect
        self._kept_by = kept  # the parent's: it knows when this fork ends
        self._shared = KeptCheckpoints(kept.link, parent, self.run_silently, listen=False)  # its takes run here
        self._bridge: Any = None
        self._bridge_end: asyncio.Future | None = None
        self.set_output_budget(*(parent._output_budget or (0, "max_output_bytes")))

    @property
    def fork(self) -> int:
        """The keeper's number of this fork."""
        return self._answer["fork"]

    async def _launch(self) -> dict[str, Any]:
        end = self._bridge_end = asyncio.get_running_loop().create_future()
        info, self._bridge = await self._connect_to(
            self._answer, lambda channel: self._recovery is not None and self._recovery.on_drop(channel),
            lambda: end.done() or end.set_result(None))
        return info

    def _iopub_taken(self) -> Callable[[int], None] | None:
        return self._bridge.taken if self._bridge is not None else None

    async def _terminate(self) -> None:
        bridge, self._bridge = self._bridge, None
        if bridge is not None:
            bridge.close()
        await self._kept_by.end_fork(self.fork)

    async def _wait_dead(self) -> str:
        ended = asyncio.ensure_future(self._kept_by.fork_death(self.fork))
        try:
            await asyncio.wait({ended, self._bridge_end}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            ended.cancel()
        return "the fork's kernel ended (its sandbox stopped, or it was closed)"

    async def start(self) -> None:
        if self.started:
            return
        await super().start()
        await self._checkpoint_after(-1)  # it copies its parent's: checkpoints are taken on demand in a fork

    async def restart(self) -> None:
        raise CheckpointError("A fork cannot restart: close it, and fork again.")

    # -- checkpoints: taken into the sandbox's list; restored in the sandbox itself -------------
    async def checkpoint(self, name: str | None = None, *, cell: int | None = None) -> Checkpoint:
        await self.start()
        return await self._shared.take(name, cell)

    async def list_checkpoints(self) -> list[Checkpoint]:
        return await self._shared.list()

    async def restore(self, checkpoint: int) -> Checkpoint:
        raise CheckpointError("A fork cannot be restored: restore the checkpoint in the sandbox it was forked from "
                              "(a fork's checkpoints are in its list), or fork from it again.")

    async def drop_checkpoint(self, checkpoint: int) -> bool:
        return await self._shared.drop(checkpoint)

    # -- files: the sandbox's ---------------------------------------------------------------------
    async def upload(self, local: str | Path, remote: str) -> str:
        return await self._parent.upload(local, remote)

    async def download(self, remote: str, local: str | Path, *, max_bytes: int = 0) -> Path:
        return await self._parent.download(remote, local, max_bytes=max_bytes)

    def describe(self) -> dict[str, Any]:
        return {**self._parent.describe(), "session": self.session, "fork": self.fork}


class Forking(KernelClientBackend):
    """A kernel-client backend whose sandbox can hold forks of its kernel (:meth:`fork`): the local
    and docker backends. Its subclass says where a fork's sockets go (:meth:`_fork_folder`) and
    how the host reaches them (:meth:`_reach_fork`)."""

    async def fork(self, count: int = 1) -> list[Backend]:
        """``count`` copies of the sandbox's state now, each a kernel of its own beside this one in
        the same sandbox (:class:`ForkedBackend`), started. Raises CheckpointError, NotSupported."""
        await self.start()
        kept = self._keeper()
        await self._fork_room(count)
        base = await kept.take(None, self._last_count or None)
        made: list[Backend] = []
        try:
            for _ in range(count):
                answer = await kept.fork(base.id, self._fork_folder())
                made.append(ForkedBackend(self, kept, answer, self._reach_fork))
                await made[-1].start()
        except BaseException:
            for backend in made:
                await backend.shutdown()
            raise
        finally:
            await kept.drop(base.id)
        return made

    async def _fork_room(self, count: int) -> None:
        """Raise CheckpointError (what to do, in one line) when the sandbox has no room for
        ``count`` more kernels; nothing here."""

    def _fork_folder(self) -> str | None:
        """Where in the sandbox a fork's sockets go (None: beside the keeper's socket)."""
        return None

    async def _reach_fork(self, answer: dict[str, Any], on_drop: Any, on_end: Any) -> tuple[dict[str, Any], Any]:
        """The connection info of fork ``answer`` (the keeper's) and the bridge that carries it
        (see :data:`Connect`): here its connection file, read where the sandbox's files
        are this machine's; no bridge."""
        import json

        with open(answer["connection_file"]) as f:
            return json.load(f), None

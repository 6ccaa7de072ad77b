"""What a kernel-client backend asks of its sandbox's keeper (:mod:`..checkpoint`): checkpoints
taken, listed, restored and dropped, a fresh interpreter that keeps them, and the keeper's word
when the kernel died. The backend (:mod:`.backend`) reconnects its client after the kernel
process behind its connection changed.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

from ...core.errors import CheckpointError
from ..checkpoint import Checkpoint, max_bytes_of
from ..checkpoint.inside import MODULE
from ..checkpoint.link import KeeperLink

RunSilently = Callable[[str, dict[str, str]], Awaitable[dict[str, Any]]]
MAX_ANSWER = 64 * 1024
"""Characters of the kernel's answer to a take that are read at most."""


class KeptCheckpoints:
    """The checkpoints of one sandbox, through its keeper.

    Args:
        link: the host's connection to the keeper.
        options: the backend, whose ``checkpoint_keep``, ``checkpoint_max_bytes`` and
            ``memory_limit`` bound them.
        run_silently: the backend's silent execution (a take runs in the kernel's process).
        listen: take the keeper's events (the kernel's deaths, the forks' ends).
    """

    def __init__(self, link: KeeperLink, options: Any, run_silently: RunSilently, listen: bool = True) -> None:
        self.link, self._options, self._run_silently = link, options, run_silently
        self._deaths: asyncio.Queue = asyncio.Queue()
        self._fork_deaths: dict[int, asyncio.Future] = {}
        if listen:  # the keeper's events (a fork's share of its parent's link takes none: :meth:`death`)
            link.listeners.append(self._event)

    def _event(self, event: dict[str, Any]) -> None:
        if event.get("op") == "died":
            self._deaths.put_nowait(event)
        elif event.get("op") == "fork_died" and (done := self._fork_deaths.get(event.get("fork"))) is not None:
            if not done.done():
                done.set_result(None)

    async def hello(self) -> list[Checkpoint]:
        """Tell the keeper its bounds; the checkpoints it holds."""
        answer = await self.link.request("hello", keep=int(self._options.checkpoint_keep),
                                         max_bytes=max_bytes_of(self._options), recover=True)
        return _checkpoints(answer)

    async def take(self, name: str | None, cell: int | None) -> Checkpoint:
        """Fork the kernel's process into a checkpoint (see :func:`..checkpoint.inside.take`).

        Raises:
            CheckpointError: the kernel or the keeper could not take it (the reason)."""
        expression = f"__import__({MODULE!r}).take({cell!r}, {name!r})"
        reply = await self._run_silently("", {"checkpoint": expression})
        value = (reply.get("user_expressions") or {}).get("checkpoint") or {}
        if value.get("status") != "ok":
            raise CheckpointError(f"The sandbox could not take a checkpoint: {value.get('ename', 'no answer')} "
                                  f"{value.get('evalue', '')}".strip())
        answer = _parsed(((value.get("data") or {}).get("text/plain")))
        if "error" in answer:
            raise CheckpointError(f"The sandbox could not take a checkpoint: {str(answer['error'])[:300]}.")
        return Checkpoint.of({**answer, "cell": cell, "name": name, "time": time.time(), "bytes": None})

    async def list(self) -> list[Checkpoint]:
        """The checkpoints held, oldest first, with the bytes each holds now."""
        return _checkpoints(await self.link.request("list"))

    async def restore(self, checkpoint: int) -> Checkpoint:
        """Replace the kernel by checkpoint ``checkpoint`` (an id); the checkpoint stays. Returns
        once its kernel serves on the old connection.

        Raises:
            CheckpointError: no such checkpoint, or it could not become a kernel (the sandbox then
                runs a fresh interpreter, which the message says)."""
        try:
            answer = await self.link.request("restore", id=checkpoint)
        except CheckpointError as exc:
            if "no checkpoint" in str(exc):
                raise
            raise CheckpointError(f"The checkpoint could not be restored ({exc}); the sandbox runs a fresh "
                                  "interpreter now.") from None
        return Checkpoint.of(answer)

    async def list_held(self) -> list[Checkpoint]:
        """The checkpoints held, without measuring their bytes."""
        return _checkpoints(await self.link.request("list", measure=False))

    async def kernel_pid(self) -> int:
        """The running kernel's pid, as the keeper knows it (0: none)."""
        pid = (await self.link.request("list", measure=False)).get("kernel")
        return pid if isinstance(pid, int) and not isinstance(pid, bool) else 0

    async def fresh(self) -> None:
        """Replace the kernel by a fresh interpreter; the checkpoints stay."""
        await self.link.request("fresh")

    async def drop(self, checkpoint: int) -> bool:
        """Drop checkpoint ``checkpoint`` (an id); whether it was there."""
        return bool((await self.link.request("drop", id=checkpoint)).get("found"))

    async def death(self) -> dict[str, Any]:
        """The keeper's next word that the kernel died: ``{"status", "oom", "restored"}``
        (``oom``: the OOM killer took it, None: unknown; ``restored``: the :class:`Checkpoint`
        running now, or None); waits for ever if the link ends first."""
        while True:
            event = await self._deaths.get()
            if event.get("op") == "died":
                restored = event.get("restored")
                oom = event.get("oom")
                return {"status": event.get("status"), "oom": oom if isinstance(oom, bool) else None,
                        "restored": Checkpoint.of(restored) if isinstance(restored, dict) else None}

    async def fork(self, checkpoint: int, folder: str | None) -> dict[str, Any]:
        """A kernel made from checkpoint ``checkpoint`` beside the running one, on sockets of its
        own in ``folder`` (a path in the sandbox; None: beside the keeper's socket). Returns the
        keeper's answer: ``fork`` (its number), ``connection_file`` and ``ip`` (paths in the sandbox).

        Raises:
            CheckpointError: no such checkpoint, or it could not become a kernel."""
        answer = await self.link.request("fork", id=checkpoint, dir=folder)
        if not isinstance(answer.get("fork"), int) or not isinstance(answer.get("ip"), str):
            raise CheckpointError("The sandbox's keeper did not say where the fork listens.")
        self._fork_deaths[answer["fork"]] = asyncio.get_running_loop().create_future()
        return answer

    async def fork_death(self, fork: int) -> None:
        """Return when fork ``fork`` ended (or the keeper did)."""
        await asyncio.wait({self._fork_deaths[fork], self.link.closed}, return_when=asyncio.FIRST_COMPLETED)

    async def end_fork(self, fork: int) -> None:
        """End fork ``fork`` (its kernel is killed); nothing when it is gone."""
        with contextlib.suppress(CheckpointError):
            await self.link.request("end_fork", fork=fork)

    def detach(self) -> None:
        """Stop listening to the link's events (the link would hold this object, and with it
        its backend, until the link's end: a fork's share of its parent's link)."""
        with contextlib.suppress(ValueError):
            self.link.listeners.remove(self._event)

    def close(self) -> None:
        """End the link (the keeper then ends the sandbox's kernel)."""
        self.detach()
        self.link.close()


def _parsed(text: Any) -> dict[str, Any]:
    """The JSON the kernel's take returned, read from its ``text/plain`` repr (untrusted)."""
    try:
        value = json.loads(ast.literal_eval(text[:MAX_ANSWER])) if isinstance(text, str) else None
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        value = None
    return value if isinstance(value, dict) else {"error": "the kernel's answer was not understood"}


def _checkpoints(answer: dict[str, Any]) -> list[Checkpoint]:
    found = answer.get("checkpoints")
    return [Checkpoint.of(record) for record in found if isinstance(record, dict)] if isinstance(found, list) else []

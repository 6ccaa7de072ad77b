"""The host's connection to the sandbox's keeper (:mod:`.keeper`): requests and their answers,
and the keeper's events, as lines of JSON. Over a unix socket where the host reaches the
sandbox's files (``local``; ``docker`` with the ``ipc`` transport: the socket is in the host
directory the container mounts), else carried by the docker relay's stream
(:class:`KeeperLink` given a ``send`` function, fed with :meth:`KeeperLink.feed`).

Everything the keeper says comes from inside the sandbox, so it is checked like any output:
a line that is not a JSON object, or longer than :data:`MAX_LINE` bytes, ends the link.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from typing import Any

from ...core.errors import CheckpointError

MAX_LINE = 1024**2
"""Bytes one line from the keeper may have (a list of checkpoints is far less)."""
REQUEST_TIMEOUT = 60.0
"""Seconds a request waits for its answer (a restore includes a kernel's start)."""


class KeeperLink:
    """One connection to a keeper.

    Args:
        send: writes bytes to the keeper (the relay's channel); None for a unix socket, which
            :meth:`connect` opens.
    """

    def __init__(self, send: Callable[[bytes], None] | None = None) -> None:
        self._send = send
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task | None = None
        self._buffer = b""
        self._seq = 0
        self._waiting: dict[int, asyncio.Future] = {}
        self.listeners: list[Callable[[dict[str, Any]], None]] = []
        """Called with each of the keeper's events (``{"op": "died", ...}``), in order."""
        self.closed = asyncio.get_running_loop().create_future()
        """Done when the link ended (the keeper is gone, or the sandbox broke the wire)."""

    @classmethod
    async def connect(cls, path: str, timeout: float) -> KeeperLink:
        """Connect to the keeper's socket at ``path`` (a host path), waiting up to ``timeout``
        seconds for it to appear.

        Raises:
            CheckpointError: the keeper did not answer."""
        link = cls()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            try:
                reader, link._writer = await asyncio.open_unix_connection(path, limit=MAX_LINE)
                break
            except OSError as exc:
                if loop.time() > deadline:
                    raise CheckpointError(f"The sandbox's keeper did not answer ({exc}).") from exc
                await asyncio.sleep(0.02)
        link._reader_task = loop.create_task(link._read(reader))
        return link

    async def _read(self, reader: asyncio.StreamReader) -> None:
        with contextlib.suppress(Exception):
            while data := await reader.read(65536):
                self.feed(data)
        self._end()

    def feed(self, data: bytes) -> None:
        """Take bytes the keeper sent (a relay calls this with its channel's frames)."""
        if self.closed.done():
            return
        self._buffer += data
        *lines, self._buffer = self._buffer.split(b"\n")
        if len(self._buffer) > MAX_LINE:
            self._end()
            return
        for line in lines:
            try:
                message = json.loads(line)
            except ValueError:
                message = None
            if not isinstance(message, dict):
                self._end()
                return
            self._deliver(message)

    def _deliver(self, message: dict[str, Any]) -> None:
        seq = message.get("seq")
        waiting = self._waiting.pop(seq, None) if isinstance(seq, int) else None
        if waiting is not None and not waiting.done():
            waiting.set_result(message)
        elif seq is None and message.get("op") not in (None, "list", "error"):
            for listener in list(self.listeners):
                listener(message)

    def _end(self) -> None:
        if not self.closed.done():
            self.closed.set_result(None)
        for waiting in self._waiting.values():
            if not waiting.done():
                waiting.set_exception(CheckpointError("The sandbox's keeper is gone."))
                waiting.exception()
        self._waiting.clear()

    async def request(self, op: str, timeout: float = REQUEST_TIMEOUT, **fields: Any) -> dict[str, Any]:
        """Ask the keeper ``op``; its answer.

        Raises:
            CheckpointError: the keeper refused (its reason), is gone, or did not answer in time."""
        if self.closed.done():
            raise CheckpointError("The sandbox's keeper is gone.")
        self._seq += 1
        seq = self._seq
        answer = self._waiting[seq] = asyncio.get_running_loop().create_future()
        line = json.dumps({"op": op, "seq": seq, **fields}).encode() + b"\n"
        if self._send is not None:
            self._send(line)
        else:
            self._writer.write(line)
        try:
            message = await asyncio.wait_for(asyncio.shield(answer), timeout)
        except asyncio.TimeoutError:
            raise CheckpointError(f"The sandbox's keeper did not answer {op} within {timeout:g} s.") from None
        finally:
            self._waiting.pop(seq, None)
        if message.get("op") == "error":
            raise CheckpointError(str(message.get("error"))[:500])
        return message

    def close(self) -> None:
        """End the link (idempotent); its listeners are forgotten."""
        self.listeners.clear()
        if self._reader_task is not None:
            self._reader_task.cancel()
        if self._writer is not None:
            with contextlib.suppress(Exception):
                self._writer.close()
        self._end()

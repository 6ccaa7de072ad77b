"""What the host holds of one request's IOPub messages until its relay has handled them,
bounded in bytes.

The sandbox's IOPub keeps what the host has not read (:mod:`.launcher`), so the host need not
read faster than it can relay: past :data:`HELD_BYTES` the backend's IOPub reader waits for the
relay, libzmq's receive queue fills, and the rest of a flood waits in the sandbox, under its
memory limit, instead of in the wrapper. Nothing is dropped here; the output budget decides
what a cell shows, and says what it cut.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

HELD_BYTES = 8 * 1024**2
"""Bytes (about: :func:`approx_bytes` of the messages' content) one request's queue holds
before its reader waits; a single larger message is still taken."""


def approx_bytes(value: Any) -> int:
    """About the size in bytes of a message's content (its strings and buffers, plus a little
    per item): cheap, without serializing it again."""
    if isinstance(value, (str, bytes, bytearray, memoryview)):
        return len(value)
    if isinstance(value, dict):
        return sum(approx_bytes(item) for item in value.values()) + 16 * len(value)
    if isinstance(value, (list, tuple)):
        return sum(approx_bytes(item) for item in value) + 8 * len(value)
    return 8


class IOPubQueue:
    """A FIFO of one request's IOPub messages between the backend's reader and the request's
    relay. :meth:`put` returns once the queue holds at most ``max_bytes`` (or it was closed);
    :meth:`put_nowait` never waits (for the recovery's markers and other backends' readers)."""

    def __init__(self, max_bytes: int = HELD_BYTES) -> None:
        self.max_bytes = max_bytes
        self._items: deque[tuple[dict[str, Any], int]] = deque()
        self._bytes = 0
        self._arrived = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()
        self._closed = False
        self.received = 0
        """Messages put so far."""

    @property
    def held(self) -> int:
        """Bytes held now (approximately, see :func:`approx_bytes`)."""
        return self._bytes

    def qsize(self) -> int:
        return len(self._items)

    def put_nowait(self, msg: dict[str, Any], size: int = 0) -> None:
        self.received += 1
        self._items.append((msg, size))
        self._bytes += size
        self._arrived.set()
        if self._bytes > self.max_bytes and not self._closed:
            self._room.clear()

    async def put(self, msg: dict[str, Any]) -> None:
        """Queue ``msg``; wait while the queue holds more than ``max_bytes``."""
        self.put_nowait(msg, approx_bytes(msg.get("content")) + sum(map(len, msg.get("buffers") or [])))
        await self._room.wait()

    async def get(self) -> dict[str, Any]:
        """The oldest message, waiting for one (cancelling the wait loses nothing)."""
        while not self._items:
            self._arrived.clear()
            await self._arrived.wait()
        msg, size = self._items.popleft()
        self._bytes -= size
        if self._bytes <= self.max_bytes:
            self._room.set()
        return msg

    def close(self) -> None:
        """Nobody will read on: release a waiting :meth:`put`, and never wait again."""
        self._closed = True
        self._room.set()

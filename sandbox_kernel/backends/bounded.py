"""Downloads bounded as they are read: what every backend's ``download(..., max_bytes=N)`` uses so
a file in the sandbox (a cell can write 2 GB, or a sparse file of any size) never fills the host
past the bound. What was written is removed when the bound is passed."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterable, Iterable
from pathlib import Path

from ..core.errors import FileTooLarge


class BoundedFile:
    """``local`` opened for writing, refusing to hold more than ``max_bytes`` (0: no bound):
    :meth:`write` raises :class:`FileTooLarge` (for ``remote``) past it; leaving the ``with``
    block by an exception removes the file."""

    def __init__(self, local: str | Path, max_bytes: int, remote: str) -> None:
        self.local, self.max_bytes, self.remote, self.size = Path(local), max_bytes, remote, 0

    def __enter__(self) -> BoundedFile:
        self._file = open(self.local, "wb")
        return self

    def write(self, data: bytes) -> None:
        self.size += len(data)
        if self.max_bytes and self.size > self.max_bytes:
            raise FileTooLarge(self.remote, self.max_bytes)
        self._file.write(data)

    def __exit__(self, kind: type | None, *rest: object) -> None:
        self._file.close()
        if kind is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.local)


def write_chunks(chunks: Iterable[bytes], local: str | Path, max_bytes: int, remote: str) -> Path:
    """Write ``chunks`` to ``local`` under the bound. Raises :class:`FileTooLarge`."""
    with BoundedFile(local, max_bytes, remote) as sink:
        for chunk in chunks:
            sink.write(chunk)
    return Path(local)


async def write_stream(chunks: AsyncIterable[bytes], local: str | Path, max_bytes: int, remote: str) -> Path:
    """:func:`write_chunks` for an async stream of chunks."""
    with BoundedFile(local, max_bytes, remote) as sink:
        async for chunk in chunks:
            sink.write(chunk)
    return Path(local)

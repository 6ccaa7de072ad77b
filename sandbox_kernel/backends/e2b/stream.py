"""The ``POST /execute`` stream of the E2B code interpreter, watched and bounded on the host.

The SDK reads the stream with httpx (``response.aiter_lines()``, which holds a whole line before
it hands it on) and parses each line into a model it also keeps in its ``Execution``. So one
huge line from the sandbox (``display({'text/plain': 'x' * 300_000_000}, raw=True)``) would be
held, decoded and parsed whole on the host before our output budget could drop it.
:class:`BoundedTransport` wraps the SDK's own httpx transport and cuts every ``/execute``
response into lines itself: a line longer than the bound is skipped as it streams (never held)
and reported through ``Watch.on_drop``; every other line goes on to the SDK unchanged.

The same place sees what the SDK does not tell: whether the sandbox's kernel took the request.
E2B's server sends ``{"type": "number_of_executions"}`` when the kernel publishes
``execute_input``, before any output, and ``{"type": "keepalive"}`` lines while nothing else
comes. An execution answered by nothing but keepalives was never run (lost while the context
restarted, or aborted by ipykernel behind an interrupted cell): ``Watch.accepted`` tells
the backend, which then recovers instead of waiting forever.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx

from .execution import Watch, current_watch


class BoundedLines(httpx.AsyncByteStream):
    """The body of one ``/execute`` response, re-cut into lines of at most ``max_bytes`` bytes
    (0: no bound); longer lines are skipped while they stream."""

    def __init__(self, inner: Any, watch: Watch, max_bytes: int) -> None:
        self.inner, self.watch, self.max_bytes = inner, watch, max_bytes

    async def __aiter__(self) -> AsyncIterator[bytes]:
        line, skipped = bytearray(), 0
        async for chunk in self.inner:
            start = 0
            while start <= len(chunk):
                end = chunk.find(b"\n", start)
                piece = chunk[start:] if end < 0 else chunk[start:end]
                if skipped:
                    skipped += len(piece)
                else:
                    line += piece
                    if self.max_bytes and len(line) > self.max_bytes:
                        skipped, line = len(line), bytearray()
                if end < 0:
                    break
                if skipped:
                    self.watch.accepted.set()
                    self.watch.on_drop(skipped)
                    skipped = 0
                elif line:
                    self.watch.line(line)
                    line.append(0x0A)
                    yield bytes(line)
                    line = bytearray()
                start = end + 1
        if skipped:
            self.watch.on_drop(skipped)
        elif line:
            self.watch.line(line)
            yield bytes(line)

    async def aclose(self) -> None:
        if hasattr(self.inner, "aclose"):
            await self.inner.aclose()


class BoundedTransport(httpx.AsyncBaseTransport):
    """The SDK's transport, with each ``/execute`` response of a watched call made a
    :class:`BoundedLines`; everything else passes through unchanged."""

    def __init__(self, inner: httpx.AsyncBaseTransport, max_bytes: Callable[[], int]) -> None:
        self.inner, self.max_bytes = inner, max_bytes

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        watch = current_watch.get()
        if watch is None or not request.url.path.endswith("/execute") or response.status_code != 200:
            return response
        return httpx.Response(response.status_code, headers=response.headers, request=request,
                              stream=BoundedLines(response.stream, watch, self.max_bytes()),
                              extensions=response.extensions)

    async def aclose(self) -> None:
        """The inner transport is the SDK's shared one: it is not ours to close."""


def sandbox_class(base: Any, max_bytes: Callable[[], int]) -> Any:
    """A subclass of the SDK's ``AsyncSandbox`` whose code-interpreter requests go through
    :class:`BoundedTransport`. It overrides the SDK's ``_client`` property (e2b-code-interpreter
    2.x: a fresh ``httpx.AsyncClient`` over ``get_transport(config, http_version="1.1")`` for
    each ``run_code``); the tests of the e2b backend fail if a later SDK stops using it."""
    from e2b.api.client_async import get_transport

    class BoundedSandbox(base):  # type: ignore[misc, valid-type]
        @property
        def _client(self) -> httpx.AsyncClient:
            inner = get_transport(self.connection_config, http_version="1.1")
            return httpx.AsyncClient(transport=BoundedTransport(inner, max_bytes))

    BoundedSandbox.__name__ = BoundedSandbox.__qualname__ = base.__name__
    return BoundedSandbox

"""How the gateway backend learns that its kernel is gone, and how it survives a message above
``max_message_bytes``: :class:`DeathWatch`, one per kernel connection of
:class:`~sandbox_kernel.backends.gateway.GatewayBackend`, and :func:`settle`.

Death is learned from the gateway: the server's own ``status: restarting``/``dead`` on IOPub
(its restarter found the process gone), ``GET /api/kernels/{id}`` every ``heartbeat_interval``
(404: deleted or culled; no answer for ``heartbeat_timeout``: the gateway is gone), and the
kernel's websocket closing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from ...core.errors import KernelGone, SandboxError
from ..kernel_client import Request
from .rest import Endpoint, call, kernel_path
from .ws import KernelWebsocket

MAX_DROPS_PER_MINUTE = 20
"""More messages above max_message_bytes than this in a minute end the session."""
INTERRUPT_AFTER_DROPS = 3
"""After this many dropped messages in a minute the running cell is interrupted."""


def iopub(msg_type: str, content: dict[str, Any]) -> dict[str, Any]:
    """An IOPub message made here, for a running cell's relay."""
    return {"header": {"msg_type": msg_type}, "parent_header": {}, "metadata": {}, "content": content}


class DeathWatch:
    """Learns why the gateway's kernel is gone, for one connection to it.

    Args:
        endpoint: the gateway.
        kernel: the kernel's id there.
        where: the gateway as messages name it ("http://host:port").
        heartbeat_interval: seconds between two ``GET /api/kernels/{id}``.
        heartbeat_timeout: seconds the gateway may leave those unanswered.
    """

    def __init__(self, endpoint: Endpoint, kernel: str, where: str, *, heartbeat_interval: float,
                 heartbeat_timeout: float) -> None:
        self.endpoint, self.kernel, self.where = endpoint, kernel, where
        self.heartbeat_interval, self.heartbeat_timeout = heartbeat_interval, heartbeat_timeout
        self.died: asyncio.Future = asyncio.get_running_loop().create_future()
        self.unreachable = False
        """The gateway stopped answering (shutdown then skips the DELETE of the kernel)."""

    def on_iopub(self, msg: dict[str, Any]) -> None:
        """The websocket's hook for every IOPub message: the server's own ``status: restarting``
        or ``dead`` (no parent) means its restarter found the kernel's process gone."""
        state = msg.get("content", {}).get("execution_state")
        if state in ("restarting", "dead") and not msg.get("parent_header") and not self.died.done():
            self.died.set_result("its process stopped (the gateway reported the kernel "
                                 f"{'restarting' if state == 'restarting' else 'dead'})")

    async def wait_dead(self, websocket: Callable[[], KernelWebsocket],
                        reconnect: Callable[[bool], Awaitable[bool]]) -> str:
        """Return, with the reason, once the kernel is gone. ``websocket()`` is the connection
        in use; when it closes over a message above max_message_bytes, ``reconnect(interrupt)``
        opens a new one (False: it could not), interrupting the cell after a few such drops;
        too many in a minute end the session."""
        died, drops = self.died, []
        poll = asyncio.ensure_future(self._poll())
        try:
            while True:
                ws = websocket()
                await asyncio.wait({ws.closed, died, poll}, return_when=asyncio.FIRST_COMPLETED)
                drops = [t for t in drops if time.monotonic() - t < 60] + [time.monotonic()]
                if died.done() or poll.done() or not ws.refused_too_big or len(drops) > MAX_DROPS_PER_MINUTE:
                    break
                if not await reconnect(len(drops) == INTERRUPT_AFTER_DROPS):
                    break
        finally:
            poll.cancel()
        if died.done():
            return died.result()
        if poll.done() and not poll.cancelled():
            return poll.result()
        try:  # the websocket closed: was the kernel deleted, or is the gateway gone?
            await call(self.endpoint, kernel_path(self.kernel), "check the kernel",
                       timeout=min(5.0, self.heartbeat_timeout))
        except KernelGone:
            return "the kernel was deleted on the gateway (shut down there, or culled as idle)"
        except SandboxError:
            self.unreachable = True
            return f"the connection to the gateway at {self.where} was lost"
        return ws.closed.result()

    async def _poll(self) -> str:
        """Return why the kernel is gone, checking ``GET /api/kernels/{id}`` every heartbeat_interval."""
        answered = time.monotonic()
        while True:
            await asyncio.sleep(self.heartbeat_interval)
            try:
                model = await call(self.endpoint, kernel_path(self.kernel), "check the kernel",
                                   timeout=self.heartbeat_timeout)
            except KernelGone:
                return "the kernel was deleted on the gateway (shut down there, or culled as idle)"
            except SandboxError:
                if time.monotonic() - answered > self.heartbeat_timeout:
                    self.unreachable = True
                    return f"the gateway at {self.where} stopped answering"
                continue
            answered = time.monotonic()
            if model.get("execution_state") == "dead":
                return "its process stopped (the gateway reported the kernel dead)"


async def settle(client: Any, requests: dict[str, Request], running: list[Request]) -> None:
    """End the cells that were running when a message was dropped once the kernel has finished
    them: their reply went to the closed connection, and their ``status: idle`` may have too. A
    ``kernel_info_request`` sent on ``client`` (the new connection) is answered after the running
    ``execute_request`` (the shell handles one request at a time); ``requests`` is the backend's
    requests in flight, by msg_id, where its reply is routed."""
    msg = client.session.msg("kernel_info_request", {})
    marker = requests[msg["header"]["msg_id"]] = Request()
    client.shell_channel.send(msg)
    try:
        await marker.reply  # no limit: the cell may run for hours; cancelled at shutdown
    finally:
        requests.pop(msg["header"]["msg_id"], None)
    for request in running:  # an idle too many is never read: the relay stops at the first
        request.iopub.put_nowait(iopub("status", {"execution_state": "idle"}))
        if not request.reply.done():
            request.reply.set_result({"content": {"status": "ok", "execution_count": None}})

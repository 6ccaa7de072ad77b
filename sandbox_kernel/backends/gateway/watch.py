"""How the gateway backend learns that its kernel is gone, and how it survives a message above
``max_message_bytes``: :class:`DeathWatch`, a part of :class:`~.gateway.GatewayBackend`.

Death is learned from the gateway: the server's own ``status: restarting``/``dead`` on IOPub
(its restarter found the process gone), ``GET /api/kernels/{id}`` every ``heartbeat_interval``
(404: deleted or culled; no answer for ``heartbeat_timeout``: the gateway is gone), and the
kernel's websocket closing.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from ...errors import SandboxError
from ..kernel_client import Request
from ..kernel_client.message_bound import drop_note
from .rest import KernelGone, call, kernel_path
from .ws import GatewayKernelClient, KernelWebsocket, ws_session

MAX_DROPS_PER_MINUTE = 20
"""More messages above max_message_bytes than this in a minute end the session."""
INTERRUPT_AFTER_DROPS = 3
"""After this many dropped messages in a minute the running cell is interrupted."""


def _iopub(msg_type: str, content: dict[str, Any]) -> dict[str, Any]:
    """An IOPub message made here, for a running cell's relay."""
    return {"header": {"msg_type": msg_type}, "parent_header": {}, "metadata": {}, "content": content}


class DeathWatch:
    """``_wait_dead`` and what it needs, for :class:`~.gateway.GatewayBackend` (which holds
    ``_ws``, ``_died``, ``_kernel``, ``_requests``, ``_tasks`` and the options)."""

    def _watch(self, msg: dict[str, Any]) -> None:
        """The server's own ``status: restarting`` or ``dead`` on IOPub (no parent): its
        restarter found the kernel's process gone."""
        state = msg.get("content", {}).get("execution_state")
        if state in ("restarting", "dead") and not msg.get("parent_header") and not self._died.done():
            self._died.set_result("its process stopped (the gateway reported the kernel "
                                  f"{'restarting' if state == 'restarting' else 'dead'})")

    async def _wait_dead(self) -> str:
        died, drops = self._died, []
        poll = asyncio.ensure_future(self._poll(self._kernel))
        try:
            while True:
                ws = self._ws
                await asyncio.wait({ws.closed, died, poll}, return_when=asyncio.FIRST_COMPLETED)
                drops = [t for t in drops if time.monotonic() - t < 60] + [time.monotonic()]
                if died.done() or poll.done() or not ws.refused_too_big or len(drops) > MAX_DROPS_PER_MINUTE:
                    break
                if not await self._reconnect(interrupt=len(drops) == INTERRUPT_AFTER_DROPS):
                    break
        finally:
            poll.cancel()
        if died.done():
            return died.result()
        if poll.done() and not poll.cancelled():
            return poll.result()
        try:  # the websocket closed: was the kernel deleted, or is the gateway gone?
            await call(self._endpoint(), kernel_path(self._kernel or ""), "check the kernel",
                       timeout=min(5.0, self.heartbeat_timeout))
        except KernelGone:
            return "the kernel was deleted on the gateway (shut down there, or culled as idle)"
        except SandboxError:
            self._unreachable = True
            return f"the connection to the gateway at {self._where()} was lost"
        return ws.closed.result()

    async def _reconnect(self, interrupt: bool) -> bool:
        """After the websocket was closed over a message above max_message_bytes: open a new one,
        tell the running cell that an output was dropped and, with ``interrupt``, stop a cell
        that keeps sending such outputs. The kernel and its state are kept. A new session id:
        with the old one the server would replay what it buffered (the huge message may be
        among it) and its shell replies could keep going to the old connection's socket, which
        has the same ZMQ identity. False if the kernel cannot be reached again."""
        old = self._ws
        for task in self._tasks:
            task.cancel()
        try:
            self._ws = await KernelWebsocket.open(self._endpoint(), self._kernel, ws_session(),
                                                 timeout=self.connect_timeout, max_message_size=self.max_message_bytes,
                                                 ping_interval=self.heartbeat_timeout)
        except SandboxError:
            self._ws = old
            return False
        self._ws.watch = self._watch
        self._client = GatewayKernelClient(self._ws)
        note = drop_note(*self.message_bound)
        running = [request for request in self._requests.values() if request.execute]
        for request in running:  # one note per cell
            text = "" if request.told else note
            text += "[the cell kept sending such outputs and was interrupted]\n" if interrupt else ""
            request.dropped = request.told = True
            if text:
                request.iopub.put_nowait(_iopub("stream", {"name": "stderr", "text": text}))
        self._start_readers()
        self._tasks.append(asyncio.ensure_future(self._settle(running)))
        if interrupt:
            await self.interrupt()
        return True

    async def _settle(self, running: list) -> None:
        """End the cells that were running when a message was dropped once the kernel has
        finished them: their reply went to the closed connection, and their ``status: idle``
        may have too. A ``kernel_info_request`` is answered after the running
        ``execute_request`` (the shell handles one request at a time)."""
        msg = self._client.session.msg("kernel_info_request", {})
        marker = self._requests[msg["header"]["msg_id"]] = Request()
        self._client.shell_channel.send(msg)
        try:
            await marker.reply  # no limit: the cell may run for hours; cancelled at shutdown
        finally:
            self._requests.pop(msg["header"]["msg_id"], None)
        for request in running:  # an idle too many is never read: the relay stops at the first
            request.iopub.put_nowait(_iopub("status", {"execution_state": "idle"}))
            if not request.reply.done():
                request.reply.set_result({"content": {"status": "ok", "execution_count": None}})

    async def _poll(self, kernel: str | None) -> str:
        """Return why the kernel is gone, checking ``GET /api/kernels/{id}`` every heartbeat_interval."""
        answered = time.monotonic()
        while True:
            await asyncio.sleep(self.heartbeat_interval)
            try:
                model = await call(self._endpoint(), kernel_path(kernel or ""), "check the kernel",
                                   timeout=self.heartbeat_timeout)
            except KernelGone:
                return "the kernel was deleted on the gateway (shut down there, or culled as idle)"
            except SandboxError:
                if time.monotonic() - answered > self.heartbeat_timeout:
                    self._unreachable = True
                    return f"the gateway at {self._where()} stopped answering"
                continue
            answered = time.monotonic()
            if model.get("execution_state") == "dead":
                return "its process stopped (the gateway reported the kernel dead)"

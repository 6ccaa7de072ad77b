"""A kernel's websocket on a Jupyter server (``/api/kernels/{id}/channels``), as the channels of
jupyter_client's :class:`~jupyter_client.asynchronous.AsyncKernelClient`.

Messages use the ``v1.kernel.websocket.jupyter.org`` subprotocol when the server offers it, else
the legacy JSON (binary when a message has buffers); jupyter_server's own functions frame both,
jupyter_client's :class:`~jupyter_client.session.Session` builds and parses the messages.
Spec: https://jupyter-server.readthedocs.io/en/latest/developers/websocket-protocols.html

Why not ``jupyter_server.gateway.GatewayKernelClient``: it takes its settings from the
process-wide ``GatewayClient`` singleton, opens its websocket without the auth header, reads
it on a thread with ``websocket-client`` while ``get_msg`` polls with ``asyncio.sleep(0)``
(a busy loop), speaks only the legacy JSON protocol without buffers and has no bound on
message size. Tornado's async websocket client does all of that on our loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import queue
import secrets
import socket
from typing import Any

from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.session import Session
from jupyter_server.services.kernels.connection.base import (
    deserialize_binary_message,
    deserialize_msg_from_ws_v1,
    serialize_binary_message,
    serialize_msg_to_ws_v1,
)
from tornado.websocket import WebSocketClientConnection, websocket_connect

from .boundary import http_errors
from .rest import Endpoint, kernel_path

V1 = "v1.kernel.websocket.jupyter.org"
CHANNELS = ("shell", "iopub", "stdin", "control", "hb")
TOO_BIG = 1009  # websocket close code: "message too big" (RFC 6455 7.4.1)


def _on_local_close(conn: WebSocketClientConnection, hook) -> None:
    """Call ``hook(code)`` when tornado closes ``conn`` from this side. Tornado refuses a frame
    longer than ``max_message_size`` before reading its payload by closing with 1009, but does
    not record that code (``close_code`` is only the peer's): this wrapper is how we learn it.
    Uses ``conn.protocol.close`` (tornado 6); tests/test_gateway.py fails if that changes."""
    protocol = conn.protocol
    close = protocol.close

    def recording_close(code: int | None = None, reason: str | None = None) -> None:
        hook(code)
        close(code, reason)

    protocol.close = recording_close


def _tcp_socket(conn: WebSocketClientConnection) -> socket.socket | None:
    """The connection's TCP socket, with TCP_NODELAY set (tornado 6: ``protocol.stream.socket``)."""
    sock = getattr(getattr(conn.protocol, "stream", None), "socket", None)
    if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return None
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _quick_ack(sock: socket.socket | None) -> None:
    """Acknowledge received data at once (Linux TCP_QUICKACK; it lapses, so it is set after
    every read). jupyter_server leaves Nagle's algorithm on for its kernel websockets, so a
    second small message (``execute_input`` right after ``status: busy``) waits for the ACK
    of the first, which a delayed-ACK client holds 40 ms: measured 52 ms per warm ``1+1``
    round trip through a Kernel Gateway without this, ~6 ms with it."""
    if sock is not None and hasattr(socket, "TCP_QUICKACK"):
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)


def ws_session() -> Session:
    """A Session for websocket messages: they travel unsigned (the server signs what it sends
    on to the kernel's ZMQ sockets and checks what comes back), so nothing is signed or
    checked here. A key keeps jupyter_client from warning about unsigned messages."""
    session = Session(key=secrets.token_hex(16).encode())
    session.auth = None
    return session


class KernelWebsocket:
    """The kernel's websocket: one reader routes each message to its channel's queue.

    ``closed`` is a future that gets the reason as a phrase once the connection ends
    (the server closed it, the network dropped, a message exceeded ``max_message_size``).
    ``watch(msg)`` is called with every iopub message before it is queued."""

    def __init__(self, conn: WebSocketClientConnection, session: Session, max_message_size: int) -> None:
        self.conn, self.session, self.max_message_size = conn, session, max_message_size
        self.v1 = conn.selected_subprotocol == V1
        self.queues: dict[str, asyncio.Queue] = {name: asyncio.Queue() for name in CHANNELS}
        self._loop = asyncio.get_running_loop()
        self.closed: asyncio.Future = self._loop.create_future()
        self.watch = lambda msg: None
        self.refused_too_big = False
        _on_local_close(conn, self._closing)
        self._socket = _tcp_socket(conn)
        self._reader = asyncio.ensure_future(self._read())

    def _closing(self, code: int | None) -> None:
        self.refused_too_big |= code == TOO_BIG

    @classmethod
    async def open(cls, endpoint: Endpoint, kernel_id: str, session: Session, *, timeout: float,
                   max_message_size: int, ping_interval: float) -> KernelWebsocket:
        request = endpoint.request(kernel_path(kernel_id, "channels") + f"?session_id={session.session}",
                                   timeout=timeout, websocket=True)
        with http_errors(endpoint.url, "connect to the kernel's channels"):
            conn = await websocket_connect(request, subprotocols=[V1], max_message_size=max_message_size or 2**62,
                                           ping_interval=ping_interval or None, ping_timeout=ping_interval or None)
        return cls(conn, session, max_message_size)

    def _decode(self, raw: str | bytes) -> tuple[str, dict[str, Any]]:
        if self.v1:
            channel, parts = deserialize_msg_from_ws_v1(raw)
            return channel, self.session.deserialize([b"", *parts])  # unsigned: the server checked it
        msg = deserialize_binary_message(raw) if isinstance(raw, bytes) else json.loads(raw)
        return msg.pop("channel", "iopub"), msg

    async def _read(self) -> None:
        reason = "the connection to the gateway closed"
        try:
            while (raw := await self.conn.read_message()) is not None:
                _quick_ack(self._socket)
                try:
                    channel, msg = self._decode(raw)
                except Exception:  # a malformed frame: drop it, keep the session
                    continue
                if channel == "iopub":
                    self.watch(msg)
                if channel in self.queues:
                    self.queues[channel].put_nowait(msg)
            if self.refused_too_big or self.conn.close_code == TOO_BIG:
                reason = (f"it sent one message larger than max_message_bytes "
                          f"({self.max_message_size // 1024**2} MiB), so the connection was closed")
            elif self.conn.close_code is None:
                reason = "the connection to the gateway was lost"
        finally:
            if not self.closed.done():
                self.closed.set_result(reason)

    def _on_own_loop(self, method, *args: Any) -> bool:
        """Tornado's streams belong to the loop that opened them; ipykernel runs control
        requests (shutdown) on a thread of their own. Off that loop, schedule ``method`` on it
        and return True."""
        try:
            current = asyncio.get_running_loop()
        except RuntimeError:
            current = None
        if current is self._loop:
            return False
        with contextlib.suppress(RuntimeError):  # that loop is closed: nothing left to do
            self._loop.call_soon_threadsafe(method, *args)
        return True

    def send(self, channel: str, msg: dict[str, Any]) -> None:
        """Write ``msg`` (a :meth:`Session.msg` dict, with ``buffers`` if any) to ``channel``.
        Any thread."""
        if self._on_own_loop(self.send, channel, msg) or self.closed.done():
            return
        buffers = [bytes(b) for b in msg.get("buffers") or []]
        if self.v1:
            pack = self.session.pack
            parts = [pack(msg["header"]), pack(msg["parent_header"]), pack(msg["metadata"]), pack(msg["content"])]
            frame: str | bytes = serialize_msg_to_ws_v1([*parts, *buffers], channel)
        else:
            body = {k: msg[k] for k in ("header", "parent_header", "metadata", "content")}
            body.update(channel=channel, buffers=buffers)
            frame = serialize_binary_message(body) if buffers else json.dumps({**body, "buffers": []},
                                                                               default=str)
        with contextlib.suppress(Exception):  # closed meanwhile: the death watch reports it
            self.conn.write_message(frame, binary=isinstance(frame, bytes))

    def close(self) -> None:
        """Close the websocket (any thread)."""
        if self._on_own_loop(self.close):
            return
        self._reader.cancel()
        self.conn.close()
        if not self.closed.done():
            self.closed.set_result("the connection was closed by this client")


class WebsocketChannel:
    """One channel of :class:`KernelWebsocket`, with the interface of jupyter_client's
    ``AsyncZMQSocketChannel`` that :class:`~jupyter_client.asynchronous.AsyncKernelClient` uses."""

    def __init__(self, name: str, ws: KernelWebsocket) -> None:
        self.name, self.ws = name, ws

    def send(self, msg: dict[str, Any]) -> None:
        self.ws.send(self.name, msg)

    async def get_msg(self, timeout: float | None = None) -> dict[str, Any]:
        """The next message; raises :class:`queue.Empty` after ``timeout`` seconds."""
        try:
            return await asyncio.wait_for(self.ws.queues[self.name].get(), timeout)
        except asyncio.TimeoutError:
            raise queue.Empty from None

    async def msg_ready(self) -> bool:
        return not self.ws.queues[self.name].empty()

    def is_alive(self) -> bool:
        return not self.ws.closed.done()

    is_beating = is_alive

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def close(self) -> None:
        pass


class GatewayKernelClient(AsyncKernelClient):
    """jupyter_client's async kernel client whose channels are a gateway's kernel websocket:
    ``execute``, ``complete``, ``input``, ``wait_for_ready``... work unchanged."""

    def __init__(self, ws: KernelWebsocket, **kwargs: Any) -> None:
        super().__init__(session=ws.session, **kwargs)
        self.ws = ws
        self._ws_channels = {name: WebsocketChannel(name, ws) for name in CHANNELS}

    shell_channel = property(lambda self: self._ws_channels["shell"])
    iopub_channel = property(lambda self: self._ws_channels["iopub"])
    stdin_channel = property(lambda self: self._ws_channels["stdin"])
    control_channel = property(lambda self: self._ws_channels["control"])
    hb_channel = property(lambda self: self._ws_channels["hb"])

    def start_channels(self, *args: Any, **kwargs: Any) -> None:
        """The websocket is open already."""

    def stop_channels(self) -> None:
        self.ws.close()

    @property
    def channels_running(self) -> bool:
        return not self.ws.closed.done()

    async def _async_is_alive(self) -> bool:
        return not self.ws.closed.done()

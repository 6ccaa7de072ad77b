"""The host's side of the engine-API transport (``DockerBackend.transport = "api"``).

The container runs :mod:`.inside` as its command, attached to the engine's stream
(``POST /containers/{id}/attach`` with stdin, stdout and stderr, hijacked as the ``docker``
CLI does; docker-py's ``attach_socket``). :class:`AttachBridge` binds ``inproc`` ZMQ sockets in
this process that look like a kernel's (a DEALER per shell, control and stdin channel, an XPUB
for IOPub), so ``jupyter_client`` connects to them as to any kernel (sharing the bridge's ZMQ
context), and carries each message over the stream in :mod:`.inside`'s records. Nothing of the host's
filesystem enters the container, and the container keeps ``network=none``: this works with any
engine docker-py reaches (a VM's, as with Docker Desktop, Colima or Podman machine; a remote one
over ``tcp://`` with TLS or ``ssh://``).

The bridge runs on the backend's event loop, the one its ``jupyter_client`` client uses: the
stream is read and written without blocking (``add_reader``/``add_writer``; a TLS stream is
never touched from two threads), and a message crosses no thread on its way (measured: two
thread handoffs of a bridge thread cost about 1 ms a round trip on a busy machine). What the engine sends
is read as its multiplexed stream (8-byte headers: stream 1 stdout, 2 stderr; Engine API,
"Attach to a container"); stdout carries the records, stderr the kernel's own log lines.

Each frame from the sandbox is bounded (``max_frame`` bytes): a longer one is skipped as it
arrives and ``on_drop(channel)`` is called, which the backend's drop recovery answers as it
does libzmq's ``MAXMSGSIZE`` on the ``ipc`` transport (:mod:`..kernel_client.message_bound`).
When the stream ends (the container stopped, the engine is gone, or the sandbox broke the
wire), ``on_end`` is called. When this process ends, the engine closes the container's stdin, and
the relay stops the kernel: the container ends with its wrapper, on every engine.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import logging
import secrets
import socket
import ssl
import struct
from collections import deque
from collections.abc import Callable
from typing import Any

import zmq
import zmq.asyncio

from ..kernel_client.client import shared_context
from .inside import CHANNELS, HELLO, KEEPER, PORTS, Decoder, encode, preamble

DOCKER_FRAME = struct.Struct(">BxxxI")
"""The header of each piece of a multiplexed attach stream: stream (0 stdin, 1 stdout, 2 stderr),
three zero bytes, the piece's length (Engine API, "Attach to a container", stream format)."""
READ_SIZE = 1 << 20
RETRY_S = 0.002
"""Seconds between tries of a send ZMQ refused (the client is behind)."""
HELD_BYTES = 8 * 1024**2
"""Bytes of messages from the sandbox held in this process for the client at most (beyond one
message): in the bridge's queues, and for IOPub in libzmq's queue until the client read them.
Past it the bridge stops reading the stream until the client caught up, so a flood waits in the
sandbox (the relay holds :data:`.inside.OUTGOING_BYTES` at most, the kernel's IOPub the rest,
under the container's memory limit) instead of in this process."""
CLIENT_HWM = 64
"""Messages per channel socket queued towards the client; the rest wait in the bridge's own
queue, which :data:`HELD_BYTES` bounds in bytes."""
STDERR_KEEP = 64 * 1024
"""Bytes of the kernel's own stderr kept for the reason of a start that failed."""

_log = logging.getLogger(__name__)


def raw_socket(attached: Any) -> Any:
    """The object docker-py's ``attach_socket`` returns, as one that has ``recv``, ``send`` and
    ``fileno`` (a unix or TCP socket, a TLS socket, or a paramiko channel)."""
    return attached._sock if isinstance(attached, socket.SocketIO) else attached


def claim_by_stdin(attached: Any) -> None:
    """Claim a pooled ipc sandbox: one byte on the container's stdin, which its launcher waits
    for (see :data:`.spec.LAUNCHER`). Blocking.

    Raises:
        OSError: the stream is closed (the container stopped)."""
    raw_socket(attached).sendall(b"\n")


class Demux:
    """Splits an attach stream into its stdout and stderr pieces."""

    def __init__(self, stdout: Callable[[bytes], None], stderr: Callable[[bytes], None]) -> None:
        self._stdout, self._stderr = stdout, stderr
        self._buffer = bytearray()
        self._stream, self._left = 0, 0

    def feed(self, data: bytes) -> None:
        self._buffer += data
        while self._buffer:
            if not self._left:
                if len(self._buffer) < DOCKER_FRAME.size:
                    return
                self._stream, self._left = DOCKER_FRAME.unpack_from(self._buffer)
                del self._buffer[:DOCKER_FRAME.size]
                continue
            piece = bytes(self._buffer[:self._left])
            del self._buffer[:len(piece)]
            self._left -= len(piece)
            (self._stdout if self._stream == 1 else self._stderr)(piece)


class AttachBridge:
    """Carries one kernel's channels between ``jupyter_client`` and the container's relay, on
    the event loop of the backend (the same loop as its client: no thread handoff per message).

    Args:
        attached: docker-py's ``attach_socket`` of the container (stdin, stdout, stderr, stream),
            made before the container starts.
        argv: the kernel's command in the container (``{connection_file}`` is filled in); None
            to claim a pooled sandbox's relay, whose kernel runs already (see
            :func:`.inside.pooled_environment`).
        launcher: Python source the relay writes as ``/tmp/.sandbox-kernel/launch.py``, or None.
        key: the connection key; a new one when None (a pooled relay's is given).
        keeper: the source of the checkpoints' keeper, which ``argv`` starts; None: no keeper.
        attach: the ``ipc`` address prefix of a kernel that runs already in the container (a fork
            of a checkpoint), for a relay started by ``exec``: it starts nothing.
        max_frame: bytes; a longer frame from the sandbox is dropped (0: no bound).
        on_drop: called with the channel name of a dropped message.
        on_end: called once the stream ended, unless :meth:`close` ended it.
    """

    def __init__(self, attached: Any, *, argv: list[str] | None, launcher: str | None,
                 max_frame: int, on_drop: Callable[[str], None], on_end: Callable[[], None],
                 key: str | None = None, keeper: str | None = None, attach: str | None = None) -> None:
        self._attached, self._raw = attached, raw_socket(attached)
        self._on_drop, self._on_end = on_drop, on_end
        self.key = key or secrets.token_hex(32)
        name = f"sandbox-kernel-{secrets.token_hex(8)}"
        self.connection = {"transport": "inproc", "ip": name, "signature_scheme": "hmac-sha256",
                           "key": self.key, "kernel_name": "", **PORTS}
        """The endpoints' connection info: ``inproc``, so only a client made with :attr:`context`
        (this process's bridge context) reaches them."""
        self.context = shared_context()
        self._sockets: dict[int, zmq.asyncio.Socket] = {}
        for index, channel in enumerate(CHANNELS):
            sock = self.context.socket(zmq.XPUB if channel == "iopub" else zmq.DEALER)
            sock.linger = 0
            sock.sndhwm = CLIENT_HWM  # then the bridge's queues, which HELD_BYTES bounds
            if channel == "iopub":
                sock.setsockopt(zmq.XPUB_NODROP, 1)  # a full queue answers Again instead of dropping
            sock.bind(f"inproc://{name}-{PORTS[channel + '_port']}")
            self._sockets[index] = sock
        self._iopub = CHANNELS.index("iopub")
        self._subscribed = False  # until the client's SUB subscribed, IOPub waits here
        self._held: deque = deque()  # IOPub messages before the subscription
        self._plain = {index: zmq.Socket.shadow(sock.underlying) for index, sock in self._sockets.items()}
        self._queues: dict[int, deque] = {index: deque() for index in self._sockets}  # what ZMQ did not take yet
        self._drainers: dict[int, asyncio.Task] = {}
        self._held_bytes = 0  # of messages for the client not yet taken by ZMQ (and of self._held)
        self._paused = False  # not reading the stream: the client is behind by HELD_BYTES
        if attach is not None:  # a relay started by exec for a kernel that runs already (a fork)
            self._out = bytearray(preamble() + encode(HELLO, [json.dumps({"key": self.key, "attach": attach}).encode()]))
        elif argv is None:  # a pooled relay: HELLO claims it
            self._out = bytearray(encode(HELLO, [b"{}"]))
        else:
            self._out = bytearray(preamble() + encode(HELLO, [json.dumps({"key": self.key, "argv": argv,
                                                                       "launcher": launcher,
                                                                       "keeper": keeper}).encode()]))
        self._decoder = Decoder(self._record, self._dropped, max_frame)
        self._demux = Demux(self._decoder.feed, self._stderr)
        self.stderr = bytearray()
        """The last :data:`STDERR_KEEP` bytes of the container's stderr (the kernel's log)."""
        self.hello = asyncio.Event()
        """Set when the relay said HELLO (the kernel's IOPub listens), or the stream ended."""
        self.ended = False
        """True once the stream ended (container stopped, engine gone, broken wire) or on close."""
        self.error: str | None = None
        """Why the bridge stopped, when the sandbox broke the wire."""
        self.on_keeper: Callable[[bytes], None] | None = None
        """Called with each piece of what the sandbox's keeper said (its socket's bytes)."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._fd = -1
        self._writing = False
        self._tasks: list[asyncio.Task] = []

    def start(self) -> None:
        """Start relaying, on the running event loop."""
        self._loop = asyncio.get_running_loop()
        self._raw.setblocking(False)
        self._fd = self._raw.fileno()
        self._loop.add_reader(self._fd, self._on_readable)
        self._tasks = [self._loop.create_task(self._from_client(index, sock)) for index, sock in self._sockets.items()]
        self._flush()

    def close(self) -> None:
        """Stop relaying and close the stream (the relay then stops the kernel). Idempotent;
        on the bridge's event loop."""
        self._stop()

    def _stop(self) -> bool:
        """Undo :meth:`start`; False if it was already undone."""
        if self.ended:
            return False
        self.ended = True
        self.hello.set()
        if self._loop is not None and self._fd >= 0:
            self._loop.remove_reader(self._fd)
            if self._writing:
                self._loop.remove_writer(self._fd)
        for task in [*self._tasks, *self._drainers.values()]:
            task.cancel()
        for sock in self._sockets.values():
            sock.close(linger=0)
        with contextlib.suppress(OSError):
            self._raw.close()
        with contextlib.suppress(Exception):
            self._attached.close()
        return True

    def _end(self) -> None:
        """The stream ended by itself: say so (once)."""
        if self._stop():
            self._on_end()

    # -- from the sandbox ------------------------------------------------------------------------
    def _on_readable(self) -> None:
        try:
            if not self._read():
                self._end()
        except ValueError as exc:  # the sandbox broke the wire
            self.error = f"the sandbox broke the transport's wire ({exc})"
            _log.warning("%s", self.error)
            self._end()
        except OSError as exc:
            _log.info("the attach stream failed: %s", exc)
            self._end()

    def _read(self) -> bool:
        """Read what the stream has (until the client is too far behind); False when it ended."""
        while not self.ended and not self._paused:
            try:
                data = self._raw.recv(READ_SIZE)
            except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError, socket.timeout):
                return True
            except OSError as exc:
                if exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK):
                    return True
                raise
            if not data:
                return False
            self._demux.feed(data)
            if not (isinstance(self._raw, ssl.SSLSocket) and self._raw.pending()) and len(data) < READ_SIZE:
                return True
        return True

    def _record(self, channel: int, frames: list[bytes]) -> None:
        if channel == HELLO:
            self.hello.set()
        elif channel == KEEPER:
            if self.on_keeper is not None and frames:
                self.on_keeper(frames[0])
        elif channel == self._iopub and not self._subscribed:
            self._held.append(frames)
            self._hold(sum(map(len, frames)))
        elif not self.ended:
            self._send(channel, frames)

    def _send(self, channel: int, frames: list[bytes], counted: bool = False) -> None:
        """To the client, in order. What ZMQ cannot take now (a DEALER with no peer yet, a full
        queue: XPUB_NODROP answers Again) waits in this channel's queue, drained by a task. The
        message counts toward :data:`HELD_BYTES` (already, when ``counted``) until ZMQ took it,
        and an IOPub message until the client read it (:meth:`taken`). (pyzmq's own queued sends
        are not used: on Again after a wait they fail the send instead of retrying, which lost
        messages of a burst.)"""
        size = sum(map(len, frames))
        if not counted:
            self._hold(size)
        queue = self._queues[channel]
        if not queue:
            try:
                self._plain[channel].send_multipart(frames, zmq.NOBLOCK)
            except zmq.Again:
                pass
            else:
                self._sent(channel, size)
                return
        queue.append(frames)
        if self._drainers.get(channel) is None or self._drainers[channel].done():
            self._drainers[channel] = self._loop.create_task(self._drain(channel))

    async def _drain(self, channel: int) -> None:
        """Send the channel's queue as ZMQ takes it (XPUB's POLLOUT is always set, so a failed
        send waits :data:`RETRY_S` and tries again)."""
        queue, sock = self._queues[channel], self._plain[channel]
        with contextlib.suppress(zmq.ZMQError):  # closed
            while queue and not self.ended:
                try:
                    sock.send_multipart(queue[0], zmq.NOBLOCK)
                except zmq.Again:
                    await asyncio.sleep(RETRY_S)
                    continue
                self._sent(channel, sum(map(len, queue.popleft())))

    def _sent(self, channel: int, size: int) -> None:
        """ZMQ took a message of ``size`` bytes. An IOPub message stays counted: libzmq's queue
        towards the client's SUB is bounded in messages only (this socket's and the client's
        high-water marks, each message up to the frame bound), so its bytes are released when
        the client reads it (:meth:`taken`)."""
        if channel != self._iopub:
            self._hold(-size)

    def taken(self, size: int) -> None:
        """The client read an IOPub message of ``size`` bytes (its frames', as sent): they no
        longer count toward :data:`HELD_BYTES`. Its IOPub channel calls this for each message
        (:class:`..kernel_client.client.SandboxKernelClient`'s ``iopub_taken``)."""
        self._hold(-size)

    def _hold(self, size: int) -> None:
        """Count ``size`` bytes more (or fewer) held for the client; past :data:`HELD_BYTES` the
        stream is not read (a flood waits in the sandbox, whose IOPub has no high-water mark,
        under the container's memory limit), and is read again once the client caught up."""
        self._held_bytes += size
        paused = self._held_bytes >= HELD_BYTES
        if paused != self._paused and not self.ended and self._loop is not None:
            self._paused = paused
            if paused:
                self._loop.remove_reader(self._fd)
            else:
                self._loop.add_reader(self._fd, self._on_readable)

    def _dropped(self, channel: int) -> None:
        if channel < len(CHANNELS):
            self._on_drop(CHANNELS[channel])

    def _stderr(self, data: bytes) -> None:
        self.stderr += data
        del self.stderr[:-STDERR_KEEP]
        for line in data.decode("utf-8", "replace").splitlines():
            if line.strip():
                _log.debug("sandbox kernel: %s", line)

    # -- to the sandbox ----------------------------------------------------------------------------
    def send_keeper(self, data: bytes) -> None:
        """Send ``data`` to the sandbox's keeper (a line of JSON)."""
        self._out += encode(KEEPER, [data])
        self._flush()

    async def _from_client(self, index: int, sock: zmq.asyncio.Socket) -> None:
        with contextlib.suppress(zmq.ZMQError):  # closed
            while True:
                frames = await sock.recv_multipart()
                if index == self._iopub:  # a subscription message from the client's SUB
                    if frames and frames[0][:1] == b"\x01" and not self._subscribed:
                        self._subscribed = True
                        while self._held:
                            self._send(self._iopub, self._held.popleft(), counted=True)
                    continue
                self._out += encode(index, frames)
                self._flush()

    def _flush(self) -> None:
        """Write what can be written now; wait for room for the rest."""
        if self.ended:
            return
        while self._out:
            try:
                sent = self._raw.send(bytes(self._out[:READ_SIZE]))
            except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError, socket.timeout):
                break
            except OSError as exc:
                _log.info("the attach stream failed: %s", exc)
                self._end()
                return
            del self._out[:sent]
        if bool(self._out) != self._writing:
            self._writing = bool(self._out)
            if self._writing:
                self._loop.add_writer(self._fd, self._flush)
            else:
                self._loop.remove_writer(self._fd)





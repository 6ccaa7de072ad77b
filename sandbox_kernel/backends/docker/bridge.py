"""The host's side of the engine-API transport (``DockerBackend.transport = "api"``).

The container runs :mod:`.inside` as its command, attached to the engine's stream
(``POST /containers/{id}/attach`` with stdin, stdout and stderr, hijacked as the ``docker``
CLI does; docker-py's ``attach_socket``). :class:`AttachBridge` binds ZMQ sockets in a private
directory of this host that look like a kernel's (a DEALER per shell, control and stdin
channel, an XPUB for IOPub), so ``jupyter_client`` connects to them as to any kernel, and
carries each message over the stream in :mod:`.inside`'s records. Nothing of the host's
filesystem enters the container, and the container keeps ``network=none``: this works with any
engine docker-py reaches (a VM's, as with Docker Desktop, Colima or Podman machine; a remote one
over ``tcp://`` with TLS or ``ssh://``).

One thread per bridge owns its sockets and the stream, polling all of them without blocking
(a TLS stream must never be read and written from two threads at once). What the engine sends
is read as its multiplexed stream (8-byte headers: stream 1 stdout, 2 stderr; Engine API,
"Attach to a container"); stdout carries the records, stderr the kernel's own log lines.

Each frame from the sandbox is bounded (``max_frame`` bytes): a longer one is skipped as it
arrives and ``on_drop(channel)`` is called, which the backend's drop recovery answers as it
does libzmq's ``MAXMSGSIZE`` on the ``ipc`` transport (:mod:`..kernel_client.message_bound`).
When the stream ends (the container stopped, the engine is gone, or the sandbox broke the
wire), ``ended`` is set. When this process ends, the engine closes the container's stdin, and
the relay stops the kernel: the container ends with its wrapper, on every engine.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import secrets
import socket
import ssl
import struct
import threading
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import zmq

from .inside import CHANNELS, HELLO, PORTS, Decoder, encode, preamble

DOCKER_FRAME = struct.Struct(">BxxxI")
"""The header of each piece of a multiplexed attach stream: stream (0 stdin, 1 stdout, 2 stderr),
three zero bytes, the piece's length (Engine API, "Attach to a container", stream format)."""
READ_SIZE = 1 << 20
HELD_BYTES = 8 * 1024**2
"""Bytes of messages from the sandbox the bridge holds for the client at most (beyond one
message): past it the bridge stops reading the stream until the client caught up, so a flood
waits in the sandbox (whose IOPub has no high-water mark, under the container's memory limit)
instead of in this process."""
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


class _Demux:
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
    """Carries one kernel's channels between ``jupyter_client`` and the container's relay.

    Args:
        attached: docker-py's ``attach_socket`` of the container (stdin, stdout, stderr, stream),
            made before the container starts.
        directory: a private host directory (mode 0700) for the ipc endpoints.
        argv: the kernel's command in the container (``{connection_file}`` is filled in).
        launcher: Python source the relay writes as ``/tmp/.sandbox-kernel/launch.py``, or None.
        max_frame: bytes; a longer frame from the sandbox is dropped (0: no bound).
        on_drop: called (from the bridge's thread) with the channel name of a dropped message.
        on_end: called (from the bridge's thread) once the stream ended, unless :meth:`close` ended it.
    """

    def __init__(self, attached: Any, directory: Path, *, argv: list[str], launcher: str | None,
                 max_frame: int, on_drop: Callable[[str], None], on_end: Callable[[], None]) -> None:
        self._attached, self._raw = attached, raw_socket(attached)
        self._on_drop, self._on_end = on_drop, on_end
        self.key = secrets.token_hex(32)
        self.connection = {"transport": "ipc", "ip": str(directory / "b"), "signature_scheme": "hmac-sha256",
                           "key": self.key, "kernel_name": "", **PORTS}
        self._context = zmq.Context()
        self._sockets: dict[int, zmq.Socket] = {}
        for index, name in enumerate(CHANNELS):
            sock = self._context.socket(zmq.XPUB if name == "iopub" else zmq.DEALER)
            sock.linger = 0
            sock.sndhwm = CLIENT_HWM
            if name == "iopub":
                sock.setsockopt(zmq.XPUB_NODROP, 1)  # a full queue answers Again instead of dropping
            sock.bind(f"ipc://{directory}/b-{PORTS[name + '_port']}")
            self._sockets[index] = sock
        self._iopub = CHANNELS.index("iopub")
        self._subscribed = False  # until the client's SUB subscribed, IOPub waits here
        self._pending: dict[int, deque] = {index: deque() for index in self._sockets}
        self._held = 0  # bytes in self._pending
        self._out = bytearray(preamble() + encode(HELLO, [json.dumps({"key": self.key, "argv": argv,
                                                                   "launcher": launcher}).encode()]))
        self._decoder = Decoder(self._record, self._dropped, max_frame)
        self._demux = _Demux(self._decoder.feed, self._stderr)
        self.stderr = bytearray()
        """The last :data:`STDERR_KEEP` bytes of the container's stderr (the kernel's log)."""
        self.hello = threading.Event()
        """Set when the relay said HELLO (the kernel's IOPub listens), or the stream ended."""
        self.ended = threading.Event()
        """Set when the stream ended (container stopped, engine gone, broken wire) or on close."""
        self.error: str | None = None
        """Why the bridge stopped, when the sandbox broke the wire."""
        self._closing = False
        self._thread = threading.Thread(target=self._run, name="sandbox-kernel-attach", daemon=True)

    def start(self) -> None:
        self._raw.setblocking(False)
        self._thread.start()

    def close(self) -> None:
        """Stop relaying and close the stream (the relay then stops the kernel). Idempotent."""
        self._closing = True
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(5)
        self._shut()

    def _shut(self) -> None:
        for sock in self._sockets.values():
            sock.close(linger=0)
        self._context.term()
        with contextlib.suppress(OSError):
            self._raw.close()
        with contextlib.suppress(Exception):
            self._attached.close()
        self.ended.set()
        self.hello.set()

    # -- from the sandbox ------------------------------------------------------------------------
    def _record(self, channel: int, frames: list[bytes]) -> None:
        if channel == HELLO:
            self.hello.set()
            return
        self._pending[channel].append(frames)
        self._held += sum(map(len, frames))

    def _dropped(self, channel: int) -> None:
        if channel < len(CHANNELS):
            self._on_drop(CHANNELS[channel])

    def _stderr(self, data: bytes) -> None:
        self.stderr += data
        del self.stderr[:-STDERR_KEEP]
        for line in data.decode("utf-8", "replace").splitlines():
            if line.strip():
                _log.debug("sandbox kernel: %s", line)

    # -- the thread --------------------------------------------------------------------------------
    def _run(self) -> None:
        poller = zmq.Poller()
        for sock in self._sockets.values():
            poller.register(sock, zmq.POLLIN)
        fd = self._raw.fileno()
        try:
            while not self._closing:
                wants = (zmq.POLLIN if self._held < HELD_BYTES else 0) | (zmq.POLLOUT if self._out else 0)
                poller.register(fd, wants or zmq.POLLERR)  # (flags 0 would unregister it)
                for index, sock in self._sockets.items():  # a full queue: wait until it has room
                    poller.register(sock, zmq.POLLIN | (zmq.POLLOUT if self._pending[index] else 0))
                events = dict(poller.poll(100))
                if events.get(fd) and not self._read():  # readable, or its end (POLLHUP, POLLERR)
                    break
                for index, sock in self._sockets.items():
                    if events.get(sock):
                        self._from_client(index, sock)
                self._to_client()
                if self._out:
                    self._write()
        except ValueError as exc:  # the sandbox broke the wire
            self.error = f"the sandbox broke the transport's wire ({exc})"
            _log.warning("%s", self.error)
        except OSError as exc:
            _log.info("the attach stream failed: %s", exc)
        except zmq.ZMQError as exc:
            if not self._closing:
                _log.warning("the attach bridge stopped: %s", exc)
        finally:
            closing = self._closing
            if not closing:
                self._shut()
            self.ended.set()
            self.hello.set()
            if not closing:
                self._on_end()

    def _read(self) -> bool:
        """Read what the stream has; False when it ended."""
        while True:
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

    def _from_client(self, index: int, sock: zmq.Socket) -> None:
        while True:
            try:
                frames = sock.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            if index == self._iopub:  # a subscription message from the client's SUB
                self._subscribed |= bool(frames and frames[0][:1] == b"\x01")
                continue
            self._out += encode(index, frames)

    def _to_client(self) -> None:
        for index, queue in self._pending.items():
            if index == self._iopub and not self._subscribed:
                continue
            sock = self._sockets[index]
            while queue:
                try:
                    sock.send_multipart(queue[0], zmq.NOBLOCK)
                except zmq.Again:  # no peer yet (a DEALER), or its queue is full: kept here
                    break
                self._held -= sum(map(len, queue.popleft()))

    def _write(self) -> None:
        try:
            sent = self._raw.send(bytes(self._out[:READ_SIZE]))
        except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError, socket.timeout):
            return
        del self._out[:sent]


def private_directory(root: Path, prefix: str) -> Path:
    """A new directory only this user may enter, for the bridge's ipc endpoints."""
    import tempfile

    path = Path(tempfile.mkdtemp(prefix=prefix, dir=root))
    os.chmod(path, 0o700)
    return path

"""The ZMQ side of a kernel-client backend: ``jupyter_client``'s async client with the socket
options a sandbox needs (reconnect interval, a bound on each frame, a byte-counted IOPub, a proof
that stdin is connected), one ZMQ context per process, and the process's open-file check.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
from collections.abc import Callable
from typing import Any

import zmq
import zmq.asyncio
from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.channels import AsyncZMQSocketChannel
from jupyter_client.connect import channel_socket_types
from jupyter_client.session import Session
from traitlets import Callable as CallableTrait
from traitlets import CaselessStrEnum, Integer, Type, default

from ...core.errors import SandboxError, SandboxStartError

_CONTEXTS: dict[int, zmq.asyncio.Context] = {}


def shared_context() -> zmq.asyncio.Context:
    """The ZMQ context of every kernel client of this process (and of the docker ``api``
    transport's bridges, whose ``inproc`` endpoints need their clients in the same context).
    One context, not one per client: each holds an I/O thread, a reaper thread and their file
    descriptors, which many sessions in one process (the MCP server) ran out of. Never
    terminated: terminating waits for every socket in it."""
    pid = os.getpid()  # a forked child needs its own
    if pid not in _CONTEXTS:
        _CONTEXTS[pid] = zmq.asyncio.Context()
    return _CONTEXTS[pid]


RECONNECT_MS = 10
"""Milliseconds between a client socket's tries to connect to a kernel that has not bound its
sockets yet (the client connects as soon as the kernel's process starts, which binds them after
its imports): libzmq's default of 100 made each start wait up to 0.1 s more (measured: the docker
api transport's cold start went from 0.65 to 0.50 s with its relay's sockets at 10 ms)."""

QUEUED_BYTES = 64 * 1024**2
"""Bytes of IOPub messages the client's socket may queue inside libzmq while the backend is
behind (the receive high-water mark, set to this over ``max_message_bytes``, at least 2
messages): libzmq counts messages, 1000 by default, each up to the frame bound, so a sandbox
flooding with large outputs grew the wrapper by 572 to 858 MiB (60 displays of 20 MB; 171 to
190 MiB with this bound). What libzmq does not take waits in the sandbox, under its limits."""

SEND_TIMEOUT_MS = 5000
"""Milliseconds a message to the kernel (shell, control, stdin) may wait for libzmq to take it
(``ZMQ_SNDTIMEO``); then :class:`SendChannel` raises. jupyter_client's ``Session.send`` writes on
a blocking shadow of the channel's socket, in the event loop's thread, and a DEALER whose peer is
gone blocks there for ever: on the docker ``api`` transport the kernel's endpoints are ``inproc``
sockets of the bridge, which closes them when the container dies, and libzmq does not reconnect
``inproc``. A control request sent just then (its kernel OOM-killed in a user's engine) froze the
whole process, its death watch and pytest-timeout's alarm included (a CI run hung 20 minutes).
On tcp and ipc the connection's pipe stays and queues, so this bounds only a kernel that reads
nothing while 2,000 messages wait."""

FILES_PER_SESSION = 64
"""File descriptors a new session must find free in this process before its sandbox starts.
Measured: a docker session holds about 37 in the process that drives it (its ZMQ sockets and
their eventfds, the engine's connections), a local one about 17; the rest is room for the
process itself (an MCP server's next HTTP connection)."""


def open_files() -> tuple[int, int] | None:
    """``(open, limit)``: this process's open file descriptors and its soft ``RLIMIT_NOFILE``;
    None where they cannot be read or there is no limit (Windows has neither ``resource`` nor
    ``/proc/self/fd``; macOS has ``/dev/fd``)."""
    try:
        import resource
    except ImportError:
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return None
    for directory in ("/proc/self/fd", "/dev/fd"):
        with contextlib.suppress(OSError):
            return len(os.listdir(directory)), soft
    return None


def check_open_files(need: int) -> None:
    """Refuse a new session when fewer than ``need`` file descriptors are free in this process.

    Past its limit a process fails wherever it next opens one: in libzmq, in the engine's
    client, or in a server's ``accept()``, where an MCP server over HTTP stopped answering every
    client (measured at ``ulimit -n 256``: 6 docker sessions ran, the 7th broke the server).

    Raises:
        SandboxStartError: one message with the count, the limit and what to do."""
    counted = open_files()
    if counted is None:
        return
    used, limit = counted
    if used + need > limit:
        raise SandboxStartError(
            f"This process has {used} of its {limit} open files in use, and a sandbox session needs about {need} "
            "more, so no sandbox was started. End other sessions, or raise the limit (ulimit -n) before starting "
            "the process.")


class IOPubChannel(AsyncZMQSocketChannel):
    """jupyter_client's IOPub channel, which tells ``taken`` (when set) the size of each message
    it reads: the sum of its frames' lengths in bytes, as they arrived, before they are
    deserialized (a message that fails to deserialize was taken all the same)."""

    taken: Callable[[int], None] | None = None

    async def _recv(self, **kwargs: Any) -> dict[str, Any]:
        frames = await self.socket.recv_multipart(**kwargs)
        if self.taken is not None:
            self.taken(sum(map(len, frames)))
        _, message = self.session.feed_identities(frames)
        return self.session.deserialize(message)


class SendChannel(AsyncZMQSocketChannel):
    """jupyter_client's channel, whose ``send`` raises SandboxError where libzmq does not take
    the message within :data:`SEND_TIMEOUT_MS` (the socket's ``ZMQ_SNDTIMEO``) instead of
    blocking the event loop for ever."""

    def send(self, msg: dict[str, Any]) -> None:
        try:
            super().send(msg)
        except zmq.Again as exc:
            raise SandboxError(
                f"The sandbox's kernel did not take {msg['header']['msg_type']} within "
                f"{SEND_TIMEOUT_MS / 1000:g} s: its connection is gone (the sandbox stopped) or it reads nothing.") from exc


class SandboxKernelClient(AsyncKernelClient):
    """jupyter_client's async client, with what a sandbox's kernel needs of it:

    - ``inproc`` endpoints (``inproc://IP-PORT``, in this process, on the shared ZMQ context: the
      docker ``api`` transport's bridge), which jupyter_client's ``transport`` trait does not list;
    - retries to connect every :data:`RECONNECT_MS`, not libzmq's 100 ms;
    - an IOPub receive queue bounded near :data:`QUEUED_BYTES`, not at 1000 messages;
    - a bound on each frame the sandbox sends (``max_message_bytes``, 0: none), set as
      ``ZMQ_MAXMSGSIZE`` on each socket before it connects (:mod:`.message_bound`), not on the
      shared context, whose other clients may have other bounds;
    - a proof that the stdin channel is connected (:meth:`stdin_connected`): the kernel's stdin
      ROUTER silently drops an ``input_request`` addressed to a peer whose connection is not
      complete, and the first cell's ``input()`` then waits for ever;
    - sends on shell, control and stdin that give up after :data:`SEND_TIMEOUT_MS` with a
      SandboxError (:class:`SendChannel`), where jupyter_client's blocked for ever on a kernel
      whose connection was gone;
    - ``iopub_taken``, told the size in bytes of each IOPub message read (:class:`IOPubChannel`):
      the docker ``api`` transport's bridge counts what waits in libzmq's queue towards this
      client, which libzmq bounds in messages only.

    The sandboxes' connection info carries no CurveZMQ keys, so the sockets use none."""

    transport = CaselessStrEnum(["tcp", "ipc", "inproc"], default_value="tcp")
    max_message_bytes = Integer(0, help="Bytes; a frame from the kernel over it is refused (0: no bound).")
    iopub_channel_class = Type(IOPubChannel)
    shell_channel_class = Type(SendChannel)
    control_channel_class = Type(SendChannel)
    stdin_channel_class = Type(SendChannel)
    iopub_taken = CallableTrait(None, allow_none=True, help="Called with the size in bytes of each IOPub message read.")

    _handshake: zmq.asyncio.Socket | None = None  # the stdin socket's monitor, until the proof is taken

    @default("session")
    def _session_default(self) -> Session:
        """jupyter_client's ``Session(parent=self)`` without the parent (this client has none
        whose config it could pass on): client -> session -> client was a cycle, so a closed
        sandbox's client and channels waited for a full collection (issue 37)."""
        return Session(config=self.config)

    def _create_connected_socket(self, channel: str, identity: bytes | None = None) -> zmq.sugar.socket.Socket:
        """jupyter_client's socket for ``channel``, with the options that must precede
        ``connect``: the reconnect interval, the frame bound, and on stdin (tcp, ipc) a monitor
        of its handshake."""
        sock = self.context.socket(channel_socket_types[channel])
        sock.linger = 1000  # as jupyter_client: no hang at exit
        sock.setsockopt(zmq.RECONNECT_IVL, RECONNECT_MS)
        sock.setsockopt(zmq.MAXMSGSIZE, self.max_message_bytes if self.max_message_bytes > 0 else -1)
        sock.sndtimeo = SEND_TIMEOUT_MS
        if channel == "iopub" and self.max_message_bytes > 0:
            sock.rcvhwm = max(2, QUEUED_BYTES // self.max_message_bytes)
        if identity:
            sock.identity = identity
        if channel == "stdin" and self.transport != "inproc":
            # A unique address: the drop watch (.message_bound) monitors this socket later, on
            # libzmq's default address, which the closed monitor may still hold for a moment.
            self._handshake = sock.get_monitor_socket(
                zmq.EVENT_HANDSHAKE_SUCCEEDED, addr=f"inproc://sandbox-kernel-stdin-{secrets.token_hex(8)}")
        sock.connect(self._make_url(channel))
        return sock

    async def stdin_connected(self, timeout: float) -> bool:
        """Wait until the stdin channel's connection to the kernel completed its ZMTP handshake
        (``ZMQ_EVENT_HANDSHAKE_SUCCEEDED``), at most ``timeout`` seconds; True once it did (at
        once on ``inproc``, whose connection is made in ``connect``, and after the first call).

        The handshake's last command (READY) goes both ways at once, so when ours has completed,
        the kernel's side registers our routing id before any ``input_request`` of a cell sent
        after it can be addressed to us (``router_t::identify_peer`` runs on the kernel's next
        send)."""
        monitor, self._handshake = self._handshake, None
        if monitor is None:
            return True
        try:
            await asyncio.wait_for(monitor.recv_multipart(), timeout)
            return True
        except asyncio.TimeoutError:
            return False
        finally:
            self._close_monitor(monitor)

    def _close_monitor(self, monitor: zmq.asyncio.Socket) -> None:
        stdin = self._stdin_channel.socket if self._stdin_channel is not None else None
        with contextlib.suppress(zmq.ZMQError):
            if stdin is not None and not stdin.closed:
                stdin.disable_monitor()
        monitor.close(linger=0)

    def start_channels(self, *args: Any, **kwargs: Any) -> None:
        super().start_channels(*args, **kwargs)
        if self._iopub_channel is not None:
            self._iopub_channel.taken = self.iopub_taken

    def stop_channels(self) -> None:
        monitor, self._handshake = self._handshake, None
        if monitor is not None:
            self._close_monitor(monitor)
        super().stop_channels()

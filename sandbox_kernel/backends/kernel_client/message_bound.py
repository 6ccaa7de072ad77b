"""A bound on the size of each message the sandbox's kernel sends to the host.

Without it, one ``display({'text/plain': 'x' * 300_000_000}, raw=True)`` in the sandbox makes
the host-side client receive, copy and decode the whole message (measured: the wrapper kernel
grew from 58 MiB to 916 MiB) before the output budget drops it. ZMQ's ``MAXMSGSIZE`` socket
option makes libzmq refuse a frame larger than the bound as soon as its length header arrives,
before allocating it, so a refused message costs the host nothing.

libzmq treats the oversized frame as a protocol error: it closes that connection and, unlike
after a network error, never reconnects it (``session_base_t::engine_error``). The messages
queued behind the refused one on that connection are lost with it (on IOPub typically the
cell's ``status: idle``; on shell the reply itself, when the reply was the large message).
:class:`DropWatch` sees the closing through the socket's monitor (``ZMQ_EVENT_DISCONNECTED``),
connects the socket to the same endpoint again (the SUB socket keeps its subscription; a DEALER
socket comes back under a fresh routing id, see :meth:`DropWatch._reconnect`) and tells the
backend, whose :class:`DropRecovery` recovers the requests in flight. A connection that closed
for a network error (the kernel's process ended) libzmq reconnects by itself, and the watch leaves
it alone: only the backend is told.

The bound is per frame: a Jupyter message's content (outputs, display data) is one frame, and
each binary buffer of a comm message (ipywidgets) is a frame of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import zmq
from zmq.utils.monitor import parse_monitor_message

from ...core.errors import MessageDropped
from ...core.events import Stream
from ...runtime.traits import format_bytes
from ..base import StdinHandler
from .held import IOPubQueue

DEFAULT_OUTPUT_BUDGET = 10 * 1024**2
"""The front doors' default ``max_output_bytes``, assumed until :meth:`Backend.set_output_budget`
says otherwise (e.g. a backend driven directly through the Python API)."""

FLOOR = 32 * 1024**2
"""The smallest automatic bound: room for widget state and for outputs near a small budget,
whose JSON (escapes such as ``\\n``, base64 images) is larger than what the budget counts."""

RECONNECT_DELAY = 0.1
"""Seconds between a dropped connection and the new one (libzmq's own ``ZMQ_RECONNECT_IVL``)."""

CHANNELS = ("iopub", "shell", "stdin", "control")
"""The client's channels that carry messages from the sandbox's kernel (heartbeat echoes only
what the client sent)."""


def message_limit(max_output_bytes: int) -> int:
    """The automatic bound for an output budget of ``max_output_bytes`` (0: no budget):
    twice the budget, at least :data:`FLOOR`; 0 (no bound) when the budget is off."""
    if not max_output_bytes:
        return 0
    return max(FLOOR, 2 * max_output_bytes)


def drop_note(max_bytes: int, setting: str) -> str:
    """The one line a cell shows when a message over the bound was dropped."""
    return (f"[an output of more than {format_bytes(max_bytes)} was dropped, with any output right after it: "
            f"the sandbox sent it as one message, larger than the host accepts. Raise {setting} to allow it.]\n")


class DropWatch:
    """Watches the client's channel sockets; when libzmq closes a connection, connects the
    socket to the endpoint again unless libzmq does (:meth:`_reconnecting_by_itself`) and calls
    ``on_drop(channel)`` (a name from :data:`CHANNELS`).

    Also called for connections that close because the kernel stopped; the backend's death
    watch tells those apart."""

    def __init__(self, client: Any, on_drop: Callable[[str], None]) -> None:
        self._client = client
        self._on_drop = on_drop
        self._tasks: list[asyncio.Task] = []
        self._sockets: list[tuple[Any, Any]] = []
        self._reconnects = 0

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        for name in CHANNELS:
            socket = getattr(self._client, f"{name}_channel").socket
            # A unique address: pyzmq's default (inproc://monitor.s-FD) is the same for the next
            # watch on this socket (after a restore or a recovery), and a closed monitor's
            # endpoint can still be bound for a moment ("Address already in use").
            monitor = socket.get_monitor_socket(
                zmq.EVENT_DISCONNECTED | zmq.EVENT_CONNECT_RETRIED,
                addr=f"inproc://sandbox-kernel-drops-{name}-{secrets.token_hex(8)}")
            self._sockets.append((socket, monitor))
            self._tasks.append(loop.create_task(self._watch(name, socket, monitor)))

    async def _watch(self, name: str, socket: Any, monitor: Any) -> None:
        while True:
            event = parse_monitor_message(await monitor.recv_multipart())
            if event["event"] != zmq.EVENT_DISCONNECTED:
                continue
            await asyncio.sleep(RECONNECT_DELAY)
            if not await self._reconnecting_by_itself(monitor):
                self._reconnect(name)
            self._on_drop(name)

    @staticmethod
    async def _reconnecting_by_itself(monitor: Any) -> bool:
        """Whether libzmq reconnects the closed connection by itself: after a network error (the
        kernel's process ended, and a checkpoint or a new kernel may already serve the endpoint)
        it schedules a reconnect and says so (``ZMQ_EVENT_CONNECT_RETRIED``, right after
        ``ZMQ_EVENT_DISCONNECTED``); after a refused oversized frame (a protocol error) it does
        not. Reads the monitor's waiting events.

        Connecting again ourselves after a network error would ``zmq_disconnect`` the connection
        libzmq made, with the new kernel's messages in it: libzmq then discards a multipart
        message after its first frame was read and aborts the process (``Assertion failed:
        !_more (src/fq.cpp:80)``, libzmq issue #2163; measured here: a kernel killed with
        SIGKILL under load, 1 in 2 to 6 kills)."""
        retried = False
        while monitor.get(zmq.EVENTS) & zmq.POLLIN:
            event = parse_monitor_message(await monitor.recv_multipart(zmq.NOBLOCK))
            retried |= event["event"] == zmq.EVENT_CONNECT_RETRIED
        return retried

    def _reconnect(self, name: str) -> None:
        """Connect channel ``name`` again. A DEALER socket (shell, stdin, control) comes back
        under a fresh routing id: while the kernel's ROUTER still holds the old connection's id,
        libzmq would take the new connection's first frame for its routing id and garble all
        that follows (``router_t::identify_peer``). shell and stdin change together, since the
        kernel addresses ``input_request`` to the routing id of the shell request. (Our own
        ``disconnect`` raises no monitor event.)"""
        self._reconnects += 1
        identity = b"%s-%d" % (self._client.session.bsession, self._reconnects)
        for channel in ("shell", "stdin") if name in ("shell", "stdin") else (name,):
            socket = getattr(self._client, f"{channel}_channel").socket
            endpoint = socket.getsockopt(zmq.LAST_ENDPOINT).decode()
            with contextlib.suppress(zmq.ZMQError):  # already gone when libzmq reconnects by itself
                socket.disconnect(endpoint)
            if channel != "iopub":
                socket.identity = identity
            socket.connect(endpoint)

    def stop(self) -> None:
        """Stop watching; call before the client's sockets are closed."""
        for task in self._tasks:
            task.cancel()
        for socket, monitor in self._sockets:
            with contextlib.suppress(zmq.ZMQError):
                if not socket.closed:
                    socket.disable_monitor()
            monitor.close(linger=0)
        self._tasks, self._sockets = [], []


@dataclass
class Request:
    """Everything that comes back for one request we sent: its IOPub messages, its shell
    reply, and (for execute_request) the handler for its input_requests."""

    iopub: IOPubQueue = field(default_factory=IOPubQueue)
    reply: asyncio.Future = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    stdin: StdinHandler | None = None
    timed_out: bool = False
    execute: bool = False
    dropped: bool = False  # a connection closed while this request was pending
    shown: bool = True  # False: nothing shows its output (the completion warm-up), so a drop
    # while only such requests are pending is told outside any cell
    told: bool = False  # ... and the cell has said that output was dropped


RESYNCED = {"header": {"msg_type": "resynced"}}
"""Put in a request's IOPub queue once all the sandbox sent for it has arrived or was lost
with a dropped message: its IOPub stream ends there (its ``status: idle`` may have been lost)."""

PROBE_IOPUB_WAIT = 1.0
"""Seconds the recovery waits for IOPub after its probe's reply before it probes again."""


class DropRecovery:
    """Recovers the requests in flight after a dropped message, for one connection to a kernel
    (``KernelClientBackend`` makes one per connection).

    Args:
        client: the connection's ``AsyncKernelClient``.
        requests: the backend's requests in flight by msg_id (:class:`Request`): the same dict,
            not a copy; the recovery adds its probes to it.
        death: the task that ends when the kernel stopped.
        note: the line a cell shows when a message was dropped (:func:`drop_note`).
        ready_timeout: seconds of answered probes to wait for IOPub to come back.
        request_timeout: seconds to wait for one probe's reply.
        on_unclaimed: called with the note as an event when a connection closed while no
            request was pending (the backend passes it to its comm handler).
        log: the backend's logger.
        kernel_pid: the pid of the kernel serving the connection, as a checkpoint keeper knows it
            (None: no keeper). A keeper puts a checkpoint in place of a kernel that died, on the
            same sockets, and that kernel answers the recovery's probe before the keeper's word of
            the death may arrive: the requests then end by the death, not as dropped messages.
    """

    def __init__(self, client: Any, requests: dict[str, Request], death: asyncio.Task, *, note: str,
                 ready_timeout: float, request_timeout: float, on_unclaimed: Callable[[Stream], None],
                 log: Any, kernel_pid: Callable[[], Awaitable[int]] | None = None) -> None:
        self._client, self._requests, self._death = client, requests, death
        self._kernel_pid, self._first_pid = kernel_pid, None
        self._note, self._on_unclaimed, self._log = note, on_unclaimed, log
        self._ready_timeout, self._request_timeout = ready_timeout, request_timeout
        self._drop_watch: DropWatch | None = None
        self._resyncing: asyncio.Task | None = None
        self._drops = 0  # connections closed so far; a probe in flight starts over when this changes
        self._unclaimed_drop = False  # a connection closed while no request was pending
        self.end_input = False
        """An input_request was dropped: the kernel is answered EOF until the recovery is done
        (the backend's stdin reader resets it when an input_request arrives)."""
        self.dropped_at: float | None = None
        """When a connection last closed (loop time), until the recovery is done; None: none is under way."""

    def watch(self) -> None:
        """Watch the client's ZMQ sockets (:class:`DropWatch`), calling :meth:`on_drop`."""
        self._drop_watch = DropWatch(self._client, self.on_drop)
        self._drop_watch.start()
        if self._kernel_pid is not None:  # the kernel that answered on this connection
            self._first_pid = asyncio.ensure_future(self._kernel_pid())
            # its failure is read by _replaced, if a drop comes; else it is no news worth a log line
            self._first_pid.add_done_callback(lambda done: done.cancelled() or done.exception())

    def stop(self) -> None:
        """At shutdown, before the client's sockets close."""
        if self._resyncing is not None:
            self._resyncing.cancel()
        if self._drop_watch is not None:
            self._drop_watch.stop()
        if self._first_pid is not None:
            self._first_pid.cancel()
        self._drop_watch = self._resyncing = self._first_pid = None

    def on_drop(self, channel: str) -> None:
        """A connection to the kernel closed (a message over the bound, or the kernel stopped:
        the death watch handles that). Mark the requests in flight and start the recovery."""
        self._log.info("The connection to the sandbox's %s channel closed; recovering", channel)
        self._drops += 1
        self.dropped_at = asyncio.get_running_loop().time()
        pending = list(self._requests.values())
        for request in pending:
            request.dropped = True
        self._unclaimed_drop |= not any(r.shown for r in pending)
        self.end_input |= channel == "stdin" and any(r.stdin for r in pending)
        if self.end_input:
            self._client.input("\x04")  # the lost message was an input_request: end it (EOFError)
        if self._resyncing is None or self._resyncing.done():
            self._resyncing = asyncio.get_running_loop().create_task(self._resync())

    async def _resync(self) -> None:
        """Send ``kernel_info_request`` probes until one gets its reply and an IOPub message.
        The kernel handles shell requests in order and publishes IOPub in order, so each
        request sent before has then received all it ever will: one still without its reply
        lost it (MessageDropped), and its IOPub stream ends (RESYNCED). Stops waiting for IOPub
        after ``ready_timeout`` seconds of answered probes; gives up if the kernel died."""
        loop, deadline = asyncio.get_running_loop(), None
        while not self._death.done():
            drops = self._drops
            replied, published = await self._probe()
            self._log.debug("Recovery probe: reply %s, IOPub %s, drops %d -> %d", replied, published, drops,
                            self._drops)
            if published and drops == self._drops:
                break
            if not replied and self.end_input:  # in case the EOF was lost too (ipykernel purges
                self._client.input("\x04")  # stale input_replies before its next input_request)
            if replied:
                deadline = deadline or loop.time() + self._ready_timeout
                if loop.time() > deadline:
                    self._log.warning("IOPub did not come back after a dropped message; ending the requests")
                    break
        else:
            return
        if await self._replaced():
            self._log.info("The sandbox's kernel was replaced (it died); its death ends the requests")
            return
        self._end_requests()

    async def _replaced(self) -> bool:
        """Whether the keeper runs another kernel than the one this connection was watched for
        (or none, while it promotes a checkpoint). False without a keeper, or when it cannot say."""
        if self._first_pid is None:
            return False
        try:
            first = await self._first_pid
            return first != await self._kernel_pid()
        except Exception:  # noqa: BLE001 - no answer: the recovery ends the requests as before
            return False

    def _end_requests(self) -> None:
        """End the requests the dropped messages belonged to, and say so."""
        self._log.debug("Recovered; ending %d requests", sum(r.dropped for r in self._requests.values()))
        for request in self._requests.values():
            if request.dropped and not request.reply.done():
                request.reply.set_exception(MessageDropped(self._note.strip()))
                request.reply.exception()  # retrieved: comm requests never await their reply
            if request.dropped:
                request.iopub.put_nowait(RESYNCED)
        if self._unclaimed_drop:
            self._on_unclaimed(Stream("stderr", self._note))
        self._unclaimed_drop = self.end_input = False
        self.dropped_at = None

    async def _probe(self) -> tuple[bool, bool]:
        """Send one ``kernel_info_request``: ``(its reply came, one of its IOPub messages came)``.
        The reply is awaited while earlier requests keep the kernel busy, but at most
        ``request_timeout`` seconds (in case the probe itself was lost: then, or when another
        connection closed meanwhile, a fresh probe follows), and not past the kernel's death."""
        msg = self._client.session.msg("kernel_info_request", {})
        msg_id, drops = msg["header"]["msg_id"], self._drops
        request = self._requests[msg_id] = Request()
        try:
            self._client.shell_channel.send(msg)
            give_up = asyncio.get_running_loop().time() + self._request_timeout
            while not request.reply.done():
                if drops != self._drops or self._death.done() or asyncio.get_running_loop().time() > give_up:
                    return False, False
                await asyncio.wait({request.reply}, timeout=PROBE_IOPUB_WAIT)
            try:
                await asyncio.wait_for(request.iopub.get(), PROBE_IOPUB_WAIT)
            except asyncio.TimeoutError:
                return True, False
            return True, True
        finally:
            self._requests.pop(msg_id, None)

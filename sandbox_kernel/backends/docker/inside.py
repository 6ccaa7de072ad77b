"""The container's side of the engine-API transport: a relay between the kernel's ZMQ sockets
and the container's standard streams, which the engine carries to the host (an attach stream,
``POST /containers/{id}/attach``), so the host needs no path into the container and the
container no network. The container's command is :data:`BOOTSTRAP`, which reads this file from
the stream and runs it: standard library and pyzmq only (ipykernel needs pyzmq, so every kernel
image has it).

The wire (both directions), one record per Jupyter message::

    channel: 1 byte (:data:`CHANNELS` index, or HELLO), count: 4 bytes big-endian,
    then ``count`` times: length 8 bytes big-endian, that many bytes (one ZMQ frame)

The host's first record is HELLO with one frame, the JSON of the session: ``key`` (the
connection key), ``argv`` (the kernel's command; ``{connection_file}`` is replaced),
``launcher`` (Python source to run as ``launch.py``, or null), ``keeper`` (the source of the
checkpoints' keeper to run as ``keeper.py``, or null: :mod:`..checkpoint.keeper`, which ``argv``
then starts; the relay carries the lines of the keeper's socket on channel :data:`KEEPER`).
The relay writes the connection
file (ipc sockets under /tmp, private to the container), starts the kernel, connects a DEALER
to its shell, control and stdin ROUTERs (one routing id for shell and stdin, as ipykernel
addresses ``input_request`` to the shell request's sender) and a SUB to its IOPub, and relays.
It answers HELLO with HELLO once the kernel's IOPub has greeted it (``iopub_welcome``, JEP 65)
and its stdin connection completed its handshake (``ZMQ_EVENT_HANDSHAKE_SUCCEEDED``), or after
:data:`WELCOME_WAIT` seconds: no output is published before it listens, and no ``input_request``
is dropped by the kernel's stdin ROUTER as addressed to a peer it does not know yet.

A pooled sandbox's relay (:mod:`sandbox_kernel.backends.pool`) gets its source and session from its
environment instead (:func:`pooled_environment`: the key is no secret from the sandbox, whose
kernel reads it from its connection file anyway), starts the kernel at once, and writes nothing
until the host that takes it sends HELLO; it ends if none comes within the session's ``ttl``.

The relay ends the kernel and exits when its standard input ends: the attach stream closed,
because the host's process (the wrapper kernel) stopped or lost the engine. Its exit code is
the kernel's (128 + N for a signal N), which the host reads from the container's state.
"""

from __future__ import annotations

import json
import os
import struct
import sys

CHANNELS = ("shell", "control", "stdin", "iopub")
KEEPER = 4
"""The channel of the keeper's socket: one frame of bytes each way, its lines of JSON."""
HELLO = 255
HEADER = struct.Struct(">BI")
LENGTH = struct.Struct(">Q")
WELCOME_WAIT = 3.0
"""Seconds the relay waits for the kernel's ``iopub_welcome`` before it says HELLO anyway (a
kernel that predates JEP 65 never sends it)."""
KERNEL_DIR = "/tmp/.sandbox-kernel"
OUTGOING_BYTES = 8 * 1024**2
"""Bytes the relay holds for the host at most (beyond one message): past it the relay stops
reading the kernel's sockets until the host took the bytes, so a flood waits in the kernel's
own IOPub queue (no high-water mark: see ..kernel_client.launcher), not in a second copy here,
whose growth doubled it (measured: 20 displays of 20 MB peaked at 650 to 711 MiB in the
sandbox with an unbounded relay, 524 MiB with this bound)."""
KERNEL_QUEUE = 4
"""IOPub messages the relay's SUB lets libzmq queue from the kernel (its receive high-water
mark): the rest waits in the kernel's IOPub queue, which never drops. libzmq's default, 1000
messages of any size, would hold a flood here again. (The DEALERs keep the default: the
kernel's ROUTERs drop what a full peer cannot take.)"""
RECONNECT_MS = 10
"""Milliseconds between the relay's tries to connect to a kernel that has not bound its sockets
yet (libzmq's default, 100, made each start wait up to 0.1 s more after the kernel was ready)."""
POOLED_SOURCE, POOLED_SESSION = "SANDBOX_KERNEL_RELAY", "SANDBOX_KERNEL_SESSION"
PORTS = {"shell_port": 1, "iopub_port": 2, "stdin_port": 3, "control_port": 4, "hb_port": 5}


def encode(channel: int, frames: list) -> bytes:
    """One record of the wire (see the module docstring)."""
    parts = [HEADER.pack(channel, len(frames))]
    for frame in frames:
        frame = bytes(frame)
        parts += [LENGTH.pack(len(frame)), frame]
    return b"".join(parts)


class Decoder:
    """Reads records from the bytes of a stream, incrementally. A frame longer than
    ``max_frame`` bytes (0: no bound) is skipped as it arrives, never held, and its record is
    reported as dropped.

    Args:
        on_record: called with ``(channel, frames)`` for each record.
        on_dropped: called with ``channel`` for each record skipped for its size.
    """

    def __init__(self, on_record, on_dropped=None, max_frame: int = 0) -> None:
        self._on_record, self._on_dropped, self._max = on_record, on_dropped, max_frame
        self._buffer = bytearray()
        self._channel = self._left = 0  # the record being read; frames still to come
        self._frames: list = []
        self._skip = -1  # bytes of an oversized frame still to skip; -1: not skipping
        self._dropped = False

    def feed(self, data: bytes) -> None:
        """Take the next bytes of the stream.

        Raises:
            ValueError: the bytes are not the wire (an unknown channel)."""
        self._buffer += data
        while True:
            if self._skip >= 0:
                take = min(self._skip, len(self._buffer))
                del self._buffer[:take]
                self._skip -= take
                if self._skip:
                    return
                self._skip = -1
                self._next_frame()
                continue
            if not self._left and not self._frames:
                if len(self._buffer) < HEADER.size:
                    return
                self._channel, self._left = HEADER.unpack_from(self._buffer)
                del self._buffer[:HEADER.size]
                if self._channel >= len(CHANNELS) and self._channel not in (HELLO, KEEPER):
                    raise ValueError(f"not the relay's wire: channel {self._channel}")
                self._dropped = False
                if not self._left:
                    self._finish()
                continue
            if len(self._buffer) < LENGTH.size:
                return
            (length,) = LENGTH.unpack_from(self._buffer)
            if self._max and length > self._max:
                del self._buffer[:LENGTH.size]
                self._dropped, self._skip = True, length
                continue
            if len(self._buffer) < LENGTH.size + length:
                return
            self._frames.append(bytes(self._buffer[LENGTH.size:LENGTH.size + length]))
            del self._buffer[:LENGTH.size + length]
            self._next_frame()

    def _next_frame(self) -> None:
        self._left -= 1
        if not self._left:
            self._finish()

    def _finish(self) -> None:
        channel, frames, dropped = self._channel, self._frames, self._dropped
        self._frames, self._dropped = [], False
        if dropped:
            if self._on_dropped is not None:
                self._on_dropped(channel)
        else:
            self._on_record(channel, frames)


class Attached:
    """The relay's kernel when it attaches to one that runs already (HELLO's ``attach``: its
    ``ipc`` address prefix, a kernel forked from a checkpoint): not its child, never seen to end."""

    returncode = 0

    def poll(self):
        return None

    def terminate(self):
        pass

    def wait(self, timeout=None):
        pass

    kill = terminate


def start_kernel(session: dict):  # pragma: no cover - runs in the container
    """Write the connection file, the launcher and the keeper (HELLO's), and start ``argv``."""
    import subprocess

    os.makedirs(KERNEL_DIR, mode=0o700, exist_ok=True)
    connection_file = f"{KERNEL_DIR}/kernel.json"
    with open(connection_file, "w") as f:
        json.dump({"transport": "ipc", "ip": f"{KERNEL_DIR}/k", "signature_scheme": "hmac-sha256",
                   "key": session["key"], "kernel_name": "", **PORTS}, f)
    argv = [arg.replace("{connection_file}", connection_file) for arg in session["argv"]]
    for name in ("launcher", "keeper"):
        if session.get(name):
            with open(f"{KERNEL_DIR}/{'launch' if name == 'launcher' else name}.py", "w") as f:
                f.write(session[name])
    return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=sys.stderr.fileno(), stderr=sys.stderr.fileno(),
                            env={**os.environ, **(session.get("env") or {})})


def main() -> None:  # pragma: no cover - runs in the container (tests run it there)
    import signal
    import subprocess
    import time

    try:
        import zmq
    except ImportError as exc:
        sys.stderr.write(f"sandbox-kernel relay: {exc} (pyzmq, which ipykernel needs)\n")
        sys.exit(1)

    stdin, stdout = sys.stdin.fileno(), sys.stdout.fileno()
    session: dict = json.loads(os.environ.pop(POOLED_SESSION, "") or "{}")  # a pooled sandbox's
    pooled = bool(session)
    inbox: list = []
    claimed = []  # a pooled relay writes nothing until a host's HELLO claims it

    def take(channel, frames):
        if channel == HELLO:
            if not session:
                session.update(json.loads(frames[0]))
            claimed.append(True)
        else:
            inbox.append((channel, frames))

    decoder = Decoder(take)
    while not session:  # the host's HELLO
        data = os.read(stdin, 65536)
        if not data:
            return
        decoder.feed(data)
    ttl = float(session.get("ttl") or 0) if pooled else 0.0

    prefix = session.get("attach") or f"{KERNEL_DIR}/k"
    if session.get("attach"):  # a kernel that runs already (a fork): relay to it until stdin ends
        kernel = Attached()
    else:
        kernel = start_kernel(session)

    context = zmq.Context()
    sockets = {}
    routing_id = os.urandom(8).hex().encode()
    handshake = None  # the stdin socket's monitor: HELLO waits for its connection (see the module's text)
    for index, name in enumerate(CHANNELS):
        sock = context.socket(zmq.SUB if name == "iopub" else zmq.DEALER)
        sock.linger = 0
        sock.setsockopt(zmq.RECONNECT_IVL, RECONNECT_MS)  # the kernel binds its sockets after its imports
        if name == "iopub":
            sock.setsockopt(zmq.RCVHWM, KERNEL_QUEUE)
            sock.setsockopt(zmq.SUBSCRIBE, b"")
        elif name in ("shell", "stdin"):
            sock.setsockopt(zmq.IDENTITY, routing_id)
        if name == "stdin" and hasattr(zmq, "EVENT_HANDSHAKE_SUCCEEDED"):  # libzmq 4.3
            handshake = sock.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED)
        sock.connect(f"ipc://{prefix}-{PORTS[name + '_port']}")
        sockets[index] = sock
    by_socket = {sock: index for index, sock in sockets.items()}
    keeper = None  # the keeper's socket, once it listens (its lines go on channel KEEPER); False: gone
    keeper_out = bytearray()

    # fd 0 is polled directly: its end (POLLHUP) shows as ZMQ_POLLERR, a non-zero event too.
    os.set_blocking(stdin, False)
    os.set_blocking(stdout, False)
    outgoing = bytearray()
    welcomed, connected, greeted, started, watching_out = False, handshake is None, False, time.monotonic(), False
    reading = True  # the kernel's sockets, while outgoing is under OUTGOING_BYTES
    poller = zmq.Poller()
    for sock in sockets.values():
        poller.register(sock, zmq.POLLIN)
    poller.register(stdin, zmq.POLLIN)
    if handshake is not None:
        poller.register(handshake, zmq.POLLIN)

    def stop(code: int) -> None:
        if kernel.poll() is None:
            kernel.terminate()
            try:
                kernel.wait(2)
            except subprocess.TimeoutExpired:
                kernel.kill()
                kernel.wait()
        sys.exit(code)

    def meet_keeper() -> None:
        nonlocal keeper
        import socket

        try:
            keeper = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            keeper.connect(f"{KERNEL_DIR}/keeper")
            keeper.setblocking(False)
            poller.register(keeper.fileno(), zmq.POLLIN)
        except OSError:
            keeper = None

    def greet() -> None:
        """HELLO to the host, once: the kernel's IOPub has greeted us and our stdin connection is
        complete, or WELCOME_WAIT has passed (see the module's text)."""
        nonlocal greeted
        waited = time.monotonic() - started > WELCOME_WAIT
        if not greeted and (welcomed or waited) and (connected or waited):
            greeted = True
            outgoing.extend(encode(HELLO, [b"{}"]))

    signal.signal(signal.SIGTERM, lambda *_: stop(143))
    try:
        while True:
            greet()
            if session.get("keeper") and keeper is None and greeted:
                meet_keeper()
            if not claimed and ttl and time.monotonic() - started > ttl:  # pooled, and nobody took it
                stop(0)
            if (len(outgoing) < OUTGOING_BYTES) != reading:  # a flood waits in the kernel, not here
                reading = not reading
                for sock in sockets.values():
                    poller.register(sock, zmq.POLLIN) if reading else poller.unregister(sock)
            if bool(outgoing and claimed) != watching_out:  # wait for room on stdout only with bytes to write
                watching_out = bool(outgoing and claimed)
                poller.register(stdout, zmq.POLLOUT) if watching_out else poller.unregister(stdout)
            events = dict(poller.poll(100))
            if handshake is not None and events.get(handshake):  # the stdin connection is complete
                connected = True
                poller.unregister(handshake)
                sockets[CHANNELS.index("stdin")].disable_monitor()
                handshake.close(0)
                handshake = None
            if kernel.poll() is not None:
                code = kernel.returncode
                while outgoing and claimed:  # what the kernel said last still goes out
                    try:
                        del outgoing[:os.write(stdout, outgoing)]
                    except BlockingIOError:
                        time.sleep(0.01)
                    except OSError:
                        break
                sys.exit(128 - code if code < 0 else code)
            for sock, index in by_socket.items():
                if events.get(sock):
                    while len(outgoing) < OUTGOING_BYTES:
                        try:
                            frames = sock.recv_multipart(zmq.NOBLOCK, copy=True)
                        except zmq.Again:
                            break
                        if index == CHANNELS.index("iopub") and not greeted:
                            welcomed = True
                            greet()  # before this first IOPub message
                        outgoing += encode(index, frames)
            if events.get(stdin):  # bytes from the host, or the end of its stream
                try:
                    data = os.read(stdin, 1 << 20)
                except BlockingIOError:
                    data = None
                if data == b"":  # the host is gone
                    stop(0)
                if data:
                    decoder.feed(data)
            if keeper and events.get(keeper.fileno()):
                try:
                    data = keeper.recv(1 << 16)
                except BlockingIOError:
                    data = None
                if data:
                    outgoing += encode(KEEPER, [data])
                elif data == b"":  # the keeper ended: the kernel's end follows
                    poller.unregister(keeper.fileno())
                    keeper.close()
                    keeper = False
            for index, frames in inbox:
                if index == KEEPER:
                    keeper_out.extend(frames[0] if frames else b"")
                else:
                    sockets[index].send_multipart(frames)
            inbox.clear()
            if keeper and keeper_out:
                try:
                    del keeper_out[:keeper.send(keeper_out)]
                except BlockingIOError:
                    pass
            if outgoing and claimed:  # at once: a full pipe raises, and the next poll waits for room
                try:
                    del outgoing[:os.write(stdout, outgoing)]
                except BlockingIOError:
                    pass
    except SystemExit:
        raise
    except BaseException as exc:  # broken wire or pipe: the kernel must not outlive its relay
        sys.stderr.write(f"sandbox-kernel relay: {type(exc).__name__}: {exc}\n")
        stop(1)


SOURCE = open(__file__).read() if __name__ != "__main__" else ""
"""This file's source, as the container runs it: sent first on the stream, after its length in
12 decimal digits, and run by :data:`BOOTSTRAP`."""

BOOTSTRAP = ("import os\n"
             f"s = os.environ.pop({POOLED_SOURCE!r}, '')\n"
             "if s:\n"
             "    import base64\n"
             "    exec(compile(base64.b64decode(s), 'sandbox-kernel-relay', 'exec'))\n"
             "    raise SystemExit(0)\n"
             "def read(n):\n"
             "    b = b''\n"
             "    while len(b) < n:\n"
             "        c = os.read(0, n - len(b))\n"
             "        if not c:\n"
             "            raise SystemExit(0)\n"
             "        b += c\n"
             "    return b\n"
             "exec(compile(read(int(read(12))), 'sandbox-kernel-relay', 'exec'))\n")
"""The container's command (``python -c BOOTSTRAP``): reads the relay's source from stdin and
runs it, so the command line (``docker top``, ``ps``) stays short and the image needs no file of ours.
A pooled sandbox's relay (:func:`pooled_environment`) comes from its environment instead."""


def pooled_environment(session: dict) -> dict[str, str]:
    """The environment of a pooled sandbox's relay (see :mod:`sandbox_kernel.backends.pool`): its source
    and its session (``key``, ``argv``, ``launcher``, ``ttl``: seconds it waits to be claimed),
    as HELLO would carry them. The relay starts the kernel at once, writes nothing until a
    host's HELLO claims it, and ends if none comes within ``ttl``. Both variables are removed
    from the environment before anything else runs."""
    import base64

    return {POOLED_SOURCE: base64.b64encode(SOURCE.encode()).decode(), POOLED_SESSION: json.dumps(session)}


def preamble() -> bytes:
    """What the host sends first: the relay's source for :data:`BOOTSTRAP`."""
    source = SOURCE.encode()
    return b"%012d" % len(source) + source

if __name__ == "__main__":
    main()

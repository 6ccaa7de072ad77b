"""A kernel's ZMQ sockets that close and come back on the same ports, for
``tests/test_message_bound.py``: run as ``python -m tests.support.kernel_successor``.

Real libzmq on 127.0.0.1 on both sides: a :class:`SandboxKernelClient` connects to a kernel's
five sockets, watched by :class:`DropWatch`; the kernel's sockets close (as its process's do when
it is killed) and a successor binds the same ports and publishes on IOPub at once (as a promoted
checkpoint does). The client's IOPub is looked at every 5 ms, as an asyncio reader's wake-ups do,
and read as soon as the drop is reported. Prints ``read N early M`` and exits 0; libzmq aborting
the process (``Assertion failed: !_more (src/fq.cpp:80)``) is the failure the test looks for."""

from __future__ import annotations

import asyncio
import threading
import time

import zmq

from sandbox_kernel.backends.kernel_client.client import SandboxKernelClient
from sandbox_kernel.backends.kernel_client.message_bound import DropWatch

KINDS = {"shell": zmq.ROUTER, "control": zmq.ROUTER, "stdin": zmq.ROUTER, "iopub": zmq.PUB, "hb": zmq.REP}
FRAMES = [b"topic", b"<IDS|MSG>", b"x" * 200, b"{}", b"{}", b"{}"]


def bind(context: zmq.Context, ports: dict[str, int] | None = None) -> tuple[dict[str, zmq.Socket], dict[str, int]]:
    """A kernel's sockets, on free ports or on ``ports``; and the ports."""
    sockets = {}
    for name, kind in KINDS.items():
        sockets[name] = socket = context.socket(kind)
        socket.linger = 0
        for _ in range(400):  # a closed socket's port is free once libzmq's I/O thread closed it
            try:
                socket.bind(f"tcp://127.0.0.1:{ports[name] if ports else 0}")
                break
            except zmq.ZMQError:
                time.sleep(0.005)
    return sockets, {n: int(s.getsockopt(zmq.LAST_ENDPOINT).decode().rsplit(":", 1)[1]) for n, s in sockets.items()}


async def main() -> None:
    context = zmq.Context()
    sockets, ports = bind(context)
    client = SandboxKernelClient(max_message_bytes=1 << 20)
    client.load_connection_info({"transport": "tcp", "ip": "127.0.0.1", "key": "", "signature_scheme": "hmac-sha256",
                                 **{f"{n}_port": p for n, p in ports.items()}})
    client.start_channels(hb=False)
    iopub = zmq.Socket.shadow(client.iopub_channel.socket.underlying)
    dropped, early = asyncio.Event(), []

    def on_drop(name: str) -> None:
        if name == "iopub":  # a reader whose socket is ready takes what is there at once
            while True:
                try:
                    early.append(iopub.recv_multipart(zmq.NOBLOCK))
                except zmq.Again:
                    break
            dropped.set()

    watch = DropWatch(client, on_drop)
    watch.start()
    await asyncio.sleep(0.5)  # connected and subscribed
    for socket in sockets.values():  # the kernel dies
        socket.close(linger=0)
    sockets, _ = bind(context, ports)  # its successor
    stop = threading.Event()

    def publish() -> None:
        while not stop.is_set():
            sockets["iopub"].send_multipart(FRAMES)
            time.sleep(0.001)

    threading.Thread(target=publish, daemon=True).start()

    async def look() -> None:
        while not dropped.is_set():
            iopub.get(zmq.EVENTS)  # libzmq takes in its pending commands (the new connection's pipe)
            await asyncio.sleep(0.005)

    looking = asyncio.ensure_future(look())
    await asyncio.wait_for(dropped.wait(), 10)
    read = [await asyncio.wait_for(client.iopub_channel.socket.recv_multipart(), 10) for _ in range(200)]
    stop.set()
    looking.cancel()
    watch.stop()
    client.stop_channels()
    assert all(frames == FRAMES for frames in early + read)
    print(f"read {len(read)} early {len(early)}")


if __name__ == "__main__":
    asyncio.run(main())

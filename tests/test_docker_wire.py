"""The engine-API transport's wire (sandbox_kernel/backends/docker/inside.py) and the engine's
multiplexed attach stream (bridge.py), read incrementally as any split of the bytes arrives."""

from __future__ import annotations

import asyncio
import socket
import struct
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jupyter_client.session import Session

from sandbox_kernel.backends.docker.bridge import HELD_BYTES, READ_SIZE, AttachBridge, Demux
from sandbox_kernel.backends.docker.inside import CHANNELS, HELLO, Decoder, encode
from sandbox_kernel.backends.kernel_client.client import SandboxKernelClient
from tests.support.fuzz import examples

pytestmark = pytest.mark.unit

records = st.lists(st.tuples(st.sampled_from([*range(len(CHANNELS)), HELLO]),
                             st.lists(st.binary(max_size=64), max_size=4)), max_size=8)


def feed_in_pieces(feed, data: bytes, cuts: list[int]) -> None:
    start = 0
    for cut in sorted(c % (len(data) + 1) for c in cuts):
        feed(data[start:cut])
        start = max(start, cut)
    feed(data[start:])


@settings(max_examples=examples(200), deadline=None)
@given(records, st.lists(st.integers(0, 10_000), max_size=12))
def test_records_come_out_as_they_went_in_whatever_the_pieces(sent, cuts):
    got = []
    feed_in_pieces(Decoder(lambda c, f: got.append((c, f))).feed, b"".join(encode(c, f) for c, f in sent), cuts)
    assert got == [(c, list(f)) for c, f in sent]


@settings(max_examples=examples(100), deadline=None)
@given(st.lists(st.integers(0, 10_000), max_size=12))
def test_a_frame_over_the_bound_is_skipped_and_reported_and_the_next_record_arrives(cuts):
    got, dropped = [], []
    data = encode(0, [b"small"]) + encode(3, [b"h", b"x" * 5000]) + encode(1, [b"after"])
    feed_in_pieces(Decoder(lambda c, f: got.append((c, f)), dropped.append, max_frame=1000).feed, data, cuts)
    assert got == [(0, [b"small"]), (1, [b"after"])] and dropped == [3]


def test_bytes_that_are_not_the_wire_are_refused():
    with pytest.raises(ValueError, match="not the relay's wire"):
        Decoder(lambda c, f: None).feed(b"HTTP/1.1 200 OK\r\n")


@given(st.lists(st.tuples(st.sampled_from([1, 2]), st.binary(max_size=50)), max_size=10),
       st.lists(st.integers(0, 2000), max_size=8))
def test_the_attach_stream_is_split_into_stdout_and_stderr(pieces, cuts):
    out, err = bytearray(), bytearray()
    data = b"".join(struct.pack(">BxxxI", stream, len(p)) + p for stream, p in pieces)
    feed_in_pieces(Demux(out.extend, err.extend).feed, data, cuts)
    assert bytes(out) == b"".join(p for s, p in pieces if s == 1)
    assert bytes(err) == b"".join(p for s, p in pieces if s == 2)


def test_a_client_that_reads_nothing_stops_the_bridge_reading_the_stream_near_held_bytes():
    """The api transport's bridge (this process's side of the engine's attach stream) holds at
    most HELD_BYTES beyond one message for a client that does not read: libzmq's queue towards
    the client's SUB counts messages (64 + the SUB's high-water mark, each up to the frame
    bound), so the bridge counts each IOPub message's bytes until the client read it. The
    engine's side is a socket pair here, carrying the attach stream's multiplexed stdout; with
    the bytes released when ZMQ took a message instead, all 40 messages of 2 MiB (80 MiB) were
    read from it at once."""
    asyncio.run(_client_that_reads_late())


async def _client_that_reads_late() -> None:
    host, engine = socket.socketpair()
    for sock in (host, engine):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    bridge = AttachBridge(host, argv=["kernel"], launcher=None, max_frame=4 * 1024**2,
                          on_drop=lambda channel: None, on_end=lambda: None)
    bridge.start()
    client = SandboxKernelClient(context=bridge.context, max_message_bytes=4 * 1024**2, iopub_taken=bridge.taken)
    client.load_connection_info(bridge.connection)
    client.start_channels(shell=False, stdin=False, control=False, hb=False)
    session = Session(key=bridge.key.encode())
    size, count, written = 2 * 1024**2, 40, [0]

    def sandbox() -> None:  # the relay's stdout, as the engine multiplexes it
        stream = [encode(HELLO, [b"{}"])]
        for i in range(count):
            msg = session.msg("display_data", {"data": {"text/plain": f"{i} " + "x" * size}, "metadata": {}})
            stream.append(encode(CHANNELS.index("iopub"), [b"display_data", *session.serialize(msg)]))
        for record in stream:
            for start in range(0, len(record), 1 << 16):
                piece = record[start:start + (1 << 16)]
                engine.sendall(struct.pack(">BxxxI", 1, len(piece)) + piece)
                written[0] += len(piece)

    try:
        writer = threading.Thread(target=sandbox, daemon=True)
        writer.start()
        for _ in range(1000):  # until the SUB's subscription reached the bridge (10 s at most)
            if bridge._subscribed:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(1.5)  # the client reads nothing meanwhile
        assert written[0] < HELD_BYTES + 2 * size + READ_SIZE, f"{written[0] >> 20} MiB read from the stream"
        got = []
        while len(got) < count:  # now it reads: every message arrives, in order, and the rest is read
            msg = await client.get_iopub_msg(timeout=10)
            got.append(int(msg["content"]["data"]["text/plain"].split()[0]))
        assert got == list(range(count))
        writer.join(10)
        assert bridge._held_bytes == 0
    finally:
        client.stop_channels()
        bridge.close()
        engine.close()


def test_a_request_sent_after_the_bridge_closed_raises_instead_of_blocking():
    """The bridge closes its inproc endpoints when the container's stream ends (the sandbox
    died). libzmq does not reconnect inproc, so a DEALER connected to them has no peer, and
    jupyter_client's send (on a blocking shadow of the socket, in the event loop's thread) blocked
    for ever: a control request sent as a user's sandbox was OOM-killed froze the whole test
    worker, its death watch and pytest-timeout's alarm included (a CI run hung). Now each of
    the client's sends gives up after SEND_TIMEOUT_MS with one SandboxError. The send runs in a
    thread here, so the old behaviour fails this test instead of hanging it."""
    import time

    from sandbox_kernel.backends.kernel_client.client import SEND_TIMEOUT_MS
    from sandbox_kernel.core.errors import SandboxError

    async def scenario() -> tuple[SandboxKernelClient, AttachBridge, socket.socket]:
        host, engine = socket.socketpair()
        bridge = AttachBridge(host, argv=["kernel"], launcher=None, max_frame=1024**2,
                              on_drop=lambda channel: None, on_end=lambda: None)
        bridge.start()
        client = SandboxKernelClient(context=bridge.context)
        client.load_connection_info(bridge.connection)
        client.start_channels(shell=True, stdin=False, control=True, hb=False)
        await asyncio.sleep(0.2)
        bridge.close()  # as when the container's stream ends
        await asyncio.sleep(0.2)
        return client, bridge, engine

    client, bridge, engine = asyncio.run(scenario())
    raised: list[BaseException] = []

    def send() -> None:
        try:
            client.control_channel.send(client.session.msg("interrupt_request", {}))
        except BaseException as exc:  # noqa: BLE001 - what the send raised is the result
            raised.append(exc)

    started = time.monotonic()
    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    sender.join(SEND_TIMEOUT_MS / 1000 + 10)
    try:
        assert not sender.is_alive(), "the send to a closed bridge still blocks"
        assert time.monotonic() - started < SEND_TIMEOUT_MS / 1000 + 5
        assert len(raised) == 1 and isinstance(raised[0], SandboxError), raised
        assert str(raised[0]) == (f"The sandbox's kernel did not take interrupt_request within {SEND_TIMEOUT_MS / 1000:g} s: "
                                  "its connection is gone (the sandbox stopped) or it reads nothing.")
    finally:
        if not sender.is_alive():
            client.stop_channels()
        engine.close()

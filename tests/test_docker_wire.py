"""The engine-API transport's wire (sandbox_kernel/backends/docker/inside.py) and the engine's
multiplexed attach stream (bridge.py), read incrementally as any split of the bytes arrives."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sandbox_kernel.backends.docker.bridge import _Demux
from sandbox_kernel.backends.docker.inside import CHANNELS, HELLO, Decoder, encode

records = st.lists(st.tuples(st.sampled_from([*range(len(CHANNELS)), HELLO]),
                             st.lists(st.binary(max_size=64), max_size=4)), max_size=8)


def feed_in_pieces(feed, data: bytes, cuts: list[int]) -> None:
    start = 0
    for cut in sorted(c % (len(data) + 1) for c in cuts):
        feed(data[start:cut])
        start = max(start, cut)
    feed(data[start:])


@settings(max_examples=200, deadline=None)
@given(records, st.lists(st.integers(0, 10_000), max_size=12))
def test_records_come_out_as_they_went_in_whatever_the_pieces(sent, cuts):
    got = []
    feed_in_pieces(Decoder(lambda c, f: got.append((c, f))).feed, b"".join(encode(c, f) for c, f in sent), cuts)
    assert got == [(c, list(f)) for c, f in sent]


@settings(max_examples=100, deadline=None)
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
    feed_in_pieces(_Demux(out.extend, err.extend).feed, data, cuts)
    assert bytes(out) == b"".join(p for s, p in pieces if s == 1)
    assert bytes(err) == b"".join(p for s, p in pieces if s == 2)

"""The host's side of variable transfer, in process (issue 18): what decodes, and what forged
data is refused before it becomes an object."""

from __future__ import annotations

import io
import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.ipc
import pytest

from sandbox_kernel.core.errors import TransferError
from sandbox_kernel.session.transfer import check_name
from sandbox_kernel.session.transfer.codec import decode, encode, kind_of

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("value", [None, True, 3, 2.5, "text", [1, [2, {"a": None}]], {"k": [1.5, "x"]}, b"\x00\xff"])
def test_plain_values_round_trip(value):
    assert decode(*encode(value, "v"), "v") == value


def test_nan_inf_and_tuples():
    back = decode(*encode({"n": float("nan"), "i": -math.inf, "t": (1, 2)}, "v"), "v")
    assert math.isnan(back["n"]) and back["i"] == -math.inf and back["t"] == [1, 2]


@pytest.mark.parametrize("array", [np.arange(6, dtype=np.float32).reshape(2, 3), np.array([True, False]),
                                   np.array(["a", "bcd"]), np.array(["2026-01-01"], dtype="datetime64[ns]"),
                                   np.array([1 + 2j]), np.array([5], dtype="timedelta64[s]")])
def test_arrays_round_trip(array):
    back = decode(*encode(array, "a"), "a")
    assert back.dtype == array.dtype and back.shape == array.shape and (back == array).all()


def test_frames_and_series_round_trip():
    df = pd.DataFrame({"a": [1, 2], "b": ["x", None]}, index=pd.MultiIndex.from_tuples([("p", 1), ("q", 2)],
                                                                                         names=["k", "n"]))
    pd.testing.assert_frame_equal(decode(*encode(df, "df"), "df"), df)
    series = pd.Series([1.0, 2.0], name=("tuple", "name"))
    back = decode(*encode(series, "s"), "s")
    pd.testing.assert_series_equal(back, series)


@pytest.mark.parametrize("value", [object(), {1: "int key"}, {"a": object()}, np.array([None], dtype=object),
                                   np.zeros(2, dtype=[("x", "i4")]), iter([])])
def test_other_types_are_one_line(value):
    assert kind_of(value) is None
    with pytest.raises(TransferError, match="which does not travel between host and sandbox; what travels: None"):
        encode(value, "v")


def npy(header_shape, dtype="<f8", body=b""):
    stream = io.BytesIO()
    np.lib.format.write_array_header_1_0(stream, {"descr": dtype, "fortran_order": False, "shape": header_shape})
    return stream.getvalue() + body


@pytest.mark.parametrize("data", [npy((10**12,), body=bytes(16)), npy((2,), body=bytes(8)), npy((1,), "|O", bytes(8)),
                                  b"not npy at all", npy((2,), body=bytes(24))])
def test_forged_npy_is_refused(data):
    with pytest.raises(TransferError, match="is not valid npy data"):
        decode("npy", data, "v")


def arrow_bytes(table):
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytearray(sink.getvalue().to_pybytes())


def test_an_arrow_batch_claiming_a_huge_length_is_refused():
    data = arrow_bytes(pa.table({"a": pa.array([1, 2, 3])}))
    at = data.find((3).to_bytes(8, "little"))
    data[at:at + 8] = (2**40).to_bytes(8, "little")
    with pytest.raises(TransferError, match="is not valid arrow data"):
        decode("arrow", bytes(data), "v")


def test_arrow_extension_types_are_refused_registered_or_not():
    storage = pa.array([1, 2])
    field = pa.field("a", pa.int64(), metadata={b"ARROW:extension:name": b"evil.pickled",
                                                b"ARROW:extension:metadata": b"cos\nsystem\n"})
    data = arrow_bytes(pa.Table.from_arrays([storage], schema=pa.schema([field])))
    with pytest.raises(TransferError, match="extension type 'evil.pickled', which is refused"):
        decode("arrow", bytes(data), "v")
    nested = pa.field("s", pa.struct([field]))
    data = arrow_bytes(pa.Table.from_arrays([pa.StructArray.from_arrays([storage], fields=[field])],
                                            schema=pa.schema([nested])))
    with pytest.raises(TransferError, match="refused"):
        decode("arrow", bytes(data), "v")
    uuid = pa.uuid()  # a canonical extension type pyarrow knows
    data = arrow_bytes(pa.table({"u": pa.ExtensionArray.from_storage(uuid, pa.array([bytes(16)], pa.binary(16)))}))
    with pytest.raises(TransferError, match="refused"):
        decode("arrow", bytes(data), "v")


@pytest.mark.parametrize("raw", [b"[" * 100_000, b"{\"a\": 1"])
def test_bad_json_is_one_line(raw):
    with pytest.raises(TransferError, match="is not valid json data"):
        decode("json", raw, "v")


def test_unknown_kind_and_bad_names():
    with pytest.raises(TransferError, match="unknown kind 'pickle'"):
        decode("pickle", b"\x80\x04.", "v")
    for bad in ("1a", "a-b", "class", "", "a.b"):
        with pytest.raises(TransferError, match="is not a variable name"):
            check_name(bad)

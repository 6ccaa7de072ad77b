"""Values as data-only bytes, and back: what ``-i``/``-o``, ``push``/``pull`` and
``Sandbox.put``/``get`` carry between host and sandbox. Never pickle, on either side.

========================  ========  ==================================================
value                     kind      format
========================  ========  ==================================================
None, bool, int, float    ``json``  JSON (NaN and ±inf as Python's json writes them);
(nan/inf), str, and                 tuples come back as lists
lists, tuples, dicts
with str keys of those
bytes, bytearray          ``bytes`` the raw bytes (bytes come back)
numpy.ndarray (numeric,   ``npy``   ``.npy``, read with ``allow_pickle=False`` after its
bool, str, datetime,                header is checked: no object dtype, and exactly as
timedelta dtypes)                   many bytes as its shape says
pandas.DataFrame          ``arrow`` Arrow IPC stream (pyarrow ≥ 23.0.1), dtypes, index and
pandas.Series             ``series``column names kept; extension types refused
========================  ========  ==================================================

:func:`decode` is the host's side of the boundary: it reads only these formats, from at most
``max_bytes`` bytes it already holds, and raises :class:`TransferError` (one line) for
anything else.
"""

from __future__ import annotations

import io
import json
import math
import re
from typing import Any

from ...core.errors import TransferError

TYPES = ("None, bool, int, float, str, lists/tuples/dicts (str keys) of those, bytes, "
         "numpy arrays (numeric, bool, str, datetime dtypes), pandas DataFrame and Series")
"""The types that travel, as one line names them."""

ARRAY_KINDS = "biufcUSMm"
"""numpy dtype kinds that travel: bool, ints, floats, complex, str, bytes, datetime, timedelta."""

PYARROW_HINT = "pip install 'sandbox-kernel[data]' (pyarrow>=23.0.1)"


def type_name(value: Any) -> str:
    cls = type(value)
    return cls.__name__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"


def unsupported(value: Any, name: str) -> TransferError:
    return TransferError(f"{name!r} has type {type_name(value)}, which does not travel between host and sandbox; "
                         f"what travels: {TYPES}.")


def kind_of(value: Any) -> str | None:
    """The kind ``value`` travels as (see the module's table), or None."""
    if isinstance(value, (bytes, bytearray)):
        return "bytes"
    if _is_json(value):
        return "json"
    module = type(value).__module__.split(".")[0]
    if module == "numpy" and type(value).__name__ == "ndarray":
        return "npy" if value.dtype.kind in ARRAY_KINDS and not value.dtype.fields else None
    if module == "pandas":
        return {"DataFrame": "arrow", "Series": "series"}.get(type(value).__name__)
    return None


def _is_json(value, depth=0) -> bool:  # no annotation the sandbox lacks: it runs this source too
    """Whether ``value`` is plain JSON data (None, bool, int, float, str, lists, tuples, dicts
    with str keys), at most 100 deep."""
    if depth > 100:
        return False
    if value is None or type(value) in (bool, int, float, str):
        return True
    if type(value) in (list, tuple):
        return all(_is_json(v, depth + 1) for v in value)
    if type(value) is dict:
        return all(type(k) is str and _is_json(v, depth + 1) for k, v in value.items())
    return False


def encode(value: Any, name: str) -> tuple[str, bytes]:
    """``(kind, data)`` for ``value`` (host side; the sandbox runs the same rules in
    :mod:`.inside`).

    Raises:
        TransferError: a type that does not travel (the line names it and the ones that do).
    """
    kind = kind_of(value)
    if kind is None:
        raise unsupported(value, name)
    if kind == "bytes":
        return kind, bytes(value)
    if kind == "json":
        return kind, json.dumps(value).encode()
    if kind == "npy":
        import numpy as np

        buffer = io.BytesIO()
        np.save(buffer, value, allow_pickle=False)
        return kind, buffer.getvalue()
    return kind, _arrow_stream(_pyarrow(), value, kind)


def _arrow_stream(pa, value, kind) -> bytes:  # no annotation the sandbox lacks: it runs this source too
    """A DataFrame (``kind`` "arrow") or a Series ("series", as one column ``__series__`` whose
    name is kept in the schema's metadata) as Arrow IPC stream bytes, with pyarrow ``pa``."""
    table = pa.Table.from_pandas(value.to_frame(name="__series__") if kind == "series" else value)
    if kind == "series":
        table = table.replace_schema_metadata({**(table.schema.metadata or {}),
                                               b"sandbox_kernel.series_name": json.dumps(value.name).encode()})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def decode(kind: str, data: bytes, name: str) -> Any:
    """The host object for ``data`` of ``kind``, built from data only.

    Raises:
        TransferError: an unknown kind, or data that is not a valid value of its kind (a
            forged ``.npy`` header, an Arrow stream with extension types or bad lengths, ...).
    """
    try:
        if kind == "bytes":
            return bytes(data)
        if kind == "json":
            value = json.loads(data)
            if not _is_json(value):
                raise ValueError("not plain JSON values")
            return value
        if kind == "npy":
            return _read_npy(data)
        if kind in ("arrow", "series"):
            return _read_arrow(data, kind)
    except TransferError:
        raise
    except (ValueError, TypeError, OverflowError, RecursionError, UnicodeDecodeError) as exc:
        raise TransferError(f"{name!r} from the sandbox is not valid {kind} data ({exc}); nothing was set.") from None
    except Exception as exc:  # pyarrow.ArrowException and friends: the data is not what it claims
        raise TransferError(f"{name!r} from the sandbox is not valid {kind} data ({type(exc).__name__}: {exc}); "
                            "nothing was set.") from None
    raise TransferError(f"{name!r} came back as an unknown kind {kind!r}; nothing was set.")


def _read_npy(data: bytes) -> Any:
    """An array from ``.npy`` bytes, after checking the header against the bytes present."""
    import numpy as np
    from numpy.lib import format as npy

    stream = io.BytesIO(data)
    version = npy.read_magic(stream)
    read_header = {(1, 0): npy.read_array_header_1_0, (2, 0): npy.read_array_header_2_0}.get(version)
    if read_header is None:
        raise ValueError(f"unsupported .npy version {version}")
    shape, _, dtype = read_header(stream, max_header_size=10_000)
    if dtype.hasobject or dtype.kind not in ARRAY_KINDS or dtype.fields:
        raise ValueError(f"dtype {dtype} does not travel")
    count = math.prod(shape)
    if count * dtype.itemsize != len(data) - stream.tell():
        raise ValueError(f"its header claims {count} items of {dtype.itemsize} bytes, "
                         f"but {len(data) - stream.tell()} bytes follow")
    return np.load(io.BytesIO(data), allow_pickle=False)


def _read_arrow(data: bytes, kind: str) -> Any:
    pa = _pyarrow()
    reader = pa.ipc.open_stream(pa.BufferReader(data))
    for field in reader.schema:
        _refuse_extensions(field, field.name)
    table = reader.read_all()
    table.validate(full=True)
    frame = table.to_pandas()
    if kind == "series":
        series = frame["__series__"]
        raw = (table.schema.metadata or {}).get(b"sandbox_kernel.series_name", b"null")
        name = json.loads(raw)
        if not _is_json(name):
            raise ValueError("a Series name that is not a plain value")
        series.name = _hashable(name)
        return series
    return frame


def _hashable(value: Any) -> Any:
    """A JSON value with its lists as tuples (a Series name must be hashable)."""
    return tuple(_hashable(v) for v in value) if isinstance(value, list) else value


def _refuse_extensions(field: Any, name: str) -> None:
    """Refuse an extension type anywhere in ``field``: a registered one (an ``ExtensionType``)
    or an unregistered one, which pyarrow reads as its storage with ``ARROW:extension:name``
    in the field's metadata."""
    pa = _pyarrow()
    kind = field.type
    tagged = (field.metadata or {}).get(b"ARROW:extension:name")
    if isinstance(kind, pa.BaseExtensionType) or tagged is not None:
        label = kind if isinstance(kind, pa.BaseExtensionType) else tagged.decode("utf-8", "replace")
        raise TransferError(f"column {name!r} from the sandbox has the Arrow extension type {label!r}, which is "
                            "refused; nothing was set.")
    for i in range(getattr(kind, "num_fields", 0)):
        _refuse_extensions(kind.field(i), name)
    for attribute in ("value_field", "key_field", "item_field"):
        if (inner := getattr(kind, attribute, None)) is not None:
            _refuse_extensions(inner, name)


def _pyarrow() -> Any:
    try:
        import pyarrow as pa
        import pyarrow.ipc  # noqa: F401
    except ImportError:
        raise TransferError(f"DataFrames and Series travel as Arrow IPC, which needs pyarrow on the host: "
                            f"{PYARROW_HINT}.") from None
    if tuple(int(part) for part in re.findall(r"\d+", pa.__version__)[:3]) < (23, 0, 1):
        raise TransferError(f"pyarrow {pa.__version__} on the host is too old to read sandbox data safely "
                            f"(CVE-2023-47248, CVE-2026-25087): {PYARROW_HINT}.")
    return pa

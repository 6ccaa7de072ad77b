"""What runs in the sandbox to take in or give out one variable (sent as code: the sandbox
needs nothing of this project). The sandbox is not trusted: the host checks everything it
reads (:func:`~sandbox_kernel.session.transfer.codec.decode`); these snippets only spare the
sandbox's user from pickle too.

Each snippet prints one line, ``MARKER`` + JSON: ``{"kind", "size"}`` or ``{"error", ...}``.
"""

from __future__ import annotations

import inspect
import json
import textwrap

from .codec import _arrow_stream, _is_json

MARKER = "@@sandbox-transfer@@ "

_COMMON = r'''
def _sandbox_transfer(name, path, kind, mode, marker):
    import io, json, os
    def say(**answer):
        print(marker + json.dumps(answer), flush=True)
    ns = globals()
    if mode == "in":
        with open(path, "rb") as f:
            data = f.read()
        os.remove(path)
        if kind == "bytes":
            value = data
        elif kind == "json":
            value = json.loads(data)
        elif kind == "npy":
            import numpy as np
            value = np.load(io.BytesIO(data), allow_pickle=False)
        else:
            try:
                import pyarrow as pa, pyarrow.ipc
            except ImportError:
                return say(error="pyarrow")
            table = pa.ipc.open_stream(pa.BufferReader(data)).read_all()
            value = table.to_pandas()
            if kind == "series":
                meta = table.schema.metadata or {}
                value = value["__series__"]
                label = json.loads(meta.get(b"sandbox_kernel.series_name", b"null"))
                hashable = lambda v: tuple(hashable(x) for x in v) if isinstance(v, list) else v
                value.name = hashable(label)
        ns[name] = value
        return say(kind=kind, size=len(data))
    if name not in ns:
        return say(error="missing")
    value = ns[name]
    # HOST RULES: codec._is_json and codec._arrow_stream, the host's own code
    cls = type(value)
    module = cls.__module__.split(".")[0]
    if isinstance(value, (bytes, bytearray)):
        kind, data = "bytes", bytes(value)
    elif _is_json(value):
        kind, data = "json", json.dumps(value).encode()
    elif module == "numpy" and cls.__name__ == "ndarray" and value.dtype.kind in "biufcUSMm" and not value.dtype.fields:
        import numpy as np
        buffer = io.BytesIO()
        np.save(buffer, value, allow_pickle=False)
        kind, data = "npy", buffer.getvalue()
    elif module == "pandas" and cls.__name__ in ("DataFrame", "Series"):
        try:
            import pyarrow as pa, pyarrow.ipc
        except ImportError:
            return say(error="pyarrow")
        kind = "arrow" if cls.__name__ == "DataFrame" else "series"
        data = _arrow_stream(pa, value, kind)
    else:
        name = cls.__name__ if cls.__module__ == "builtins" else cls.__module__ + "." + cls.__qualname__
        return say(error="type", type=name)
    with open(path, "wb") as f:
        f.write(data)
    say(kind=kind, size=len(data))
'''


_COMMON = _COMMON.replace("    # HOST RULES: codec._is_json and codec._arrow_stream, the host's own code\n",
                          "".join(textwrap.indent(inspect.getsource(f), "    ") for f in (_is_json, _arrow_stream)))


def snippet(name: str, path: str, mode: str, kind: str = "") -> str:
    """The code that moves ``name`` in (``mode="in"``: from ``path``, of ``kind``) or out
    (to ``path``) in the sandbox's namespace, and reports one marker line."""
    args = ", ".join(json.dumps(a) for a in (name, path, kind, mode, MARKER))
    return f"{_COMMON}\ntry:\n    _sandbox_transfer({args})\nfinally:\n    del _sandbox_transfer\n"


def cleanup(path: str) -> str:
    """The code that removes ``path`` in the sandbox, if it is there."""
    return f"import os as _os\ntry:\n    _os.remove({json.dumps(path)})\nexcept OSError:\n    pass\ndel _os\n"

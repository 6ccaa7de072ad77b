"""``%%sandbox -i/-o`` and ``%sandbox push/pull`` through a real ``python3`` host kernel (issue 18):
round trips of each supported type, equality checked on the host; hostile data from the sandbox
(no code runs on the host, no file is left, RSS stays bounded); bad input gives one line and the
session goes on. On local and docker (the docker image has pyarrow).
"""

from __future__ import annotations

import pytest

from tests.kernels import run, stdout
from tests.support.backends import prepared

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(600)]


@pytest.fixture(scope="module", params=["local", "docker"])
def host(request):
    from tests.support.host import host_kernel

    prepared(request.param)
    with host_kernel(request.param) as (_, kc):
        reply, outputs = run(kc, f"%%sandbox --backend {request.param} --name t\n1", timeout=400)
        assert reply["status"] == "ok", outputs
        yield kc


def ok(kc, code: str) -> str:
    reply, outputs = run(kc, code, timeout=120)
    assert reply["status"] == "ok", (reply, [m["content"] for m in outputs])
    return stdout(outputs)


def failure(kc, code: str) -> str:
    """The one-line error of a failed cell."""
    reply, outputs = run(kc, code, timeout=120)
    assert reply["status"] == "error"
    return f"{reply['ename']}: {reply['evalue']}"


ROUND_TRIP = '''
import numpy as np, pandas as pd, math
df = pd.DataFrame({"a": np.arange(5, dtype="int32"), "b": [0.5, float("nan"), 2.0, 3.0, 4.0],
                   "c": list("vwxyz"), "when": pd.date_range("2026-01-01", periods=5, tz="UTC")},
                  index=pd.date_range("2025-12-01", periods=5, name="day"))
series = pd.Series([1.5, 2.5], index=["p", "q"], name="s")
arr = np.linspace(0, 1, 7, dtype=np.float32).reshape(7, 1)
texts = np.array(["a", "bc"]); stamps = np.array(["2026-01-01", "2026-02-01"], dtype="datetime64[D]")
nested = {"a": [1, 2.5, None, True, {"deep": {"er": ["x"]}}], "nan": float("nan"), "inf": -math.inf}
raw = bytes(range(256))
'''


def test_each_supported_type_round_trips(host):
    ok(host, ROUND_TRIP)
    names = "df,series,arr,texts,stamps,nested,raw"
    ok(host, f"%%sandbox --name t -i {names} -o df2 -o series2,arr2,texts2,stamps2,nested2,raw2\n"
             "df2, series2, arr2, texts2, stamps2, nested2, raw2 = df, series, arr, texts, stamps, nested, raw")
    out = ok(host, "pd.testing.assert_frame_equal(df2, df, check_freq=False)\n"
                   "pd.testing.assert_series_equal(series2, series)\n"
                   "assert arr2.dtype == np.float32 and arr2.shape == (7, 1) and (arr2 == arr).all()\n"
                   "assert (texts2 == texts).all() and (stamps2 == stamps).all() and stamps2.dtype == stamps.dtype\n"
                   "assert math.isnan(nested2.pop('nan')) and nested2 == {k: v for k, v in nested.items() if k != 'nan'}\n"
                   "assert raw2 == raw and type(raw2) is bytes\n"
                   "print(type(df2).__name__, type(series2).__name__, df2.index.name)")
    assert out == "DataFrame Series day\n"


def test_push_and_pull_outside_a_cell(host):
    ok(host, "answer = {'x': [1, 2]}")
    assert ok(host, "%sandbox push answer --name t") == "Pushed answer to session 't'.\n"
    ok(host, "%%sandbox --name t\nanswer['y'] = 3")
    assert ok(host, "%sandbox pull answer --name t") == "Pulled answer from session 't'.\n"
    assert ok(host, "print(answer)") == "{'x': [1, 2], 'y': 3}\n"


def test_a_failed_cell_brings_nothing_back(host):
    ok(host, "kept = 'host'")
    reply, outputs = run(host, "%%sandbox --name t -o kept\nkept = 'sandbox'\n1/0", timeout=60)
    assert reply["status"] == "error" and reply["ename"] == "ZeroDivisionError"
    assert "the cell failed, so nothing was brought back" in stdout(outputs, "stderr")
    assert ok(host, "print(kept)") == "host\n"


@pytest.mark.parametrize("line, message", [
    ("%%sandbox --name t -i missing_on_host\n1", "'missing_on_host' is not defined on the host."),
    ("%%sandbox --name t -o missing_in_sandbox\n1", "'missing_in_sandbox' is not defined in the sandbox."),
    ("%%sandbox --name t -o 1bad\n1", "'1bad' is not a variable name (a Python identifier)."),
    ("%%sandbox --name t -i lock\n1", "'lock' has type _thread.lock, which does not travel"),
    ("%%sandbox --name t -o gen\ngen = (i for i in [])", "'gen' has type generator, which does not travel"),
    ("%%sandbox --name t -o objs\nimport numpy as np\nobjs = np.array([object()])",
     "'objs' has type numpy.ndarray, which does not travel"),
])
def test_bad_input_is_one_line_and_the_session_goes_on(host, line, message):
    ok(host, "import threading\nlock = threading.Lock()")
    error = failure(host, line)
    assert message in error and "\n" not in error
    assert ok(host, "%%sandbox --name t\nprint('still here')") == "still here\n"


def test_the_transfer_bound(host):
    ok(host, "%config SandboxMagics.max_transfer_bytes = 1000\nbig = bytes(5000)")
    try:
        error = failure(host, "%%sandbox --name t -i big\n1")
        assert "'big' is 5,000 bytes encoded, over the transfer bound of 1,000 bytes" in error
        assert "SandboxMagics.max_transfer_bytes" in error
        error = failure(host, "%%sandbox --name t -o huge\nhuge = bytes(10**6)")
        assert "over the transfer bound of 1,000 bytes" in error
    finally:
        ok(host, "%config SandboxMagics.max_transfer_bytes = '256m'")


HOSTILE = {
    # a value whose pickle would run code: it is not a type that travels
    "reduce": ("class Evil:\n    def __reduce__(self):\n        return (print, ('PWNED',))\nvalue = Evil()",
               "has type __main__.Evil, which does not travel"),
    # the sandbox replaces the snippet's writer: a .npy header that claims dtype object
    "npy-object": ("import numpy as np, io\nb = io.BytesIO()\nnp.save(b, np.array([print], dtype=object), "
                   "allow_pickle=True)\nforged = ('npy', b.getvalue())", "is not valid npy data"),
    # a .npy header claiming a shape far larger than its bytes
    "npy-shape": ("import numpy as np, io\nb = io.BytesIO()\nnp.save(b, np.zeros(2))\n"
                  "data = b.getvalue().replace(b'(2,)', b'(10000000000,)'.ljust(4))\n"
                  "h = np.lib.format.header_data_from_array_1_0(np.zeros(2)); h['shape'] = (10**10,)\n"
                  "b2 = io.BytesIO(); np.lib.format.write_array_header_1_0(b2, h)\n"
                  "forged = ('npy', b2.getvalue() + np.zeros(2).tobytes())", "is not valid npy data"),
    # an Arrow stream whose record batch claims a huge length
    "arrow-length": ("import pyarrow as pa\nimport pyarrow.ipc\nt = pa.table({'a': pa.array([1, 2, 3])})\n"
                     "s = pa.BufferOutputStream()\nw = pa.ipc.new_stream(s, t.schema); w.write_table(t); w.close()\n"
                     "d = bytearray(s.getvalue().to_pybytes())\ni = d.find((3).to_bytes(8, 'little'))\n"
                     "d[i:i + 8] = (2**40).to_bytes(8, 'little')\nforged = ('arrow', bytes(d))",
                     "is not valid arrow data"),
    # an extension type (pyarrow < 14.0.1 unpickled those)
    "arrow-extension": ("import pyarrow as pa\nimport pyarrow.ipc\nclass T(pa.ExtensionType):\n"
                        "    def __init__(self):\n        super().__init__(pa.int64(), 'evil.type')\n"
                        "    def __arrow_ext_serialize__(self):\n        return b'cos\\nsystem\\n(S\"touch /tmp/pwned\"\\ntR.'\n"
                        "    @classmethod\n    def __arrow_ext_deserialize__(cls, storage, serialized):\n        return T()\n"
                        "pa.register_extension_type(T())\n"
                        "t = pa.table({'a': pa.ExtensionArray.from_storage(T(), pa.array([1]))})\n"
                        "s = pa.BufferOutputStream()\nw = pa.ipc.new_stream(s, t.schema); w.write_table(t); w.close()\n"
                        "forged = ('arrow', s.getvalue().to_pybytes())", "refused"),
}

FORGE = ("_real = open\n"  # the sandbox's own open() lies: the transfer snippet writes the forged bytes
         "import json\n"
         "def _forging_open(path, mode='r', *a, **k):\n"
         "    f = _real(path, mode, *a, **k)\n"
         "    if str(path).startswith('.sandbox-transfer-') and 'w' in mode:\n"
         "        f.write(forged[1]); f.flush()\n"
         "        class Sink:\n"
         "            def __enter__(s): return s\n"
         "            def __exit__(s, *e): f.close()\n"
         "            def write(s, data): return len(data)\n"
         "        return Sink()\n"
         "    return f\n"
         "open = _forging_open\n"  # a global of the namespace the snippet runs in
         "_real_dumps = json.dumps\n"
         "json.dumps = lambda obj, *a, **k: _real_dumps({**obj, 'kind': forged[0], 'size': len(forged[1])} "
         "if isinstance(obj, dict) and 'kind' in obj else obj, *a, **k)\n")
UNFORGE = "import json\ndel open\njson.dumps = _real_dumps"


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_data_from_the_sandbox_runs_nothing_and_sets_nothing(host, case, tmp_path):
    code, message = HOSTILE[case]
    before = ok(host, "import os, resource, glob, tempfile\n"
                      "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "
                      "len(glob.glob(os.path.join(tempfile.gettempdir(), 'sandbox-transfer-*'))))").split()
    ok(host, "value = 'untouched'")
    ok(host, f"%%sandbox --name t\n{code}")
    if case != "reduce":
        ok(host, f"%%sandbox --name t\nvalue = 1\n{FORGE}")
    try:
        error = failure(host, "%sandbox pull value --name t")
    finally:
        if case != "reduce":
            ok(host, f"%%sandbox --name t\n{UNFORGE}")
    assert message in error, error
    after = ok(host, "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "
                     "len(glob.glob(os.path.join(tempfile.gettempdir(), 'sandbox-transfer-*'))), value, "
                     "os.path.exists('/tmp/pwned'))").split()
    assert after[2:] == ["untouched", "False"]
    assert after[1] == before[1]  # no host file left behind
    assert int(after[0]) - int(before[0]) < 200 * 1024  # max RSS grew by less than 200 MiB (kB)
    assert ok(host, "%%sandbox --name t\nprint('still here')") == "still here\n"

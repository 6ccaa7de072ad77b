"""``Sandbox.put``/``get`` (and the async form) on every backend (issue 18): values travel as
data only through each backend's files and kernel channel."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from sandbox_kernel import AsyncSandbox, Sandbox
from sandbox_kernel.core.errors import TransferError
from tests import targets
from tests.support.backends import prepared

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(300)]


def sandbox(name: str, **options) -> Sandbox:
    prepared(name)
    with targets.env_vars(prepared(name).kernel_env):
        return Sandbox(name, **prepared(name).traits, **options)


@pytest.mark.parametrize("name", ["local", "docker", "e2b", "gateway"])
def test_plain_values_bytes_and_arrays_round_trip(name):
    values = {"nested": {"a": [1, 2.5, None, True, {"b": "c"}], "inf": math.inf},
              "raw": bytes(range(256)), "arr": np.arange(12, dtype=np.float32).reshape(3, 4),
              "stamps": np.array(["2026-01-01"], dtype="datetime64[s]")}
    with sandbox(name) as sb:
        for key, value in values.items():
            sb.put(key, value)
        sb.run("nested['added'] = float('nan'); arr = arr * 2")
        nested = sb.get("nested")
        assert math.isnan(nested.pop("added")) and nested == values["nested"]
        assert sb.get("raw") == values["raw"]
        arr = sb.get("arr")
        assert arr.dtype == np.float32 and (arr == values["arr"] * 2).all()
        assert (sb.get("stamps") == values["stamps"]).all()
        with pytest.raises(TransferError, match="is not defined in the sandbox"):
            sb.get("nope")
        assert sb.run("print('still here')").stdout == "still here\n"


@pytest.mark.parametrize("name", ["local", "e2b", "gateway"])
def test_a_dataframe_round_trips(name):
    df = pd.DataFrame({"x": [1.0, None, 3.0], "label": ["a", "b", "c"]},
                      index=pd.Index([10, 20, 30], name="key"))
    with sandbox(name) as sb:
        sb.put("df", df)
        sb.run("df['double'] = df['x'] * 2")
        back = sb.get("df")
    expected = df.assign(double=df["x"] * 2)
    pd.testing.assert_frame_equal(back, expected)


def test_a_dataframe_without_pyarrow_in_the_sandbox_says_how():
    """The default docker image has pyarrow; an image without it (here: its import made to
    fail, as a missing package fails) gets one line saying what to add."""
    with sandbox("docker") as sb:
        sb.put("df", pd.DataFrame({"a": [1]}))
        pd.testing.assert_frame_equal(sb.get("df"), pd.DataFrame({"a": [1]}))
        sb.run("import sys\nsys.modules['pyarrow'] = None  # import pyarrow: ImportError")
        with pytest.raises(TransferError, match="the sandbox has no pyarrow"):
            sb.put("df", pd.DataFrame({"a": [1]}))
        sb.run("import pandas as pd\nother = pd.DataFrame({'a': [1]})")
        with pytest.raises(TransferError, match="the sandbox has no pyarrow"):
            sb.get("other")


def test_the_bound_is_an_argument_and_an_option():
    with sandbox("local", max_transfer_bytes=1000) as sb:
        with pytest.raises(TransferError, match="over the transfer bound of 1,000 bytes; raise max_transfer_bytes"):
            sb.put("big", bytes(2000))
        sb.put("big", bytes(2000), max_bytes=0)
        with pytest.raises(TransferError, match="is 2,000 bytes encoded, over the transfer bound of 1,000"):
            sb.get("big")
        assert sb.get("big", max_bytes=5000) == bytes(2000)


async def test_the_async_form():
    prepared("local")
    async with AsyncSandbox("local", **prepared("local").traits) as sb:
        await sb.put("value", [1, "two"])
        assert await sb.get("value") == [1, "two"]

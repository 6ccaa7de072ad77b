"""The E2B test server, driven by the real ``e2b_code_interpreter.AsyncSandbox`` over HTTP."""

from __future__ import annotations

import asyncio
import base64
import io
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest
import pytest_asyncio
from e2b import (
    AuthenticationException,
    FileNotFoundException,
    NotFoundException,
    SandboxNotFoundException,
    SandboxNotRunningException,
    TimeoutException,
)
from e2b_code_interpreter import AsyncSandbox

try:
    from tests.e2b_server import E2BTestServer
except ImportError:  # tests/ is not importable as a package
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from e2b_server import E2BTestServer

pytestmark = [pytest.mark.asyncio, pytest.mark.e2b, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def server():
    with E2BTestServer() as srv:
        yield srv


@pytest.fixture
def e2b_env(server, monkeypatch):
    for key, value in server.env().items():
        monkeypatch.setenv(key, value)
    return server


@pytest_asyncio.fixture
async def sandbox(e2b_env):
    sbx = await AsyncSandbox.create()
    yield sbx
    await sbx.kill()


# -- control plane -----------------------------------------------------------------------
async def test_create_gives_distinct_sandboxes_with_own_workdirs(e2b_env):
    first, second = await AsyncSandbox.create(), await AsyncSandbox.create()
    try:
        assert first.sandbox_id != second.sandbox_id
        assert {first.sandbox_id, second.sandbox_id} <= set(e2b_env.sandboxes)
        cwd = (await first.run_code("import os; os.getcwd()")).text
        assert cwd.strip("'") == str(e2b_env.workdir(first.sandbox_id))
        assert e2b_env.workdir(first.sandbox_id) != e2b_env.workdir(second.sandbox_id)
        listed = await AsyncSandbox.list().next_items()
        assert {first.sandbox_id, second.sandbox_id} <= {s.sandbox_id for s in listed}
    finally:
        await first.kill()
        await second.kill()
    assert first.sandbox_id not in e2b_env.sandboxes


async def test_bad_api_key_raises_authentication_exception(e2b_env, monkeypatch):
    monkeypatch.setenv("E2B_API_KEY", "bad-key")
    with pytest.raises(AuthenticationException):
        await AsyncSandbox.create()


async def test_kill_then_connect_raises_not_found(e2b_env):
    sbx = await AsyncSandbox.create()
    assert await sbx.kill() is True
    assert await sbx.is_running() is False
    assert await sbx.kill() is False  # 404 on the second DELETE
    with pytest.raises(SandboxNotFoundException):
        await AsyncSandbox.connect(sbx.sandbox_id)


async def test_connect_returns_a_working_sandbox(sandbox):
    await sandbox.run_code("shared = 7")
    again = await AsyncSandbox.connect(sandbox.sandbox_id)
    assert (await again.run_code("shared")).text == "7"


async def test_expired_sandbox_is_gone(sandbox, e2b_env):
    await sandbox.set_timeout(1)
    assert await sandbox.is_running() is True
    await asyncio.sleep(1.2)
    assert await sandbox.is_running() is False
    assert sandbox.sandbox_id not in e2b_env.sandboxes


async def test_killed_from_outside_fails_requests(sandbox, e2b_env):
    e2b_env.kill_sandbox(sandbox.sandbox_id)
    with pytest.raises(SandboxNotRunningException):
        await sandbox.files.read("anything.txt")
    with pytest.raises(TimeoutException):  # 502 from the proxy, as E2B answers
        await sandbox.run_code("1")


async def test_kill_during_execution_fails_fast(sandbox, e2b_env):
    await sandbox.run_code("1")
    asyncio.get_running_loop().call_later(0.5, e2b_env.kill_sandbox, sandbox.sandbox_id)
    started = time.monotonic()
    with pytest.raises(TimeoutException, match="killed"):
        await sandbox.run_code("import time; time.sleep(30)")
    assert time.monotonic() - started < 10


# -- code interpreter --------------------------------------------------------------------
async def test_state_persists_across_run_code(sandbox):
    first = await sandbox.run_code("x = 20")
    second = await sandbox.run_code("x * 2 + 2")
    assert second.text == "42"
    assert second.execution_count == first.execution_count + 1


async def test_stdout_streams_live(sandbox):
    await sandbox.run_code("1")  # kernel started
    arrivals = []
    execution = await sandbox.run_code(
        "import time\nprint('first', flush=True)\ntime.sleep(1)\nprint('second')",
        on_stdout=lambda msg: arrivals.append((time.monotonic(), msg)),
    )
    finished = time.monotonic()
    assert "".join(m.line for _, m in arrivals) == "first\nsecond\n"
    assert finished - arrivals[0][0] >= 0.8
    sent = datetime.fromisoformat(arrivals[0][1].timestamp)  # E2B: the IOPub header's date, ISO 8601
    assert abs(sent.timestamp() - time.time()) < 60 and sent.tzinfo is not None
    assert execution.logs.stdout == [m.line for _, m in arrivals]


async def test_stderr_and_env_vars(sandbox):
    execution = await sandbox.run_code(
        "import os, sys\nprint(os.environ['GREETING'], file=sys.stderr)", envs={"GREETING": "hi"}
    )
    assert execution.logs.stderr == ["hi\n"]
    assert (await sandbox.run_code("import os; 'GREETING' in os.environ")).text == "False"


async def test_results_html_png_and_main_result(sandbox):
    code = (
        "from IPython.display import HTML, display\n"
        "import matplotlib.pyplot as plt\n"
        "display(HTML('<b>bold</b>'))\n"
        "plt.plot([1, 2, 3]); plt.show()\n"
        "'done'"
    )
    execution = await sandbox.run_code(code)
    html, figure, main = execution.results
    assert html.html == "<b>bold</b>" and not html.is_main_result
    assert base64.b64decode(figure.png).startswith(b"\x89PNG")
    assert "png" in figure.formats() and not figure.is_main_result
    assert main.is_main_result and main.text == "done" and execution.text == "done"  # E2B strips the quotes


async def test_unknown_mime_types_go_to_extra(sandbox):
    execution = await sandbox.run_code(
        "from IPython.display import display\n"
        "display({'application/vnd.test+json': {'a': 1}, 'text/plain': 'x'}, raw=True)"
    )
    assert execution.results[0].extra == {"application/vnd.test+json": {"a": 1}}


async def test_error_has_name_value_traceback(sandbox):
    errors = []
    execution = await sandbox.run_code("def f():\n    1 / 0\nf()", on_error=errors.append)
    assert execution.error.name == "ZeroDivisionError"
    assert execution.error.value == "division by zero"
    assert isinstance(execution.error.traceback, str) and "f()" in execution.error.traceback
    assert errors == [execution.error]


async def test_timeout_raises_and_interrupts_kernel(sandbox):
    await sandbox.run_code("interrupted = False")
    with pytest.raises(TimeoutException):
        await sandbox.run_code(
            "import time\ntry:\n    time.sleep(30)\n"
            "except KeyboardInterrupt:\n    interrupted = True\n    raise",
            timeout=1,
        )
    await asyncio.sleep(0.5)  # the server notices the closed connection and interrupts
    assert (await sandbox.run_code("interrupted", timeout=10)).text == "True"


async def test_cancelling_run_code_interrupts_kernel(sandbox):
    await sandbox.run_code("stopped = False")
    task = asyncio.create_task(sandbox.run_code(
        "import time\ntry:\n    time.sleep(30)\nexcept KeyboardInterrupt:\n    stopped = True"
    ))
    await asyncio.sleep(1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(0.5)
    assert (await sandbox.run_code("stopped", timeout=10)).text == "True"


async def test_code_contexts_create_restart_remove(sandbox, e2b_env):
    ctx = await sandbox.create_code_context()
    assert ctx.language == "python" and ctx.cwd == str(e2b_env.workdir(sandbox.sandbox_id))
    await sandbox.run_code("y = 1", context=ctx)
    assert (await sandbox.run_code("'y' in globals()")).text == "False"  # default context
    assert (await sandbox.run_code("y", context=ctx)).text == "1"
    assert ctx.id in {c.id for c in await sandbox.list_code_contexts()}

    await sandbox.restart_code_context(ctx)
    assert (await sandbox.run_code("y", context=ctx)).error.name == "NameError"

    await sandbox.remove_code_context(ctx)
    with pytest.raises(NotFoundException):
        await sandbox.run_code("1", context=ctx)


async def test_context_cwd_is_relative_to_workdir(sandbox, e2b_env):
    await sandbox.files.write("sub/data.txt", "in sub")
    ctx = await sandbox.create_code_context(cwd="sub")
    assert ctx.cwd == str(e2b_env.workdir(sandbox.sandbox_id) / "sub")
    assert (await sandbox.run_code("open('data.txt').read()", context=ctx)).text == "in sub"


async def test_bash_language(sandbox, e2b_env):
    arrivals = []
    execution = await sandbox.run_code(
        "echo hello; pwd; echo oops >&2; sleep 1; echo bye", language="bash",
        on_stdout=lambda msg: arrivals.append(time.monotonic()),
    )
    assert "".join(execution.logs.stdout) == f"hello\n{e2b_env.workdir(sandbox.sandbox_id)}\nbye\n"
    assert execution.logs.stderr == ["oops\n"] and execution.error is None
    assert arrivals[-1] - arrivals[0] >= 0.8
    failed = await sandbox.run_code("exit 3", language="bash")
    assert failed.error.name == "CalledProcessError" and "3" in failed.error.value


# -- envd files --------------------------------------------------------------------------
async def test_files_roundtrip(sandbox, e2b_env):
    info = await sandbox.files.write("notes/hello.txt", "héllo")
    workdir = e2b_env.workdir(sandbox.sandbox_id)
    assert info.name == "hello.txt" and info.path == str(workdir / "notes/hello.txt")
    assert await sandbox.files.read("notes/hello.txt") == "héllo"
    assert (await sandbox.run_code("open('notes/hello.txt').read()")).text == "héllo"

    payload = bytes(range(256)) * 40
    await sandbox.files.write("blob.bin", payload)  # multipart/form-data
    assert bytes(await sandbox.files.read("blob.bin", format="bytes")) == payload
    await sandbox.files.write("stream.bin", io.BytesIO(payload))  # application/octet-stream
    assert bytes(await sandbox.files.read("stream.bin", format="bytes")) == payload

    written = await sandbox.files.write_files([
        {"path": "many/a.txt", "data": "A"}, {"path": "many/b.txt", "data": "B"},
    ])
    assert [w.name for w in written] == ["a.txt", "b.txt"]
    assert await sandbox.files.read("many/b.txt") == "B"


async def test_read_missing_file_raises_file_not_found(sandbox):
    with pytest.raises(FileNotFoundException):
        await sandbox.files.read("no/such/file.txt")


# -- like E2B's own code interpreter (e2b-dev/code-interpreter template/server) -------------------
# The e2b backend's race tests (tests/test_e2b_races.py) are only as good as these behaviours.
async def never_ends(run) -> bool:
    try:
        await asyncio.wait_for(run, 2.5)
    except TimeoutError:
        return True
    return False


async def test_like_e2b_an_execution_right_after_a_disconnect_is_aborted_and_never_ends(sandbox):
    await sandbox.run_code("x = 1")
    task = asyncio.create_task(sandbox.run_code("while True: pass"))
    await asyncio.sleep(0.5)
    task.cancel()  # the server interrupts the kernel and does not wait
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await never_ends(sandbox.run_code("x")), "ipykernel aborted it; the server waits for 'abort'"
    await asyncio.sleep(0.5)  # closing it interrupts the kernel once more: let that land first
    assert (await sandbox.run_code("x", timeout=10)).text == "1"


async def test_like_e2b_an_execution_sent_while_a_dead_kernel_restarts_is_lost(sandbox):
    execution = await sandbox.run_code("import os\nos._exit(3)")
    assert execution.error.name == "ContextRestarting"
    assert await never_ends(sandbox.run_code("1 + 1"))
    await asyncio.sleep(0.5)
    assert (await sandbox.run_code("1 + 1", timeout=10)).text == "2"


async def test_like_e2b_the_interrupt_of_a_closed_stream_hits_the_execution_sent_next(sandbox, e2b_env,
                                                                                   monkeypatch):
    # messaging.py: on a client's disconnect the server starts `interrupt()` under asyncio.shield,
    # but the request's cancellation ends the handler at once and frees the context; the
    # kernel's SIGINT comes 20-120 ms later (Timings.interrupt_latency), into whatever runs then.
    monkeypatch.setattr(e2b_env.timings, "interrupt_latency", 0.3)  # the slow end, for a sure hit
    await sandbox.run_code("1")
    e2b_env.lose_executions(1)
    assert await never_ends(sandbox.run_code("2"))
    hit = await sandbox.run_code("import time\ntime.sleep(2)\n3", timeout=10)
    assert hit.error.name == "KeyboardInterrupt" and hit.text is None
    assert e2b_env.raced(sandbox.sandbox_id) == 1
    await asyncio.sleep(0.5)
    assert (await sandbox.run_code("import time\ntime.sleep(1)\n4", timeout=10)).text == "4"
    assert e2b_env.raced(sandbox.sandbox_id) == 1, "sent once the interrupt had landed"


async def test_like_e2b_a_restart_answers_null_and_the_fresh_kernel_answers_late(sandbox, e2b_env):
    ctx = await sandbox.create_code_context()
    running = asyncio.create_task(sandbox.run_code("import time\ntime.sleep(30)", context=ctx))
    await asyncio.sleep(0.5)
    started = time.monotonic()
    await sandbox.restart_code_context(ctx)  # 200 null: the SDK raises on anything else
    ended = await running  # E2B closes its websocket to the kernel: the running one is cut
    assert [ended.error.name, ended.error.value] == ["UnexpectedEndOfExecution", "Connection to the execution "
                                                     "was closed before the execution was finished"]
    first = await sandbox.run_code("", context=ctx)
    assert time.monotonic() - started >= e2b_env.timings.restart_warmup
    assert first.error is None and first.execution_count == 1
    assert (await sandbox.run_code("", context=ctx)).execution_count == 2, "E2B's env snippet counted"


async def test_pause_and_connect_resume_and_paused_ones_are_listed(sandbox, e2b_env):
    from e2b_code_interpreter import SandboxQuery, SandboxState

    await sandbox.run_code("kept = 5")
    assert await sandbox.pause() is True and await sandbox.pause() is False  # 409: already paused
    query = SandboxQuery(state=[SandboxState.PAUSED])
    assert [s.sandbox_id for s in await AsyncSandbox.list(query=query).next_items()] == [sandbox.sandbox_id]
    with pytest.raises(TimeoutException):  # not running: the proxy does not reach it
        await sandbox.run_code("kept")
    resumed = await AsyncSandbox.connect(sandbox.sandbox_id)
    assert (await resumed.run_code("kept")).text == "5"
    assert await AsyncSandbox.list(query=query).next_items() == []

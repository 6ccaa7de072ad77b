"""``sandbox-kernel mcp`` driven by the official MCP client over stdio, on local and docker:
one session per backend runs the whole scenario, then closes and checks the sandbox is gone."""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sandbox_kernel.backends import get_backend_class
from sandbox_kernel.core.errors import PathRefused
from sandbox_kernel.frontdoors.mcp.server import inside_workdir
from tests.support.backends import prepared

pytestmark = pytest.mark.kernel

if importlib.util.find_spec("mcp") is None:  # an extra of the project: `make install` has it
    if os.environ.get("SANDBOX_KERNEL_NO_SKIP"):
        raise ImportError("the MCP SDK is missing in CI: pip install 'sandbox-kernel[mcp]'")
    pytest.skip("the MCP SDK is not installed (pip install 'sandbox-kernel[mcp]')", allow_module_level=True)


def server_params(name: str):
    from mcp import StdioServerParameters

    cls = get_backend_class(name).__name__
    traits = [f"--{cls}.{k}={v}" for k, v in prepared(name).traits.items()]
    return StdioServerParameters(
        command=sys.executable, env={**os.environ, **prepared(name).kernel_env},
        args=["-m", "sandbox_kernel", "mcp", "--backend", name, "--allowed-command", r"echo [a-z ]+", *traits])


def texts(result) -> str:
    return "\n".join(c.text for c in result.content if c.type == "text")


async def scenario(session) -> dict:
    """Every tool once; returns the server's status."""
    names = {t.name for t in (await session.list_tools()).tools}
    assert names == {"run_code", "run_command", "upload_file", "download_file", "restart", "status", "checkpoint",
                     "list_checkpoints", "restore", "undo"}

    assert not (await session.call_tool("run_code", {"code": "x = 41"})).is_error
    kept = await session.call_tool("run_code", {"code": "print('state'); x + 1"})
    assert not kept.is_error and texts(kept) == "state\n\n42"

    plotting = "import matplotlib.pyplot as plt; plt.plot([1, 2]); plt.show()"
    plot = await session.call_tool("run_code", {"code": plotting})
    [image] = [c for c in plot.content if c.type == "image"]
    assert image.mime_type == "image/png" and base64.b64decode(image.data).startswith(b"\x89PNG")

    html_code = "from IPython.display import HTML; HTML('<i>x</i><script>a()</script>')"
    html = await session.call_tool("run_code", {"code": html_code})
    assert "<i>x</i>" in texts(html) and "<script>" not in texts(html)

    error = await session.call_tool("run_code", {"code": "1 / 0"})
    assert error.is_error and "ZeroDivisionError" in texts(error) and "\x1b[" not in texts(error)

    slow = await session.call_tool("run_code", {"code": "import time; print('begun', flush=True); time.sleep(60)",
                                                "timeout": 1})
    assert slow.is_error and "begun" in texts(slow) and "ExecutionTimeout: The cell ran longer than 1 s" in texts(slow)

    up = await session.call_tool("upload_file", {"path": "in/data.txt", "content": "hello sandbox"})
    assert not up.is_error
    read = await session.call_tool("run_code", {"code": "open('in/data.txt').read().upper()"})
    assert texts(read) == "'HELLO SANDBOX'"
    await session.call_tool("run_code", {"code": "open('out.bin', 'wb').write(bytes(range(256)))"})
    down = await session.call_tool("download_file", {"path": "out.bin", "encoding": "base64"})
    assert base64.b64decode(texts(down)) == bytes(range(256))
    await session.call_tool("run_code", {"code": "open('big.bin', 'wb').write(bytes(2 * 1024**2))"})
    big = await session.call_tool("download_file", {"path": "big.bin"})  # over --max-output-bytes (1m)
    assert big.is_error and texts(big).endswith("big.bin has more than 1,048,576 bytes, the server's --max-output-bytes.")
    for escape in ("../etc/passwd", "/etc/passwd", "in/../../x"):
        refused = await session.call_tool("download_file", {"path": escape})
        assert refused.is_error and "relative to the sandbox's working directory" in texts(refused)

    echo = await session.call_tool("run_command", {"command": "echo hello world"})
    assert not echo.is_error and "exit code 0" in texts(echo) and "hello world" in texts(echo)
    refused = await session.call_tool("run_command", {"command": "cat in/data.txt"})
    assert refused.is_error and "CommandRefused" in texts(refused)

    taken = await session.call_tool("checkpoint", {"name": "start"})
    assert not taken.is_error and "(checkpoint 'start')" in texts(taken)
    await session.call_tool("run_code", {"code": "x = 0"})
    assert "the sandbox runs on the state after cell" in texts(await session.call_tool("undo", {}))
    assert texts(await session.call_tool("run_code", {"code": "x"})) == "41"
    await session.call_tool("run_code", {"code": "x = -1"})
    assert not (await session.call_tool("restore", {"checkpoint": "start"})).is_error
    assert texts(await session.call_tool("run_code", {"code": "x"})) == "41"
    assert "start" in texts(await session.call_tool("list_checkpoints", {}))
    missing = await session.call_tool("restore", {"checkpoint": "nope"})
    assert missing.is_error and "No checkpoint named 'nope'" in texts(missing)

    status = json.loads(texts(await session.call_tool("status", {})))
    assert status["started"] and status["allowed_commands"] == [r"echo [a-z ]+"]
    assert not (await session.call_tool("restart", {})).is_error
    assert "NameError" in texts(await session.call_tool("run_code", {"code": "x"}))
    return json.loads(texts(await session.call_tool("status", {})))


async def run_session(name: str) -> dict:
    from mcp import ClientSession, stdio_client

    async with stdio_client(server_params(name)) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        return await scenario(session)


def wait_until(condition, timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def process_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"


async def test_mcp_session_local():
    status = await run_session("local")
    assert wait_until(lambda: process_gone(status["server_pid"]))
    assert wait_until(lambda: not Path(status["workdir"]).exists()), "the sandbox's directory was left behind"
    assert process_gone(int(status["sandbox_id"]))


async def test_mcp_session_docker():
    import docker

    from tests.targets.docker import NOTHING, held_by

    status = await run_session("docker")
    assert status["backend"] == "docker" and status["network"] == "none"
    client = docker.from_env()
    try:
        assert wait_until(lambda: process_gone(status["server_pid"]))
        assert held_by(client, status["server_pid"]) == NOTHING
        assert client.api.containers(all=True, filters={"id": status["sandbox_id"]}) == []
    finally:
        client.close()


def test_bad_backend_option_is_one_message():
    done = subprocess.run([sys.executable, "-m", "sandbox_kernel", "mcp", "--backend", "local",
                           "--LocalBackend.memory_limt=1g"], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "Did you mean 'memory_limit'" in done.stderr


@pytest.mark.unit
@pytest.mark.parametrize("path", ["/etc/passwd", "..", "../x", "a/../../x", "", ".", "a\\..\\..\\x"])
def test_paths_outside_the_workdir_are_refused(path):
    with pytest.raises(PathRefused):
        inside_workdir(path)


@pytest.mark.unit
def test_paths_inside_the_workdir():
    assert inside_workdir("a/./b/../c.txt") == "a/c.txt"


class ByHand:
    """``sandbox-kernel mcp --backend local`` over stdio, spoken to in JSON-RPC lines by hand
    (the SDK's client always closes stdin first, then signals on its own schedule); initialized.
    Use as a context manager: the server is killed at the end if still running."""

    def __init__(self) -> None:
        from mcp_types import LATEST_PROTOCOL_VERSION

        self.server = subprocess.Popen([sys.executable, "-m", "sandbox_kernel", "mcp", "--backend", "local"],
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self._ids = iter(range(1, 1_000_000))
        try:
            self.call("initialize", {"protocolVersion": LATEST_PROTOCOL_VERSION, "capabilities": {},
                                     "clientInfo": {"name": "test", "version": "0"}})
            self.send("notifications/initialized", None)
        except BaseException:
            self.__exit__()
            raise

    def send(self, method: str, params: dict | None, msg_id: int | None = None) -> None:
        """One request (with ``msg_id``) or notification, not waiting for its reply."""
        message = {"jsonrpc": "2.0", "method": method, **({"id": msg_id} if msg_id is not None else {}),
                   **({"params": params} if params is not None else {})}
        self.server.stdin.write(json.dumps(message) + "\n")
        self.server.stdin.flush()

    def call(self, method: str, params: dict) -> dict:
        """The result of one request."""
        msg_id = next(self._ids)
        self.send(method, params, msg_id)
        while True:
            reply = json.loads(self.server.stdout.readline())
            if reply.get("id") == msg_id:
                return reply["result"]

    def tool(self, name: str, arguments: dict) -> dict:
        return self.call("tools/call", {"name": name, "arguments": arguments})

    def status(self) -> dict:
        return json.loads(self.tool("status", {})["content"][0]["text"])

    def __enter__(self) -> ByHand:
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.kill()
        self.server.wait()


def test_sigterm_removes_the_sandbox():
    """An agent host that stops the server with SIGTERM (not by closing stdin) leaves nothing
    behind either."""
    import signal

    with ByHand() as mcp:
        first = mcp.tool("run_code", {"code": "x = 1"})
        assert not first.get("isError"), first
        status = mcp.status()
        assert Path(status["workdir"]).is_dir()
        mcp.server.send_signal(signal.SIGTERM)
        assert mcp.server.wait(timeout=30) == 0
    assert not Path(status["workdir"]).exists() and process_gone(int(status["sandbox_id"]))


def test_sigterm_during_the_removal_that_stdins_end_began_waits_for_it():
    """The MCP SDK's stdio client closes the server's stdin, then sends SIGTERM 2 s later: the
    removal stdin's end began must finish before the server exits (its exit cut it short, and
    the sandbox was left behind). A busy kernel makes the removal last its 2 s grace here."""
    import signal

    with ByHand() as mcp:
        mcp.tool("run_code", {"code": "x = 1"})
        status = mcp.status()
        mcp.send("tools/call", {"name": "run_code", "arguments": {"code": "open('busy', 'w').close()\nwhile True: pass"}},
                 msg_id=0)
        assert wait_until(lambda: (Path(status["workdir"]) / "busy").exists(), timeout=30)
        mcp.server.stdin.close()
        time.sleep(0.5)  # the removal is under way
        mcp.server.send_signal(signal.SIGTERM)
        assert mcp.server.wait(timeout=30) == 0
    assert not Path(status["workdir"]).exists(), "the sandbox's directory was left behind"
    assert wait_until(lambda: process_gone(int(status["sandbox_id"])))


async def test_http_sessions_each_get_a_sandbox_behind_a_token():
    """``--http``: 127.0.0.1 only, a bearer token, one sandbox per MCP session, removed when
    the client ends its session (DELETE) and, for the rest, at SIGTERM."""
    import re

    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    env = {**os.environ, "SANDBOX_KERNEL_MCP_TOKEN": "test-token"}
    server = subprocess.Popen([sys.executable, "-m", "sandbox_kernel", "mcp", "--http", "--backend", "local"],
                              stderr=subprocess.PIPE, text=True, env=env)
    try:
        url = re.search(r"http://127\.0\.0\.1:\d+/mcp", server.stderr.readline()).group(0)
        async with httpx2.AsyncClient() as anonymous:
            assert (await anonymous.post(url, json={})).status_code == 401
        async with httpx2.AsyncClient(headers={"Authorization": "Bearer test-token"}) as http:
            async with streamable_http_client(url, http_client=http) as (r1, w1), ClientSession(r1, w1) as one:
                await one.initialize()
                assert not (await one.call_tool("run_code", {"code": "x = 'one'"})).is_error
                async with streamable_http_client(url, http_client=http) as (r2, w2), ClientSession(r2, w2) as two:
                    await two.initialize()
                    assert "NameError" in texts(await two.call_tool("run_code", {"code": "x"}))
                    second = json.loads(texts(await two.call_tool("status", {})))
                assert wait_until(lambda: not Path(second["workdir"]).exists()), "DELETE left the sandbox"
                assert texts(await one.call_tool("run_code", {"code": "x"})) == "'one'"
                first = json.loads(texts(await one.call_tool("status", {})))
                server.terminate()
                assert server.wait(timeout=30) == 0
    finally:
        server.kill()
        server.wait()
    assert not Path(first["workdir"]).exists()


async def test_past_its_open_files_limit_the_http_server_refuses_a_session_with_one_message():
    """A server whose open files run short refuses the next session's sandbox in one message and
    goes on serving the sessions it has (it broke at ``accept()`` before: every client saw
    "SSE stream ended without a response"). Its hard limit is set low here; the server raises
    its soft limit to it by itself."""
    import contextlib
    import re
    import resource

    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    limit = 200
    env = {**os.environ, "SANDBOX_KERNEL_MCP_TOKEN": "test-token"}
    server = subprocess.Popen([sys.executable, "-m", "sandbox_kernel", "mcp", "--http", "--backend", "local"],
                              stderr=subprocess.PIPE, text=True, env=env,
                              preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (100, limit)))
    try:
        url = re.search(r"http://127\.0\.0\.1:\d+/mcp", server.stderr.readline()).group(0)
        soft = int(Path(f"/proc/{server.pid}/limits").read_text().split("Max open files")[1].split()[0])
        assert soft == limit
        async with contextlib.AsyncExitStack() as stack:
            http = await stack.enter_async_context(httpx2.AsyncClient(headers={"Authorization": "Bearer test-token"}))
            sessions, refused = [], None
            for number in range(40):
                reader, writer, *_ = await stack.enter_async_context(streamable_http_client(url, http_client=http))
                session = await stack.enter_async_context(ClientSession(reader, writer))
                await session.initialize()
                result = await session.call_tool("run_code", {"code": f"n = {number}"})
                if result.is_error:
                    refused = texts(result)
                    break
                sessions.append(session)
            assert refused is not None, "40 sessions and no refusal"
            assert len(sessions) >= 2, refused
            assert re.fullmatch(r"SandboxStartError: This process has \d+ of its 200 open files in use, and a sandbox session needs about "
                                r"64 more, so no sandbox was started\. End other sessions, or raise the limit "
                                r"\(ulimit -n\) before starting the process\.", refused.strip()), refused
            for number, session in enumerate(sessions):  # the server still serves every session it had
                assert texts(await session.call_tool("run_code", {"code": "n"})) == str(number)
        server.terminate()
        assert server.wait(timeout=30) == 0
    finally:
        server.kill()
        server.wait()

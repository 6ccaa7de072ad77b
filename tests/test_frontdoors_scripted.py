"""The front doors' own logic, in process, on the scripted backend (no engine, no kernel process):
the kernel's execute_request and comm handling (with ipykernel's in-process DummySocket as its
IOPub socket), the Python API, the ``%%sandbox`` magic in an in-process IPython shell, and the
SandboxSession under all of them (request parenting, output outside cells, the replaced-sandbox
event). The same logic on real backends is covered by test_kernel, test_api and test_magic."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import logging
import os
from types import SimpleNamespace

import pytest
from ipykernel.inprocess.socket import DummySocket
from jupyter_client.session import Session
from traitlets.config import Config

from sandbox_kernel import AsyncSandbox, Sandbox
from sandbox_kernel.backends.scripted import ScriptedBackend, Step, fail, reply
from sandbox_kernel.core.errors import ConfigError, ExecutionTimeout
from sandbox_kernel.core.events import Comm, Display, SandboxReplaced, Stream
from sandbox_kernel.frontdoors.kernel.kernel import SandboxKernel
from sandbox_kernel.policy import OutputPolicy
from sandbox_kernel.session.session import SandboxSession

pytestmark = pytest.mark.unit

HOSTILE_HTML = '<b onclick="fetch(1)">2</b><img src="http://127.0.0.1:9/x">'
SCRIPT = {
    "1+1": reply(Display({"text/plain": "2", "text/html": HOSTILE_HTML}), result=True),
    "print('hi')": reply(Stream("stdout", "hi\n")),
    "1/0": fail("ZeroDivisionError", "division by zero"),
    "sleep": Step(delay=30),
    "flood": reply(*[Stream("stdout", "x" * 1000) for _ in range(50)]),
}


def iopub(kernel: SandboxKernel) -> list[dict]:
    """The IOPub messages the kernel published, decoded, in order."""
    messages = []
    while not kernel.iopub_socket.queue.empty():
        parts = [frame.bytes for frame in kernel.iopub_socket.queue.get_nowait()]
        _, msg = kernel.session.feed_identities(parts)
        messages.append(kernel.session.deserialize(msg))
    return messages


def make_kernel(**options) -> SandboxKernel:
    config = Config()
    config.SandboxKernel.backend = "scripted"
    config.SandboxKernel.update(options.pop("kernel", {}))
    config.ScriptedBackend.update({"script": SCRIPT, **options})
    return SandboxKernel(config=config, session=Session(), iopub_socket=DummySocket(), log=logging.getLogger("test"))


def request(msg_type: str, content: dict) -> dict:
    return Session().msg(msg_type, content)


async def test_kernel_execute_polices_the_result_and_says_so_once():
    kernel = make_kernel()
    reply_ = await kernel.do_execute("1+1", False)
    assert reply_ == {"status": "ok", "execution_count": 1, "payload": [], "user_expressions": {}}
    kinds = [(m["header"]["msg_type"], m["content"]) for m in iopub(kernel)]
    assert kinds[0][0] == "stream" and "output policy 'sanitize'" in kinds[0][1]["text"]
    assert kinds[1] == ("execute_result", {"data": {"text/plain": "2", "text/html": "<b>2</b><img>"}, "metadata": {},
                                           "execution_count": 1})


async def test_kernel_error_and_silent_cells():
    kernel = make_kernel()
    failed = await kernel.do_execute("1/0", False)
    assert failed["status"] == "error" and failed["ename"] == "ZeroDivisionError"
    assert [m["header"]["msg_type"] for m in iopub(kernel)] == ["error"]
    await kernel.do_execute("print('hi')", True)
    assert iopub(kernel) == []


async def test_kernel_unknown_option_is_one_short_error_every_cell():
    kernel = make_kernel(kernel={"cell_timeot": 3})
    for _ in range(2):
        failed = await kernel.do_execute("1+1", False)
        assert failed["status"] == "error" and "did you mean --SandboxKernel.cell_timeout" in failed["evalue"]
        [error] = iopub(kernel)
        assert error["header"]["msg_type"] == "error" and len(error["content"]["traceback"]) == 1


async def test_kernel_budget_cuts_a_flood_with_a_marker():
    kernel = make_kernel(kernel={"max_output_bytes": 5000})
    await kernel.do_execute("flood", False)
    texts = [m["content"]["text"] for m in iopub(kernel)]
    assert sum(len(t) for t in texts if t.startswith("x")) == 5000
    assert "output limit of 4.88 KiB reached" in texts[-2] and "raise SandboxKernel.max_output_bytes" in texts[-1]


async def test_kernel_comms_reach_the_sandbox_and_answers_are_parented_by_the_page_message():
    comm_id = "ab" * 16

    def echo(msg_type, content, emit):
        if msg_type == "comm_msg":
            emit(Comm("comm_msg", {"comm_id": content["comm_id"], "data": {"method": "update_states", "states": {},
                                                                   "buffer_paths": []}}))

    kernel = make_kernel(on_comm=echo)
    opened = request("comm_open", {"comm_id": comm_id, "target_name": "jupyter.widget.control", "data": {}})
    await kernel._forward_comm(None, [], opened)  # no sandbox yet: no target can take it
    [closed] = iopub(kernel)
    assert closed["header"]["msg_type"] == "comm_close" and closed["parent_header"]["msg_id"] == opened["header"]["msg_id"]
    await kernel.do_execute("print('hi')", False)
    iopub(kernel)
    await kernel._forward_comm(None, [], opened)
    moved = request("comm_msg", {"comm_id": comm_id, "data": {"method": "request_states"}})
    await kernel._forward_comm(None, [], moved)
    [answer] = iopub(kernel)
    assert answer["header"]["msg_type"] == "comm_msg" and answer["parent_header"]["msg_id"] == moved["header"]["msg_id"]
    assert kernel.sandbox.backend.comms_received == [("comm_open", opened["content"]), ("comm_msg", moved["content"])]
    assert await kernel.sandbox.comm_info() == {comm_id: {"target_name": "jupyter.widget.control"}}


async def test_kernel_output_outside_a_cell_is_policed_and_parented_by_the_latest_request():
    kernel = make_kernel()
    await kernel.do_execute("print('hi')", False)
    cell = kernel.get_parent("shell")
    iopub(kernel)
    kernel.sandbox.backend.send_unsolicited(Display({"text/html": HOSTILE_HTML}))
    [shown] = iopub(kernel)
    assert shown["content"]["data"]["text/html"] == "<b>2</b><img>"
    assert shown["parent_header"].get("msg_id") == (cell or {}).get("header", {}).get("msg_id")


async def test_kernel_inspection_bundle_passes_the_policy():
    kernel = make_kernel(inspect_with=lambda code, pos: {"text/html": HOSTILE_HTML, "text/plain": "len"})
    found = await kernel.do_inspect("len", 3)
    assert found["found"] and found["data"] == {"text/html": "<b>2</b><img>", "text/plain": "len"}
    completed = await make_kernel(complete_with=lambda code, pos: ["len", "list"]).do_complete("l", 1)
    assert completed["matches"] == ["len", "list"] and completed["cursor_start"] == 0


@pytest.mark.parametrize("quickly", [True, False], ids=["starts-quickly", "starts-slowly"])
async def test_kernel_info_waits_only_for_a_sandbox_that_does_not_start_quickly(quickly):
    """kernel_info_reply does not wait for a Python sandbox that starts quickly (local, a warm
    pool's take: python3 answers at once, and the frontend's own 0.2 s IOPub drain then overlaps
    the start), and waits for one that does not (a container created now: the first Tab, pressed
    as the kernel shows ready, then finds it up); what needs the sandbox waits for it either way."""
    kernel = make_kernel(start_delay=2, starts_quickly=quickly, complete_with=lambda code, pos: ["len"],
                         kernel={"start_sandbox_at_launch": True})
    stream = DummySocket()
    await kernel.kernel_info_request(stream, [b"frontend"], request("kernel_info_request", {}))
    assert kernel.sandbox.started is not quickly
    _, msg = kernel.session.feed_identities([frame.bytes for frame in stream.queue.get_nowait()])
    info = kernel.session.deserialize(msg)["content"]
    assert info["status"] == "ok" and info["language_info"]["name"] == "python"
    assert (await kernel.do_complete("l", 1))["matches"] == ["len"]
    assert kernel.sandbox.started
    assert (await kernel.do_execute("print('hi')", False))["status"] == "ok"


def test_api_runs_collects_and_raises_like_a_real_sandbox(tmp_path):
    with Sandbox("scripted", script=SCRIPT, timeout=0.5) as sb:
        assert sb.run("print('hi')").stdout == "hi\n"
        assert sb.run("1+1").text == "2"
        assert sb.run("1/0").error.ename == "ZeroDivisionError"
        assert sb.run("import os").error.ename == "ScriptError"
        with pytest.raises(ExecutionTimeout) as caught:
            sb.run("sleep")
        assert caught.value.result is not None
        (tmp_path / "in.txt").write_text("data")
        sb.upload(tmp_path / "in.txt", "in.txt")
        assert sb.read_file("in.txt") == b"data"
        assert sb.describe()["capabilities"] == ["completion", "inspection", "stdin", "comms", "display_updates",
                                                 "files"]


async def test_api_interrupt_ends_a_running_cell_and_the_session_goes_on():
    async with AsyncSandbox("scripted", script=SCRIPT) as sb:
        running = asyncio.ensure_future(sb.run("sleep"))
        await asyncio.sleep(0.1)
        await sb.interrupt()
        assert (await running).error.ename == "KeyboardInterrupt"
        assert (await sb.run("1+1")).text == "2"


async def test_session_tells_its_door_when_the_sandbox_was_replaced():
    def script(code, run):
        return reply(SandboxReplaced("stderr", "The sandbox had stopped (killed); its state is lost.\n"))

    session = SandboxSession("scripted", parent=None, policy=OutputPolicy(), options=lambda cls: {"script": script})
    replaced, shown = [], []
    session.on_replaced(lambda: replaced.append(True))
    await session.run("x", shown.append)
    assert replaced == [True] and "state is lost" in shown[0].text
    await session.restart()
    assert replaced == [True, True]


async def test_session_input_reaches_the_door():
    async def script(code, run):
        name = await run.input("name? ")
        return reply(Stream("stdout", f"hello {name}\n"))

    session = SandboxSession("scripted", parent=None, policy=OutputPolicy(), options=lambda cls: {"script": script})
    shown = []

    async def stdin(prompt, password):
        return "ada" if prompt == "name? " else "?"

    await session.run("x", shown.append, stdin=stdin)
    assert shown == [Stream("stdout", "hello ada\n")]


def test_magic_runs_in_an_in_process_shell():
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    shell = InteractiveShell.instance()
    shell.config.ScriptedBackend.script = SCRIPT
    shell.run_cell("%load_ext magics")
    try:
        with capture_output() as captured:
            result = shell.run_cell("%%sandbox --backend scripted --name scripted-test\nprint('hi')")
        assert result.success and captured.stdout == "hi\n"
        with capture_output():
            failed = shell.run_cell("%%sandbox --name scripted-test\n1/0")
        assert not failed.success and type(failed.error_in_exec).__name__ == "ZeroDivisionError"
    finally:
        shell.run_cell("%sandbox stop scripted-test")


def test_magic_without_a_host_kernel_drops_comms_and_says_it_once():
    """Terminal IPython has no page: the magic's pipeline drops comms and says so once."""
    from sandbox_kernel.frontdoors.magics import SandboxMagics
    from sandbox_kernel.frontdoors.magics.session import COMMS_NOTE

    shown = []
    cell = SandboxMagics()._make_session("t", "scripted", [], host_comms=False).cell(shown.append)
    for _ in range(2):
        cell.emit(Comm("comm_open", {"comm_id": "c", "target_name": "jupyter.widget", "data": {}}))
    assert shown == [Stream("stderr", COMMS_NOTE)]


def test_scripted_backend_declares_what_it_does():
    assert ScriptedBackend.capabilities.names() == ["completion", "inspection", "stdin", "comms", "display_updates",
                                                    "files"]


# -- checkpoints at every door, on a backend that keeps none: one line each ------------------------
NO_CHECKPOINTS = "The scripted backend does not support checkpoints"


async def test_kernel_checkpoint_lines_on_a_backend_without_them_are_one_line_each():
    kernel = make_kernel()
    for line in ("%sandbox checkpoints", "%sandbox undo", "%sandbox restore 1", "%sandbox checkpoint clean"):
        answer = await kernel.do_execute(line, False)
        assert answer["status"] == "error" and NO_CHECKPOINTS in answer["evalue"], (line, answer)
        [error] = [m["content"] for m in iopub(kernel) if m["header"]["msg_type"] == "error"]
        assert error["traceback"] == [f"NotSupported: {answer['evalue']}"]


def test_api_and_magic_checkpoints_on_a_backend_without_them_are_one_line_each():
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    from sandbox_kernel.core.errors import NotSupported

    with Sandbox("scripted", script=SCRIPT) as sb:
        for call in (sb.checkpoint, sb.checkpoints, sb.undo, lambda: sb.restore(1)):
            with pytest.raises(NotSupported, match=NO_CHECKPOINTS):
                call()
    shell = InteractiveShell.instance()
    shell.config.ScriptedBackend.script = SCRIPT
    shell.run_cell("%load_ext magics")
    try:
        shell.run_cell("%%sandbox --backend scripted --name scripted-ckpt\nprint('hi')")
        with capture_output() as captured:
            result = shell.run_cell("%sandbox undo --name scripted-ckpt")
        assert not result.success and NO_CHECKPOINTS in str(result.error_in_exec)
        assert "Traceback" not in captured.stdout + captured.stderr
    finally:
        shell.run_cell("%sandbox stop scripted-ckpt")


# -- the kernel's options, as a kernelspec's argv gives them (moved from test_kernel.py, which keeps
# one case of each through a real kernel) ----------------------------------------------------------
def argv_kernel(*argv: str, **options) -> SandboxKernel:
    """A kernel made from ``argv`` as IPKernelApp parses a kernelspec's (traitlets' loader), on the
    scripted backend unless the argv says otherwise; it starts no sandbox before a cell."""
    from traitlets.config.loader import KVArgParseConfigLoader

    config = Config({"SandboxKernel": {"backend": "scripted", "start_sandbox_at_launch": False},
                     "ScriptedBackend": {"script": options.pop("script", SCRIPT)}})
    config.merge(KVArgParseConfigLoader(list(argv)).load_config())
    return SandboxKernel(config=config, session=Session(), iopub_socket=DummySocket(), log=logging.getLogger("test"))


@pytest.mark.parametrize("option, message", [
    ("--LocalBackend.memory_limit=lots", "Bad option for the local backend"),
    ("--SandboxKernel.cell_timeout=soon", "Bad option for the sandbox kernel"),
    ("--LocalBackend.memory_limt=2g", "unknown option --LocalBackend.memory_limt; did you mean "
                                      "--LocalBackend.memory_limit?"),
    ("--SandboxKernel.cell_timout=5", "unknown option --SandboxKernel.cell_timout; did you mean "
                                      "--SandboxKernel.cell_timeout?"),
    ("--LocalBakend.memory_limit=2g", "no class is named LocalBakend; did you mean LocalBackend?"),
])
async def test_bad_configuration_is_one_short_message_and_kernel_keeps_answering(option, message):
    kernel = argv_kernel("--SandboxKernel.backend=local", option)
    for _ in range(2):
        reply_ = await kernel.do_execute("1 + 1", False)
        assert reply_["status"] == "error" and message in reply_["evalue"]
        [error] = [m for m in iopub(kernel) if m["header"]["msg_type"] == "error"]
        assert len(error["content"]["traceback"]) == 1
    assert kernel.kernel_info["implementation"] == "sandbox_kernel" and kernel.sandbox is None
    assert (await kernel.do_complete("x", 1))["matches"] == []


async def test_unknown_backend_is_one_short_message():
    kernel = argv_kernel("--SandboxKernel.backend=nosuch")
    reply_ = await kernel.do_execute("1 + 1", False)
    assert reply_["status"] == "error"
    assert reply_["evalue"].startswith("Unknown sandbox backend 'nosuch'. Known backends: ")
    assert "local" in reply_["evalue"]
    assert kernel.kernel_info["implementation"] == "sandbox_kernel"


def stateful(code, run):
    """``kept = N`` keeps N; ``kept`` shows it; ``sleep`` takes 30 s."""
    if code.startswith("kept = "):
        run.state["kept"] = code.split("= ")[1]
        return reply()
    if code == "kept":
        return reply(Display({"text/plain": run.state.get("kept", "NameError")}), result=True)
    return SCRIPT.get(code)


async def test_cell_timeout_interrupts_and_says_so():
    kernel = argv_kernel("--SandboxKernel.cell_timeout=1", script=stateful)
    await kernel.do_execute("kept = 5", False)
    reply_ = await kernel.do_execute("sleep", False)
    assert reply_["status"] == "error" and reply_["ename"] == "ExecutionTimeout"
    [error] = [m for m in iopub(kernel) if m["header"]["msg_type"] == "error"]
    assert "longer than 1 s" in error["content"]["evalue"]
    assert len(error["content"]["traceback"]) == 1  # one short message, not our internals
    await kernel.do_execute("kept", False)
    [result] = [m for m in iopub(kernel) if m["header"]["msg_type"] == "execute_result"]
    assert result["content"]["data"]["text/plain"] == "5"


async def test_output_is_cut_at_the_limit_with_a_marker():
    lines = reply(*[Stream("stdout", "x" * 99 + "\n") for _ in range(20000)])
    kernel = argv_kernel("--SandboxKernel.max_output_bytes=100k", script={"flood": lines})
    reply_ = await kernel.do_execute("flood", False)
    assert reply_["status"] == "ok"
    shown = [m["content"] for m in iopub(kernel) if m["header"]["msg_type"] == "stream"]
    out = "".join(s["text"] for s in shown if s["name"] == "stdout")
    markers = "".join(s["text"] for s in shown if s["name"] == "stderr")
    assert len(out.encode()) <= 100 * 1024
    assert "output limit of 100 KiB reached" in markers and "1.81 MiB of output dropped" in markers
    assert out.startswith("x" * 99 + "\n") and len(out.encode()) > 90 * 1024


async def test_output_between_cells_is_cut_at_the_limit_until_the_next_cell():
    """What arrives outside any cell (a sandbox thread's output) has its own max_output_bytes,
    renewed when a cell runs."""
    kernel = argv_kernel("--SandboxKernel.max_output_bytes=100k")
    for tag in "xy":  # the second round shows the budget was renewed by the cell
        assert (await kernel.do_execute("print('hi')", False))["status"] == "ok"
        iopub(kernel)
        for _ in range(200):  # 1 MB in 200 messages
            kernel.sandbox.backend.send_unsolicited(Stream("stdout", tag * 4999 + "\n"))
        later = [m["content"] for m in iopub(kernel)]
        shown = "".join(m["text"] for m in later if m["name"] == "stdout")
        assert shown.startswith(tag * 4999 + "\n") and 90 * 1024 < len(shown.encode()) <= 100 * 1024
        assert "".join(m["text"] for m in later if m["name"] == "stderr") == (
            "\n[output limit of 100 KiB reached: further output from outside a cell (a sandbox thread's) before the "
            "next cell is dropped]\n")


async def test_kernel_file_commands_option_reaches_its_lines(tmp_path):
    """``--SandboxKernel.file_commands=allow``: upload and download without asking (no stdin here)."""
    (tmp_path / "in.txt").write_text("made")
    kernel = argv_kernel("--SandboxKernel.file_commands=allow", f"--ScriptedBackend.workspace_dir={tmp_path}")
    assert (await kernel.do_execute("%sandbox upload in.txt", False))["status"] == "ok"
    assert (await kernel.do_execute("%sandbox download in.txt out.txt", False))["status"] == "ok"
    assert (tmp_path / "out.txt").read_text() == "made"
    refused = await argv_kernel(f"--ScriptedBackend.workspace_dir={tmp_path}").do_execute("%sandbox upload in.txt",
                                                                                        False)
    assert refused["status"] == "error" and "--SandboxKernel.file_commands=allow" in refused["evalue"]


async def test_a_kernel_without_a_session_answers_as_a_session_that_cannot():
    """A bad option leaves the kernel without a session; its replies are those a session gives when
    the sandbox cannot answer (sandbox_kernel.session.replies), not a traceback."""
    from sandbox_kernel.session import replies

    broken = argv_kernel("--ScriptedBackend.no_such_option=1")
    assert await broken.do_complete("le", 2) == replies.no_completion(2)
    assert await broken.do_inspect("len", 3) == replies.not_found() == {"status": "ok", "found": False, "data": {},
                                                                          "metadata": {}}
    assert await broken.do_is_complete("if True:") == {"status": "incomplete", "indent": "    "}
    assert await broken.do_history("tail", False, True, n=3) == {"status": "ok", "history": []}
    failed = await broken.do_debug_request({"seq": 7, "command": "initialize"})
    assert failed["success"] is False and failed["request_seq"] == 7 and "no_such_option" in failed["message"]
    working = argv_kernel()  # the scripted backend has no debugger and no history: the same answers
    assert await working.do_history("tail", False, True, n=3) == {"status": "ok", "history": []}
    assert (await working.do_debug_request({"seq": 7, "command": "initialize"}))["success"] is False


def test_api_config_for_the_backend_s_base_section_reaches_it():
    """``Config({"Backend": ...})`` is applied by traitlets to the backend (a subclass), as the
    kernel accepts ``--Backend.memory_limit``; the API refused it, checking Backend's own traits."""
    with Sandbox("scripted", config=Config({"Backend": {"script": SCRIPT}})) as sb:
        assert sb.run("print('hi')").stdout == "hi\n"
    with pytest.raises(ConfigError, match="Unknown option 'scirpt' for the scripted sandbox. Did you mean 'script'"):
        Sandbox("scripted", config=Config({"Backend": {"scirpt": SCRIPT}}))
    with pytest.raises(ConfigError, match="Options for 'SandboxKernel' do not apply to the scripted sandbox"):
        Sandbox("scripted", config=Config({"SandboxKernel": {"cell_timeout": 1}}))


async def test_every_door_s_status_is_the_session_s():
    """The kernel's %sandbox status, the magic's status and the API's describe() are one status
    (SandboxSession.status), each with what only its door knows."""
    from sandbox_kernel.frontdoors.magics.session import Session as MagicSession
    from sandbox_kernel.frontdoors.magics.status import status_info

    async with AsyncSandbox("scripted", script=SCRIPT) as sb:
        common = sb.session.status()
        assert common == {**sb.session.describe(), "started": True, "capabilities": sb.capabilities.names()}
        assert sb.describe() == {**common, "output_policy": "sanitize", "allowed_commands": None}
        magic = status_info(MagicSession("s", sb.session))
        assert magic == {**sb.session.describe(), "session": "s", "state": "running", "uptime_s": magic["uptime_s"],
                         "cells": 0, "capabilities": common["capabilities"]}


# -- MCP: the server's tools in process (through the SDK's wire on real backends: test_mcp.py) ------
async def test_mcp_tools_word_results_errors_and_refusals():
    if importlib.util.find_spec("mcp") is None:  # an extra of the project: `make install` has it
        if os.environ.get("SANDBOX_KERNEL_NO_SKIP"):
            raise ImportError("the MCP SDK is missing in CI: pip install 'sandbox-kernel[mcp]'")
        pytest.skip("the MCP SDK is not installed (pip install 'sandbox-kernel[mcp]')")
    from mcp.server.mcpserver.exceptions import ToolError

    from sandbox_kernel.frontdoors.mcp.cli import Sessions
    from sandbox_kernel.frontdoors.mcp.server import MCPSandbox, build_server

    def text(result) -> str:
        return "\n".join(c.text for c in result.content if c.type == "text")

    sessions = Sessions(lambda: MCPSandbox("scripted", script=SCRIPT, timeout=0.5, max_output_bytes=1024,
                                           allowed_commands=[r"echo [a-z ]+"]), "scripted")
    mcp_server = build_server(sessions)

    class server:  # a call outside any request: the calling MCP session is stdio's (no headers)
        call_tool = staticmethod(lambda name, arguments: mcp_server.call_tool(name, arguments,
                                                                              SimpleNamespace(headers=None)))

    result = await server.call_tool("run_code", {"code": "1+1"})
    assert not result.is_error and text(result).endswith("\n2")  # text/plain, after the policy's note
    assert "--output-policy isolate" in text(result)  # the note names the server's option
    failed = await server.call_tool("run_code", {"code": "1/0"})
    assert failed.is_error and "ZeroDivisionError: division by zero" in text(failed)
    slow = await server.call_tool("run_code", {"code": "sleep"})
    assert slow.is_error and "ExecutionTimeout: The cell ran longer than 0.5 s" in text(slow)
    await server.call_tool("upload_file", {"path": "in/d.txt", "content": "x" * 2000})
    with pytest.raises(ToolError, match="in/d.txt has more than 1,024 bytes, the server's --max-output-bytes"):
        await server.call_tool("download_file", {"path": "in/d.txt"})
    for escape in ("../etc/passwd", "/etc/passwd", "in/../../x"):
        with pytest.raises(ToolError, match="relative to the sandbox's working directory"):
            await server.call_tool("download_file", {"path": escape})
    refused = await server.call_tool("run_command", {"command": "cat in/d.txt"})
    assert refused.is_error and "CommandRefused" in text(refused)
    status = json.loads(text(await server.call_tool("status", {})))
    assert status["backend"] == "scripted" and status["started"] and status["usage"] is None
    assert status["allowed_commands"] == [r"echo [a-z ]+"] and status["server_pid"] == os.getpid()
    await sessions.close(None)


async def test_kernel_a_comm_relay_beside_a_request_that_fails_is_logged(caplog):
    from sandbox_kernel.frontdoors.kernel.kernel import BESIDE

    def broken(msg_type, content, emit):
        raise RuntimeError("the widget's handler broke")

    kernel = make_kernel(on_comm=broken)
    await kernel.do_execute("print('hi')", False)
    token = BESIDE.set(True)  # as ipykernel 7 dispatches a comm message while its shell is busy
    try:
        await kernel._forward_comm(None, [], request("comm_msg", {"comm_id": "ab" * 16, "data": {}}))
    finally:
        BESIDE.reset(token)
    for _ in range(100):
        if "relaying a comm message" in caplog.text:
            break
        await asyncio.sleep(0.05)
    assert "relaying a comm message into the sandbox failed: the widget's handler broke" in caplog.text

"""The backend contract, continued: what a backend declares it relays of a Jupyter kernel besides
cells (``capabilities.payloads``, ``history``, ``subshells``, ``debugger``; issue 28), each checked
against its behaviour. Collected by tests/test_contract.py with tests/support/contract.py."""

from __future__ import annotations

import asyncio
import contextvars

import pytest

from sandbox_kernel.backends.base import request_subshell_id
from sandbox_kernel.core.errors import NotSupported
from sandbox_kernel.core.events import Display
from tests.support.capabilities import lacks
from tests.support.recorder import Recorder


async def test_payloads_and_user_expressions_match_the_declaration(sandbox, backend_name):
    shown = Recorder()
    outcome = await sandbox.execute("zip?", shown, user_expressions={"answer": "6 * 7", "bad": "1 / 0"})
    quiet = Recorder()
    silent = await sandbox.execute("print('quietly'); 1 + 1", quiet, silent=True)
    if lacks(backend_name, "payloads"):  # the reply has neither: the pager shows nothing
        assert outcome.payload == () and outcome.user_expressions == {}
        return
    [page] = outcome.payload
    assert page["source"] == "page" and "zip" in page["data"]["text/plain"]
    assert outcome.user_expressions["answer"] == {"status": "ok", "data": {"text/plain": "42"}, "metadata": {}}
    assert outcome.user_expressions["bad"]["ename"] == "ZeroDivisionError"
    # silent: no execute_result, the count not bumped; print still reaches the stream (as ipykernel)
    assert not quiet.of(Display) and quiet.text() == "quietly\n"
    assert silent.execution_count == outcome.execution_count


async def test_history_matches_the_declaration(sandbox, backend_name):
    tail = {"hist_access_type": "tail", "n": 2, "raw": True, "output": False}
    await sandbox.execute("history_marker = 6 * 7", Recorder())
    await sandbox.execute("history_marker + 1", Recorder())
    if lacks(backend_name, "history"):
        with pytest.raises(NotSupported):
            await sandbox.history(tail)
        return
    reply = await sandbox.history(tail)
    found = await sandbox.history({"hist_access_type": "search", "pattern": "history_marker =*", "raw": True,
                                   "output": False, "n": 5, "unique": True})
    assert [row[2] for row in reply["history"]] == ["history_marker = 6 * 7", "history_marker + 1"]
    assert [row[2] for row in found["history"]] == ["history_marker = 6 * 7"]


async def test_subshells_match_the_declaration(make_backend, backend_name):
    if lacks(backend_name, "subshells"):
        with pytest.raises(NotSupported):
            await make_backend().delete_subshell("a-frontend-subshell")
        return
    async with make_backend() as backend:
        await backend.execute("import threading\nreleased = threading.Event()", Recorder())
        main = asyncio.ensure_future(backend.execute("released.wait(60)", Recorder()))
        await asyncio.sleep(0.5)
        context = contextvars.copy_context()
        context.run(request_subshell_id.set, "a-frontend-subshell")
        rec = Recorder()
        aside = context.run(asyncio.ensure_future, backend.execute("print(threading.current_thread().name); released.set()",
                                                                   rec))
        outcome = await asyncio.wait_for(aside, 30)  # served while the main shell's cell still waits
        assert (await asyncio.wait_for(main, 30)).status == "ok"
        await backend.delete_subshell("a-frontend-subshell")
    # printed, not the last expression: with a cell running on its main shell, ipykernel 7.4 gives a
    # subshell's execute_result the main cell's value (python3 does the same)
    assert outcome.status == "ok" and rec.text().startswith("subshell-")


async def test_debugger_matches_the_declaration(sandbox, backend_name):
    info = {"type": "request", "seq": 1, "command": "debugInfo", "arguments": {}}
    if lacks(backend_name, "debugger"):
        with pytest.raises(NotSupported):
            await sandbox.debug_request(info)
        return
    reply = await sandbox.debug_request(info)
    assert reply["success"] is True and reply["command"] == "debugInfo"
    assert reply["body"]["tmpFilePrefix"].startswith("/")  # a path inside the sandbox

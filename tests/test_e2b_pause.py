"""Pause and resume of E2B sandboxes (E2B's ``pause``, ``connect`` and ``lifecycle``), against
the local E2B-compatible server: ``keep_alive='pause'`` then a later kernel resumes the sandbox
by id; ``on_timeout='pause'`` pauses an unused sandbox and the next cell resumes it; ``%sandbox
status`` names the session's paused sandboxes."""

from __future__ import annotations

import asyncio

import pytest

from tests.kernels import kernel, run, stdout
from tests.support.e2b import result
from tests.support.recorder import Recorder

pytestmark = [pytest.mark.e2b, pytest.mark.timeout(180)]


def sandbox_of(kc) -> str:
    return kc.kernel_info(reply=True)["content"]["banner"].split("sandbox_id=")[1].split(",")[0]


def test_keep_alive_pause_then_a_later_kernel_resumes_files_and_state(e2b_server):
    with kernel("e2b", "--E2BBackend.keep_alive=pause") as (_, kc):
        run(kc, "kept = 'from the first kernel'\nopen('left.txt', 'w').write('a file')")
        sandbox_id = sandbox_of(kc)
    sandbox = e2b_server.get(sandbox_id)
    assert sandbox is not None and sandbox.state == "paused", "shutdown paused it, neither killed nor running"
    with kernel("e2b", f"--E2BBackend.sandbox_id={sandbox_id}") as (_, kc):
        reply, outputs = run(kc, "print(kept, open('left.txt').read())")
        assert reply["status"] == "ok" and stdout(outputs) == "from the first kernel a file\n"
        assert sandbox_of(kc) == sandbox_id and e2b_server.get(sandbox_id).state == "running"
    assert sandbox_id not in e2b_server.sandboxes, "without keep_alive the second kernel kills it at shutdown"


async def test_on_timeout_pause_pauses_an_unused_sandbox_and_the_next_cell_resumes_it(make_e2b, e2b_server):
    async with make_e2b(lifetime=1, on_timeout="pause") as backend:
        await backend.execute("kept = 'survives the pause'", Recorder())
        sandbox_id = backend.describe()["sandbox_id"]
        for _ in range(100):  # a renewal sent as the cell ended can reach a loaded server late
            await asyncio.sleep(0.1)
            if e2b_server.get(sandbox_id).state == "paused":
                break
        assert e2b_server.get(sandbox_id).state == "paused", "unused past its lifetime: paused, not killed"
        rec = Recorder()
        assert (await backend.execute("kept", rec)).status == "ok"
        assert result(rec) == "survives the pause" and not rec.text("stderr")
        assert backend.describe()["sandbox_id"] == sandbox_id and e2b_server.get(sandbox_id).state == "running"


async def test_status_names_the_paused_sandboxes_of_the_session(make_e2b, e2b_server):
    from tests.support.host import host_kernel

    async with make_e2b(keep_alive="pause", session="etl") as first:
        await first.execute("kept = 1", Recorder())
        paused = first.describe()["sandbox_id"]
    async with make_e2b(keep_alive="pause", session="other") as other:
        await other.execute("1", Recorder())
        unrelated = other.describe()["sandbox_id"]

    def in_host_kernel():
        with host_kernel("e2b") as (_, kc):
            run(kc, "%%sandbox --backend e2b --name etl\n1")
            return run(kc, "%sandbox status etl")

    reply, outputs = await asyncio.to_thread(in_host_kernel)
    shown = " ".join(str(m["content"]) for m in outputs)
    assert reply["status"] == "ok" and f"Paused sandboxes of session 'etl': {paused}" in shown
    assert unrelated not in shown and "--attach ID" in shown
    for sandbox_id in (paused, unrelated):
        e2b_server.kill_sandbox(sandbox_id)

"""The gateway backend against real Jupyter Kernel Gateways on 127.0.0.1: what the contract
suite cannot show (credentials refused, the gateway or the kernel gone behind the backend's
back, a message too big, reattaching, start-up progress, chunked files). The contract, kernel,
magic and widget tests also run on it (``tests.targets.NAMES``); Enterprise Gateway with
kernels in Docker containers: tests/test_gateway_eg.py."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from sandbox_kernel.core.errors import BackendUnavailable, SandboxDied, SandboxStartError
from sandbox_kernel.core.events import Display, Stream
from tests.kernels import kernel, run, stdout
from tests.support.backends import backends, prepared
from tests.support.recorder import Recorder
from tests.targets.gateway import OPTIONS, SLOW_START_S, KernelGateway, gateway

pytestmark = [pytest.mark.gateway, pytest.mark.timeout(180)]


@pytest.fixture
async def make():
    prepared("gateway")
    async with backends("gateway") as make:
        yield make


@pytest.fixture
def own_gateway():
    """A Kernel Gateway of the test's own, to stop without disturbing the others."""
    prepared("gateway")  # skips, or fails in CI, when the gateway packages are missing
    server = KernelGateway(*OPTIONS).start()
    yield server
    server.close()


def result(rec: Recorder) -> str:
    return rec.result()


async def test_wrong_token_is_one_message_naming_the_option(make):
    backend = make(auth_token="wrong-token-1234")
    with pytest.raises(BackendUnavailable) as info:
        await backend.execute("1", Recorder())
    message = str(info.value)
    assert "HTTP 403" in message or "HTTP 401" in message
    assert "JUPYTER_GATEWAY_AUTH_TOKEN" in message and "--GatewayBackend.auth_token" in message
    assert "wrong-token-1234" not in message and "\n" not in message
    assert not backend.started


def test_wrong_token_in_a_notebook_is_one_error_and_the_kernel_keeps_answering():
    with kernel("gateway", JUPYTER_GATEWAY_AUTH_TOKEN="wrong-token-5678") as (_, kc):
        reply, outputs = run(kc, "1 + 1")
        text = json.dumps([m["content"] for m in outputs])
        assert reply["status"] == "error"
        assert "JUPYTER_GATEWAY_AUTH_TOKEN" in text and "wrong-token-5678" not in text
        assert "Traceback (most recent call last)" not in text
        reply, _ = run(kc, "2 + 2")  # still answering (and still refused)
        assert reply["status"] == "error"


async def test_no_url_says_how_to_set_it(make, monkeypatch):
    monkeypatch.delenv("JUPYTER_GATEWAY_URL", raising=False)
    with pytest.raises(BackendUnavailable, match="JUPYTER_GATEWAY_URL"):
        await make(url="").start()


async def test_the_token_never_appears_in_describe_or_repr(make):
    async with make() as backend:
        text = repr(backend.describe()) + repr(backend)
    assert gateway().token not in text


async def test_gateway_killed_mid_cell_ends_the_cell_then_next_cells_recover(own_gateway):
    async with backends("gateway") as make:
        backend = make(url=own_gateway.url, auth_token=own_gateway.token)
        await backend.execute("x = 1", Recorder())
        running = asyncio.ensure_future(backend.execute("import time\ntime.sleep(60)", Recorder()))
        await asyncio.sleep(1)
        started = time.monotonic()
        own_gateway.kill()
        with pytest.raises(SandboxDied, match="connection to the gateway at http://127.0.0.1:.* was lost"):
            await asyncio.wait_for(running, 30)
        assert time.monotonic() - started < 10
        with pytest.raises(SandboxStartError, match="Cannot reach the gateway"):
            await backend.execute("1", Recorder())
        own_gateway.start()  # back on the same port: the next cell gets a fresh kernel
        rec = Recorder()
        outcome = await backend.execute("'x' in globals()", rec)
    assert outcome.status == "ok" and rec.result() == "False"


async def test_kernel_deleted_on_the_gateway_mid_cell_and_between_cells(make):
    backend = make()
    await backend.execute("x = 1", Recorder())
    running = asyncio.ensure_future(backend.execute("import time\ntime.sleep(60)", Recorder()))
    await asyncio.sleep(1)
    started = time.monotonic()
    assert gateway().request("DELETE", f"/api/kernels/{backend.describe()['sandbox_id']}")[0] == 204
    with pytest.raises(SandboxDied, match="deleted on the gateway"):
        await asyncio.wait_for(running, 30)
    assert time.monotonic() - started < 5
    await backend.execute("y = 2", Recorder())  # a fresh kernel
    assert gateway().request("DELETE", f"/api/kernels/{backend.describe()['sandbox_id']}")[0] == 204
    for _ in range(300):  # the heartbeat (every 2 s) notices while no cell runs
        if backend._deaths is None or backend._deaths.died.done():
            break
        await asyncio.sleep(0.1)
    rec = Recorder()
    outcome = await backend.execute("'y' in globals()", rec)
    assert outcome.status == "ok" and rec.result() == "False"
    [note] = [e for e in rec.events if isinstance(e, Stream)]
    assert "deleted on the gateway" in note.text and "state is lost" in note.text


async def test_a_message_over_max_message_bytes_is_dropped_unread_and_the_state_kept(make):
    backend = make(max_message_bytes="1m")
    await backend.execute("x = 1", Recorder())
    kernel_id = backend.describe()["sandbox_id"]
    rec = Recorder()
    outcome = await asyncio.wait_for(backend.execute("print('x' * 3_000_000)\ny = x + 1", rec), 30)
    assert outcome.status == "ok"  # output the server wrote right after it may be lost: not checked
    [note] = [e.text for e in rec.events if isinstance(e, Stream) and e.name == "stderr"]
    assert "an output of more than 1 MiB was dropped" in note and "GatewayBackend.max_message_bytes" in note
    assert "x" * 100 not in rec.text()
    rec = Recorder()
    await backend.execute("x, y", rec)
    assert rec.result() == "(1, 2)" and backend.describe()["sandbox_id"] == kernel_id


async def test_a_cell_that_keeps_sending_huge_outputs_is_interrupted_and_the_state_kept(make):
    backend = make(max_message_bytes="1m")
    await backend.execute("x = 1", Recorder())
    rec = Recorder()
    started = time.monotonic()
    await asyncio.wait_for(backend.execute("import time\nwhile True:\n    print('y' * 2_000_000, flush=True)\n"
                                           "    time.sleep(0.1)", rec), 60)
    assert time.monotonic() - started < 30
    notes = "".join(e.text for e in rec.events if isinstance(e, Stream) and e.name == "stderr")
    assert notes.count("was dropped") == 1 and "was interrupted" in notes
    rec = Recorder()
    await backend.execute("x", rec)
    assert rec.result() == "1"


def _peak_rss(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("VmHWM")).split()[1]) * 1024


def test_a_huge_output_does_not_swell_the_host_kernel():
    """Issue 9: a 200 MB display in the sandbox; the wrapper kernel's peak memory grows by less
    than max_message_bytes (32 MiB by default), as the frame is refused before it is read."""
    with kernel("gateway") as (km, kc):
        run(kc, "x = 1")
        pid = km.provisioner.pid
        before = _peak_rss(pid)
        reply, outputs = run(kc, "display({'text/plain': 'x' * 200_000_000}, raw=True)", timeout=120)
        grown = _peak_rss(pid) - before
        assert reply["status"] == "ok"
        assert "max_message_bytes" in stdout(outputs, "stderr")
        assert grown < 32 * 1024**2, f"the host kernel's peak RSS grew by {grown / 1024**2:.0f} MiB"
        _, outputs = run(kc, "print('after', x)")
        assert stdout(outputs) == "after 1\n"


async def test_keep_alive_then_reattach_by_kernel_id(make):
    first = make(keep_alive=True)
    await first.execute("kept = 'across sessions'", Recorder())
    kernel_id = first.describe()["sandbox_id"]
    await first.shutdown()
    assert gateway().request("GET", f"/api/kernels/{kernel_id}")[0] == 200
    second = make(kernel_id=kernel_id)
    rec = Recorder()
    await second.execute("kept", rec)
    assert rec.result() == "'across sessions'"
    await second.shutdown()  # not keep_alive: deleted now
    assert gateway().request("GET", f"/api/kernels/{kernel_id}")[0] == 404


async def test_reattach_to_a_missing_kernel_says_so(make):
    with pytest.raises(SandboxStartError, match="no kernel 0000.* to attach to"):
        await make(kernel_id="00000000-0000-0000-0000-000000000000").start()


async def test_slow_start_shows_progress_in_the_cell(make):
    backend = make(kernel_name="slow-python")
    rec = Recorder()
    outcome = await backend.execute("1 + 1", rec)
    progress = [e for e in rec.events if isinstance(e, Display) and not e.execution_count]
    assert outcome.status == "ok" and rec.result() == "2"
    assert progress and all(e.display_id == progress[0].display_id for e in progress)
    assert "Starting a slow-python kernel on the gateway at http://127.0.0.1" in progress[0].data["text/plain"]
    assert [e.update for e in progress] == [False] + [True] * (len(progress) - 1)
    assert progress[-1].data["text/plain"].startswith("Started a slow-python kernel")
    assert len(progress) >= SLOW_START_S - 1


async def test_restart_keeps_the_kernel_id(make):
    backend = make()
    await backend.execute("gone = 1", Recorder())
    kernel_id = backend.describe()["sandbox_id"]
    await backend.restart()
    outcome = await backend.execute("gone", Recorder())
    assert outcome.status == "error" and outcome.error.ename == "NameError"
    assert backend.describe()["sandbox_id"] == kernel_id


async def test_files_travel_in_chunks_and_missing_files_say_so(make, tmp_path):
    data = os.urandom(1_300_000)  # three chunks
    (tmp_path / "in.bin").write_bytes(data)
    backend = make()
    where = await backend.upload(tmp_path / "in.bin", "sub/dir/in.bin")
    assert where.endswith("/sub/dir/in.bin")
    rec = Recorder()
    await backend.execute("import hashlib\nprint(hashlib.sha256(open('sub/dir/in.bin', 'rb').read()).hexdigest())\n"
                          "open('out.bin', 'wb').write(open('sub/dir/in.bin', 'rb').read()[::-1])", rec)
    assert rec.text().strip() == hashlib.sha256(data).hexdigest()
    out = await backend.download("out.bin", tmp_path / "out.bin")
    assert out.read_bytes() == data[::-1]
    with pytest.raises(FileNotFoundError, match="nothing.txt"):
        await backend.download("nothing.txt", tmp_path / "nothing.txt")
    assert not (tmp_path / "nothing.txt").exists()
    with pytest.raises(FileNotFoundError):
        await backend.upload(tmp_path / "missing", "x")


def test_the_magic_refuses_a_token_on_its_line():
    from IPython.core.error import UsageError

    from sandbox_kernel.backends.gateway import GatewayBackend
    from sandbox_kernel.frontdoors.magics.options import backend_traits, option_names

    with pytest.raises(UsageError, match="secret.*saved in the notebook"):
        backend_traits(GatewayBackend, ["--auth-token", "abc"])
    assert "--auth-token" not in option_names(GatewayBackend)
    assert backend_traits(GatewayBackend, ["--kernel-name", "python3"]) == {"kernel_name": "python3"}


async def test_a_gateway_that_stops_answering_ends_the_cell(own_gateway):
    """SIGSTOP: the gateway's sockets stay open but nothing answers (a hung host)."""
    async with backends("gateway") as make:
        backend = make(url=own_gateway.url, auth_token=own_gateway.token, heartbeat_interval=0.5,
                       heartbeat_timeout=2)
        await backend.execute("x = 1", Recorder())
        running = asyncio.ensure_future(backend.execute("import time\ntime.sleep(60)", Recorder()))
        await asyncio.sleep(0.5)
        started = time.monotonic()
        os.kill(own_gateway.process.pid, signal.SIGSTOP)
        try:
            with pytest.raises(SandboxDied, match="gateway at http://127.0.0.1:.* (stopped answering|was lost)"):
                await asyncio.wait_for(running, 30)
            assert time.monotonic() - started < 10
        finally:
            os.kill(own_gateway.process.pid, signal.SIGCONT)


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory):
    """A self-signed certificate for 127.0.0.1 (openssl), as a private CA's would be."""
    folder = tmp_path_factory.mktemp("tls")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(folder / "key.pem"),
                    "-out", str(folder / "cert.pem")], check=True, capture_output=True)
    return folder / "cert.pem", folder / "key.pem"


async def test_tls_verifies_the_gateway_and_takes_a_ca_bundle(tls_files):
    prepared("gateway")
    cert, key = tls_files
    server = KernelGateway(*OPTIONS, f"--KernelGatewayApp.certfile={cert}", f"--KernelGatewayApp.keyfile={key}",
                           scheme="https").start()
    try:
        async with backends("gateway") as make:
            with pytest.raises(SandboxStartError, match="TLS with the gateway at https://127.0.0.1.*ca_certs"):
                await make(url=server.url, auth_token=server.token).start()
            rec = Recorder()
            await make(url=server.url, auth_token=server.token, ca_certs=str(cert)).execute("6 * 7", rec)
            assert rec.result() == "42"
            rec = Recorder()
            await make(url=server.url, auth_token=server.token, validate_cert=False).execute("6 * 7", rec)
            assert rec.result() == "42"
    finally:
        server.close()

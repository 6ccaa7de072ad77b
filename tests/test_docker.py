"""The docker backend against the real engine: hardening, hostile cells, death, files.

Every test, on each transport (``ipc``, ``api``), leaves nothing of its own sandboxes on the host
(what this process holds afterwards is what it held before), and, where a cell is hostile, the
backend answers the next cell. The cases that only read (the container's settings, what a cell
sees of its privileges and network, the read-only root, files through the archive API) share one
started sandbox per transport (the plugin's ``sandbox``); the module leaves nothing at its end.
All run on the module's event loop, where the shared sandbox lives. (A killed owner's leftovers
and ``gc``: tests/test_docker_leftovers.py.)
"""

from __future__ import annotations

import asyncio
import os
import time

import pytest
import pytest_asyncio

from sandbox_kernel.backends.docker import engine
from sandbox_kernel.core.errors import SandboxDied
from tests.support.backends import backends, prepared
from tests.support.hostile import (  # noqa: F401 - collected here
    host_listener,
    run,
    test_memory_bomb_is_reported_as_out_of_memory,
    test_network_has_no_interface_no_route_and_reaches_no_listener,
    test_root_is_read_only_tmp_and_workdir_are_writable,
    test_workdir_has_a_size_limit,
)
from tests.targets.docker import NOTHING, SocketProxy, engine_requests, held_by

pytestmark = [pytest.mark.docker, pytest.mark.timeout(180), pytest.mark.asyncio(loop_scope="module")]


@pytest.fixture
def client(docker_client):
    """The engine's docker-py client, as tests/support/hostile.py's tests take it (each module says
    which engine: here the local one)."""
    return docker_client


@pytest.fixture(scope="module", autouse=True)
def leaves_nothing(docker_client):
    """After the module (the shared sandboxes too), nothing of this process is left on the host."""
    yield
    assert held_by(docker_client, os.getpid()) == NOTHING


@pytest.fixture(scope="module", params=["ipc", "api"])
def transport(request) -> str:
    """Each transport in turn; the module's tests run on one, then on the other."""
    return request.param


@pytest.fixture(scope="module")
def backend_name() -> str:
    prepared("docker")
    return "docker"


@pytest.fixture(scope="module")
def sandbox_traits(transport) -> dict:
    """The plugin's ``sandbox``, which the read-only cases share, on this transport."""
    return {"transport": transport}


@pytest_asyncio.fixture(loop_scope="module")
async def make(docker_client, transport):
    """``make(**traits)`` → an unstarted DockerBackend on this transport; after the test, all are
    shut down and none of theirs is left on the host (the shared ``sandbox``, held before, may)."""
    before = held_by(docker_client, os.getpid())
    async with backends("docker") as factory:
        yield lambda **traits: factory(**{"transport": transport, **traits})
    assert held_by(docker_client, os.getpid()) == before


# -- hardening -------------------------------------------------------------------------------------
async def test_container_is_hardened_as_documented(sandbox, docker_client):
    attrs = docker_client.api.inspect_container(sandbox._container.id)
    host = attrs["HostConfig"]
    assert host["NetworkMode"] == "none" and host["ReadonlyRootfs"] and host["Init"]
    assert host["CapDrop"] == ["ALL"] and host["SecurityOpt"] == ["no-new-privileges"]
    assert host["PidsLimit"] == 256 and host["NanoCpus"] == 10**9
    assert host["Memory"] == host["MemorySwap"] == 1024**3
    assert host["Tmpfs"] == {"/tmp": "mode=1777,size=268435456"}
    assert attrs["Config"]["User"] == "1000:1000"
    assert all("docker.sock" not in (m.get("Source") or "") for m in attrs["Mounts"])
    labels = attrs["Config"]["Labels"]
    assert labels[engine.OWNER_LABEL] == engine.owner() and labels[engine.SESSION_LABEL] == "default"
    assert abs(int(labels[engine.CREATED_LABEL]) - time.time()) < 120


async def test_nothing_inside_is_privileged(sandbox):
    code = """
import os
status = dict(line.split(':', 1) for line in open('/proc/self/status'))
print(os.getuid(), os.getgid(), status['CapEff'].strip(), status['CapBnd'].strip(), status['NoNewPrivs'].strip())
print(sorted(os.listdir('/sys/class/net')), os.path.exists('/var/run/docker.sock'), os.getcwd())
"""
    _, rec = await run(sandbox, code)
    ids, net = rec.text().splitlines()
    assert ids == "1000 1000 0000000000000000 0000000000000000 1"
    assert net == "['lo'] False /home/sandbox/work"


async def test_network_option_opts_in(make):
    async with make(network="bridge") as backend:
        _, rec = await run(backend, "import os\nprint(sorted(os.listdir('/sys/class/net')))")
    assert rec.text().strip() == "['eth0', 'lo']"


# -- hostile cells -----------------------------------------------------------------------------------
async def test_fork_bomb_stops_at_the_pids_limit_and_the_kernel_survives(make):
    code = """
import os, time
forked = failed = 0
for _ in range(2000):
    try:
        if os.fork() == 0:
            time.sleep(600)  # each child holds its pid
            os._exit(0)
        forked += 1
    except BlockingIOError:
        failed += 1
print(forked < 256, failed > 0)
"""
    async with make() as backend:
        await run(backend, "kept = 'yes'")
        outcome, rec = await run(backend, code)
        _, after = await run(backend, "kept")
    assert outcome.status == "ok" and rec.text() == "True True\n"
    assert "reached its process limit (256); its other processes were stopped" in rec.text("stderr")
    assert after.result() == "'yes'"


async def test_classic_fork_bomb_is_contained(make):
    """Every copy forks again: the pids limit holds, then memory runs out (each copy is a kernel)."""
    async with make() as backend:
        try:
            outcome, rec = await run(backend, "import os\nwhile True: os.fork()", timeout=60)
        except SandboxDied as exc:
            assert "ran out of memory" in str(exc)
        else:
            assert outcome.status == "error" and "process limit" in rec.text("stderr")
        assert (await run(backend, "1 + 1"))[1].result() == "2"


async def test_os_exit_and_signals_say_how_the_kernel_ended(make):
    async with make() as backend:
        with pytest.raises(SandboxDied, match="its kernel exited with code 7"):
            await run(backend, "import os\nos._exit(7)")
        with pytest.raises(SandboxDied, match="its kernel was killed by SIGKILL"):
            await run(backend, "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")
        assert (await run(backend, "1 + 1"))[1].result() == "2"


@pytest.mark.parametrize("how, reason", [
    ("kill", r"stopped from outside the notebook \(SIGKILL: docker kill"),
    ("remove", "stopped from outside the notebook|removed from outside the notebook"),
])
async def test_container_stopped_from_outside(make, docker_client, how, reason):
    async with make() as backend:
        await run(backend, "kept = 1")
        running = asyncio.ensure_future(run(backend, "import time\nwhile True: time.sleep(0.1)"))
        await asyncio.sleep(1)
        if how == "kill":
            docker_client.api.kill(backend._container.id)
        else:
            docker_client.api.remove_container(backend._container.id, force=True)
        started = time.monotonic()  # from the container's end: the engine's own call is not ours to time
        with pytest.raises(SandboxDied, match=reason):
            await running
        assert time.monotonic() - started < 5
        assert (await run(backend, "'kept' in globals()"))[1].result() == "False"


async def test_engine_gone_ends_the_cell_and_the_kernel(make, docker_client, tmp_path, monkeypatch):
    proxy_path = tmp_path / "docker.sock"
    proxy = SocketProxy(proxy_path)
    monkeypatch.setenv("DOCKER_HOST", f"unix://{proxy_path}")
    backend = make()
    await backend.start()
    container = backend._container.id
    running = asyncio.ensure_future(run(backend, "import time\nwhile True: time.sleep(0.1)"))
    await asyncio.sleep(1)
    started = time.monotonic()
    proxy.cut()
    try:
        with pytest.raises(SandboxDied, match="the Docker engine stopped answering"):
            await running
        assert time.monotonic() - started < 20
        for _ in range(300):  # the kernel was told to exit, so the container stops by itself
            if docker_client.api.inspect_container(container)["State"]["Status"] == "exited":
                break
            await asyncio.sleep(0.1)
        assert docker_client.api.inspect_container(container)["State"]["Status"] == "exited"
    finally:  # the engine is back, even when an assertion failed: the fixture removes what is left
        proxy = SocketProxy(proxy_path)
    assert (await run(backend, "1 + 1"))[1].result() == "2"  # a fresh sandbox; the old one goes
    assert not docker_client.api.containers(all=True, filters={"id": container})


# -- lifecycle ---------------------------------------------------------------------------------------
async def test_restart_is_a_new_container_and_shutdown_removes_everything(make, docker_client):
    held = held_by(docker_client, os.getpid())  # (the shared sandbox, if it runs)
    backend = make()
    await backend.start()
    first = backend._container.id
    hostdir = backend._hostdir
    if backend.transport == "ipc":
        assert (hostdir.stat().st_uid, hostdir.stat().st_mode & 0o777) == (0, 0o755)  # sealed once ready
        outcome, _ = await run(backend, "open('/kernel/extra', 'w')")
        assert outcome.error.ename == "PermissionError"
    else:  # no host directory (the bridge's endpoints are inproc), and nothing of the host is mounted
        assert hostdir is None
        mounts = docker_client.api.inspect_container(first)["Mounts"]
        assert [m["Type"] for m in mounts] == ["volume"]
    await backend.restart()
    assert backend._container.id != first and not docker_client.api.containers(all=True, filters={"id": first})
    assert hostdir is None or not hostdir.exists()
    await backend.shutdown()
    assert held_by(docker_client, os.getpid()) == held


async def test_a_start_asks_the_engine_one_ping_and_one_description(make, monkeypatch):
    """The API version comes from the ping's headers, and one ``/info`` says whether the engine
    is here and rootless. Before: ``/version`` twice (docker-py's probe, then "is it Podman?") and
    ``/info`` twice; on Podman each costs 0.3 s of the start (tests/test_docker_podman.py)."""
    paths = engine_requests(monkeypatch)
    backend = make()
    try:
        assert (await run(backend, "1 + 1"))[1].result() == "2"
        assert not backend._link.podman
    finally:
        await backend.shutdown()
    assert paths.count("/_ping") == 1 and paths.count("/info") == 1 and "/version" not in paths, paths


async def test_a_second_start_waits_for_the_first_to_end(make, tmp_path):
    """A cell's start while the door's start is under way returns once the sandbox is whole: on the
    api transport the workspace is copied in after the kernel answers, and the cell's first line
    shows that copy (it returned as soon as the kernel answered, and the line was missing)."""
    folder = tmp_path / "notebook"
    folder.mkdir()
    (folder / "x.csv").write_text("a,b\n1,2\n")
    if os.geteuid() == 0:  # the kernel runs as 1000:1000 when this process is root (as test_workspace's folder)
        os.chown(folder, 1000, 1000)
    backend = make(workspace="ro", workspace_dir=str(folder))
    first = asyncio.ensure_future(backend.start())
    await asyncio.sleep(0)
    await backend.start()
    assert backend.workspace_view is not None and first.done()
    await first


async def test_the_first_cells_output_is_never_lost(make):
    """Readiness waits for IOPub too: a kernel_info_reply alone lost the first output in 6 of 15
    starts (docs: ENVIRONMENT.md)."""
    for _ in range(8):
        async with make() as backend:
            started = time.monotonic()
            _, rec = await run(backend, "print('first')")
            assert rec.text() == "first\n"
            assert time.monotonic() - started < 5  # the first cell, not the container's removal


# -- files -------------------------------------------------------------------------------------------
async def test_upload_and_download_through_the_archive_api(sandbox, tmp_path):
    (tmp_path / "in.bin").write_bytes(bytes(range(256)) * 100)
    assert await sandbox.upload(tmp_path / "in.bin", "data/in.bin") == "/home/sandbox/work/data/in.bin"
    _, rec = await run(sandbox, "import os\nb = open('data/in.bin', 'rb').read()\n"
                                "print(len(b), os.stat('data/in.bin').st_uid)\nopen('out.bin', 'wb').write(b[::-1])")
    assert rec.text() == "25600 1000\n"
    out = await sandbox.download("out.bin", tmp_path / "out.bin")
    assert out.read_bytes() == (bytes(range(256)) * 100)[::-1]
    with pytest.raises(FileNotFoundError):
        await sandbox.download("missing.txt", tmp_path / "x")
    with pytest.raises(PermissionError, match="working directory"):
        await sandbox.upload(tmp_path / "in.bin", "/etc/in.bin")
    with pytest.raises(FileNotFoundError):
        await sandbox.upload(tmp_path / "nope", "nope")

"""The docker backend against the real engine: hardening, hostile cells, death, files, leftovers.

Every test leaves nothing of its sandboxes on the host (``held_by`` this process is empty
afterwards) and, where a cell is hostile, the backend answers the next cell.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import os
import secrets
import subprocess
import sys
import time

import pytest

from sandbox_kernel.backends.docker import engine
from sandbox_kernel.core.errors import SandboxDied
from sandbox_kernel.runtime.owners import start_time
from tests.support.backends import backends
from tests.support.hostile import (  # noqa: F401 - collected here
    run,
    test_memory_bomb_is_reported_as_out_of_memory,
    test_network_connect_and_dns_fail,
    test_root_is_read_only_tmp_and_workdir_are_writable,
    test_workdir_has_a_size_limit,
)
from tests.targets.docker import NOTHING, SocketProxy, as_host, held_by

pytestmark = [pytest.mark.docker, pytest.mark.timeout(180)]


@pytest.fixture
def client(docker_client):
    """The engine's docker-py client, as tests/support/hostile.py's tests take it (each module says
    which engine: here the local one)."""
    return docker_client


@pytest.fixture(params=["ipc", "api"])
async def make(docker_client, request):
    """``make(**traits)`` → an unstarted DockerBackend on each transport in turn; after the
    test, all are shut down and nothing of theirs is left on the host."""
    async with backends("docker") as factory:
        yield lambda **traits: factory(**{"transport": request.param, **traits})
    assert held_by(docker_client, os.getpid()) == NOTHING


# -- hardening -------------------------------------------------------------------------------------
async def test_container_is_hardened_as_documented(make, docker_client):
    async with make() as backend:
        attrs = docker_client.api.inspect_container(backend._container.id)
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


async def test_nothing_inside_is_privileged(make):
    code = """
import os
status = dict(line.split(':', 1) for line in open('/proc/self/status'))
print(os.getuid(), os.getgid(), status['CapEff'].strip(), status['CapBnd'].strip(), status['NoNewPrivs'].strip())
print(sorted(os.listdir('/sys/class/net')), os.path.exists('/var/run/docker.sock'), os.getcwd())
"""
    async with make() as backend:
        _, rec = await run(backend, code)
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
        started = time.monotonic()
        if how == "kill":
            docker_client.api.kill(backend._container.id)
        else:
            docker_client.api.remove_container(backend._container.id, force=True)
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
    assert held_by(docker_client, os.getpid()) == NOTHING


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
        assert time.monotonic() - started < 5


def test_leftovers_of_a_killed_owner_are_removed_at_next_start_and_by_gc(docker_client):
    """The owner and the cleaners run as a host of their own (``as_host``): any sandbox's start on
    this machine would remove a killed owner's leftovers of this host before the test saw them."""
    host = f"sk-test-{secrets.token_hex(4)}"
    script = ("import asyncio, sys\nfrom sandbox_kernel.backends.docker import DockerBackend\n"
              "async def main():\n    await DockerBackend(session='orphan').start()\n"
              "    print('up', flush=True)\n    await asyncio.sleep(600)\nasyncio.run(main())")
    for cleaner in ("start", "gc"):
        owner = subprocess.Popen([*as_host(host), sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
        assert owner.stdout.readline() == "up\n"
        owner.kill()
        owner.wait()
        assert held_by(docker_client, owner.pid, host)["containers"]
        if cleaner == "start":
            subprocess.run([*as_host(host), sys.executable, "-c", "import asyncio\nfrom sandbox_kernel.backends.docker "
                            "import DockerBackend\nasync def main():\n    async with DockerBackend(): pass\n"
                            "asyncio.run(main())"], check=True)
        else:
            gc = subprocess.run([*as_host(host), sys.executable, "-m", "sandbox_kernel", "gc"], capture_output=True,
                                text=True)
            assert gc.returncode == 0 and "sandbox-kernel-orphan-" in gc.stdout
        assert held_by(docker_client, owner.pid, host) == NOTHING


@pytest.mark.parametrize("transport", ["ipc", "api"])
def test_a_sandbox_whose_wrapper_is_killed_ends_by_itself(docker_client, transport):
    """No sweep needed (issue 19): the engine closes the container's stdin when the process
    attached to it dies, and the relay (api) or the launcher (ipc) then ends the kernel. (The
    wrapper runs as a host of its own: another test's sweep would remove its exited container.)"""
    host = f"sk-test-{secrets.token_hex(4)}"
    script = ("import asyncio, sys\nfrom sandbox_kernel.backends.docker import DockerBackend\n"
              "async def main():\n    b = DockerBackend(session='killed', transport=sys.argv[1])\n"
              "    await b.start()\n    print(b._container.id, flush=True)\n    await asyncio.sleep(600)\n"
              "asyncio.run(main())")
    owner = subprocess.Popen([*as_host(host), sys.executable, "-c", script, transport], stdout=subprocess.PIPE,
                             text=True)
    container = owner.stdout.readline().strip()
    assert docker_client.api.inspect_container(container)["State"]["Status"] == "running"
    owner.kill()
    owner.wait()
    killed = time.monotonic()
    while docker_client.api.inspect_container(container)["State"]["Status"] == "running" and time.monotonic() - killed < 10:
        time.sleep(0.1)
    assert docker_client.api.inspect_container(container)["State"]["Status"] == "exited"
    assert time.monotonic() - killed < 5
    subprocess.run([*as_host(host), sys.executable, "-c", REMOVE_LEFTOVERS], check=True, capture_output=True)
    assert held_by(docker_client, owner.pid, host) == NOTHING


REMOVE_LEFTOVERS = ("import sys, docker\nfrom sandbox_kernel.backends.docker import engine\n"
                    "print(engine.remove_leftovers(docker.from_env(), everything='--all' in sys.argv))")
"""``engine.remove_leftovers`` in a process of its own (run :func:`as_host`); prints what it removed."""


def test_gc_all_on_a_shared_engine_leaves_other_hosts_sandboxes(docker_client):
    """``everything`` (``gc --all``) removes every sandbox of its host, running ones too: run as a
    host of its own (``as_host``), so that its host's sandboxes are this test's only."""
    host = f"sk-test-{secrets.token_hex(4)}"
    other = docker_client.api.create_container("sandbox-kernel:latest", entrypoint=["/nonexistent"], command=[],
                                               labels={engine.OWNER_LABEL: "another-host/1/1"}, network_disabled=True)
    mine = docker_client.api.create_container(
        "sandbox-kernel:latest", entrypoint=["/nonexistent"], command=[], network_disabled=True,
        labels={engine.OWNER_LABEL: f"{host}/{os.getpid()}/{start_time(os.getpid())}"})  # a running owner there
    try:
        done = subprocess.run([*as_host(host), sys.executable, "-c", REMOVE_LEFTOVERS, "--all"], capture_output=True,
                              text=True, check=True)
        removed = ast.literal_eval(done.stdout)
        assert docker_client.api.containers(all=True, filters={"id": other["Id"]})
        assert not docker_client.api.containers(all=True, filters={"id": mine["Id"]}) and removed
    finally:
        for made in (other, mine):
            with contextlib.suppress(Exception):
                docker_client.api.remove_container(made["Id"], force=True)


# -- files -------------------------------------------------------------------------------------------
async def test_upload_and_download_through_the_archive_api(make, tmp_path):
    (tmp_path / "in.bin").write_bytes(bytes(range(256)) * 100)
    async with make() as backend:
        assert await backend.upload(tmp_path / "in.bin", "data/in.bin") == "/home/sandbox/work/data/in.bin"
        _, rec = await run(backend, "import os\nb = open('data/in.bin', 'rb').read()\n"
                                    "print(len(b), os.stat('data/in.bin').st_uid)\nopen('out.bin', 'wb').write(b[::-1])")
        assert rec.text() == "25600 1000\n"
        out = await backend.download("out.bin", tmp_path / "out.bin")
        assert out.read_bytes() == (bytes(range(256)) * 100)[::-1]
        with pytest.raises(FileNotFoundError):
            await backend.download("missing.txt", tmp_path / "x")
        with pytest.raises(PermissionError, match="working directory"):
            await backend.upload(tmp_path / "in.bin", "/etc/in.bin")
        with pytest.raises(FileNotFoundError):
            await backend.upload(tmp_path / "nope", "nope")

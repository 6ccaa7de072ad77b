"""The docker backend under gVisor (``runtime=runsc``): a chosen part of the contract suite and
of the hostile-cell tests, re-run with every sandbox made under runsc (the cases that only read
share one started sandbox, the plugin's ``sandbox``, here under runsc). The engine must have the
runtime registered (``.ci/docker-setup.sh`` does it: Debian's ``runsc``, daemon.json, SIGHUP).
A start costs ≈ 1–2.5 s under runsc (≈ 0.6 s with runc), so the selection stays small."""

from __future__ import annotations

import os

import pytest
import pytest_asyncio

from sandbox_kernel.core.errors import SandboxDied
from tests.plugin.locks import WORKSPACE_VOLUMES
from tests.support import contract, hostile
from tests.support.backends import backends, prepared
from tests.support.recorder import Recorder
from tests.targets import skip_or_fail
from tests.targets.docker import held_by

pytestmark = [pytest.mark.docker, pytest.mark.timeout(240), pytest.mark.asyncio(loop_scope="module")]
RUNTIME = "runsc"


@pytest.fixture
def client(docker_client):
    """The engine's docker-py client, as tests/support/hostile.py's tests take it (each module says
    which engine: here the local one)."""
    return docker_client


@pytest.fixture(scope="module")
def runsc(docker_client):
    """Skips (fails in CI) unless the engine has the runsc runtime."""
    if RUNTIME not in (docker_client.info().get("Runtimes") or {}):
        skip_or_fail(f"the Docker engine has no {RUNTIME} runtime; run `bash .ci/docker-setup.sh` as root")
    return RUNTIME


@pytest.fixture(scope="module")
def backend_name():
    prepared("docker")
    return "docker"


@pytest.fixture(scope="module")
def sandbox_traits(runsc):
    """The plugin's ``sandbox``, which the contract's read-only cases share, runs under runsc."""
    return {"runtime": runsc}


@pytest_asyncio.fixture(loop_scope="module")
async def make_backend(runsc):
    async with backends("docker") as make:
        yield lambda **traits: make(runtime=runsc, **traits)


@pytest_asyncio.fixture(loop_scope="module")
async def make(make_backend, docker_client):
    """``make(**traits)`` → an unstarted backend under runsc; none of its sandboxes outlives the
    test (the module's shared ``sandbox``, held before it, may)."""
    before = held_by(docker_client, os.getpid())
    yield make_backend
    assert held_by(docker_client, os.getpid()) == before


# the contract, under runsc
test_state_persists_and_last_expression_is_the_result = contract.test_state_persists_and_last_expression_is_the_result
test_stdout_streams_live_and_stderr_is_separate = contract.test_stdout_streams_live_and_stderr_is_separate
test_interrupt_stops_a_busy_loop_and_keeps_state = contract.test_interrupt_stops_a_busy_loop_and_keeps_state
test_completion_and_inspection_come_from_the_sandbox_state = \
    contract.test_completion_and_inspection_come_from_the_sandbox_state
test_death_is_reported_and_the_next_cell_gets_a_fresh_sandbox = \
    contract.test_death_is_reported_and_the_next_cell_gets_a_fresh_sandbox
test_files_round_trip = contract.test_files_round_trip

# hostile cells, under runsc
host_listener = hostile.host_listener
test_network_has_no_interface_no_route_and_reaches_no_listener = \
    hostile.test_network_has_no_interface_no_route_and_reaches_no_listener
test_root_is_read_only_tmp_and_workdir_are_writable = hostile.test_root_is_read_only_tmp_and_workdir_are_writable
test_memory_bomb_is_reported_as_out_of_memory = hostile.test_memory_bomb_is_reported_as_out_of_memory


async def test_fork_bomb_stops_the_gvisor_sandbox_at_the_pids_limit_with_a_message(make):
    """Unlike runc (forks fail, the kernel survives), gVisor's host threads count toward the pids
    cgroup: when it is full, runsc itself fails and the whole sandbox stops (or the copies' memory
    runs out first). Contained, reported, and the next cell gets a fresh sandbox."""
    code = ("import os, time\nfor _ in range(2000):\n    if os.fork() == 0:\n        time.sleep(600)\n"
            "        os._exit(0)")
    async with make() as backend:
        # which comes first depends on the forked copies' memory: either is a contained, reported death
        with pytest.raises(SandboxDied, match=r"gVisor \(runsc\) stopped it: .* reach pids_limit \(256; under runsc"
                                              r"|it ran out of memory \(limit 1 GiB\)"):
            await backend.execute(code, Recorder(), timeout=120)
        rec = Recorder()
        await backend.execute("1 + 1", rec)
    assert rec.result() == "2"


async def test_the_sandbox_runs_in_gvisor_with_the_same_hardening(sandbox, docker_client):
    attrs = docker_client.api.inspect_container(sandbox._container.id)
    rec = Recorder()
    await sandbox.execute("import os\nprint(open('/proc/version').read().split()[2], os.getuid(), "
                          "sorted(os.listdir('/sys/class/net')))", rec)
    host = attrs["HostConfig"]
    assert host["Runtime"] == RUNTIME
    assert host["NetworkMode"] == "none" and host["ReadonlyRootfs"] and host["CapDrop"] == ["ALL"]
    version, uid, net = rec.text().split(" ", 2)
    assert version != os.uname().release  # gVisor's own kernel answers, not the host's
    assert (uid, net.strip()) == ("1000", "['lo']")


@pytest.mark.machine_lock(WORKSPACE_VOLUMES)
async def test_read_only_mount_and_workspace_under_gvisor(make, docker_client, tmp_path, test_run):
    tmp_path.chmod(0o777)
    (tmp_path / "in.txt").write_text("host data")
    (tmp_path / "in.txt").chmod(0o666)
    volume = f"sandbox-kernel-test-runsc-{test_run}"
    try:
        async with make(mounts=[f"{tmp_path}:/home/sandbox/data"], workdir_volume=volume) as backend:
            rec = Recorder()
            await backend.execute("print(open('/home/sandbox/data/in.txt').read())\nopen('kept', 'w').write('1')\n"
                                  "try:\n    open('/home/sandbox/data/in.txt', 'a')\nexcept OSError as e:\n"
                                  "    print(e.strerror)", rec)
            await backend.restart()
            after = Recorder()
            await backend.execute("print(open('kept').read())", after)
    finally:
        docker_client.api.remove_volume(volume, force=True)
    assert rec.text() == "host data\nRead-only file system\n" and after.text() == "1\n"
    assert os.listdir(tmp_path) == ["in.txt"]

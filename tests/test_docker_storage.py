"""The host's data and a persistent workspace in docker sandboxes, against the real engine:
``mounts``, ``workdir_volume`` and ``sandbox-kernel gc``, ``gpus`` on an engine without GPUs,
and the kernel's answers to bad mounts and unknown option names."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys

import pytest

from sandbox_kernel.backends.docker import workspace
from sandbox_kernel.core.errors import ConfigError, SandboxStartError
from tests.kernels import kernel, stdout
from tests.kernels import run as run_in_kernel
from tests.plugin.locks import WORKSPACE_VOLUMES
from tests.support.backends import backends
from tests.support.recorder import Recorder
from tests.targets.docker import NOTHING, as_host, held_by

pytestmark = [pytest.mark.docker, pytest.mark.timeout(180),
              pytest.mark.machine_lock(WORKSPACE_VOLUMES)]  # gc --volumes of another run would take a workspace


@pytest.fixture
async def make(docker_client):
    async with backends("docker") as factory:
        yield factory
    assert held_by(docker_client, os.getpid()) == NOTHING


@pytest.fixture
def volume_name(docker_client, test_run):
    """A workspace volume name of this test, removed afterwards."""
    name = f"sandbox-kernel-test-{test_run}-{secrets.token_hex(4)}"
    yield name
    try:
        docker_client.api.remove_volume(name, force=True)
    except Exception:
        pass


async def run(backend, code):
    rec = Recorder()
    outcome = await backend.execute(code, rec)
    return outcome, rec


def gc(*args: str, host: str | None = None) -> str:
    """``sandbox-kernel gc ARGS``' output (run :func:`as_host` ``host``, if given)."""
    done = subprocess.run([*(as_host(host) if host else []), sys.executable, "-m", "sandbox_kernel", "gc", *args],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


# -- mounts ------------------------------------------------------------------------------------------
async def test_read_only_mount_reads_and_refuses_writes(make, tmp_path):
    tmp_path.chmod(0o777)  # writable by anyone on the host: only the mount's read-only flag refuses
    (tmp_path / "data.csv").write_text("a,b\n1,2\n")
    (tmp_path / "data.csv").chmod(0o666)
    code = """
import errno, os
print(open('/home/sandbox/data/data.csv').read().splitlines()[1])
for path in ['/home/sandbox/data/new.txt', '/home/sandbox/data/data.csv']:
    try:
        open(path, 'a').write('x')
        print('written')
    except OSError as exc:
        print(errno.errorcode[exc.errno])
try:
    os.remove('/home/sandbox/data/data.csv')
except OSError as exc:
    print(errno.errorcode[exc.errno])
"""
    async with make(mounts=[f"{tmp_path}:/home/sandbox/data"]) as backend:
        outcome, rec = await run(backend, code)
    assert outcome.status == "ok" and rec.text() == "1,2\nEROFS\nEROFS\nEROFS\n"
    assert sorted(os.listdir(tmp_path)) == ["data.csv"] and (tmp_path / "data.csv").read_text() == "a,b\n1,2\n"


async def test_read_write_mount_writes_files_owned_by_the_kernels_uid(make, tmp_path):
    os.chown(tmp_path, 1000, 1000)  # the sandbox's uid when the kernel runs as root
    out = tmp_path / "out"
    out.mkdir(mode=0o777)
    os.chown(out, 4321, 4321)  # a host user other than root: the kernel runs as that user
    async with make(mounts=[f"{tmp_path}:/home/sandbox/work/results:rw"]) as backend:
        outcome, _ = await run(backend, "open('results/model.txt', 'w').write('fitted')")
    async with make(mounts=[f"{out}:/home/sandbox/out:rw"], user="4321:4321") as backend:
        await run(backend, "open('/home/sandbox/out/log.txt', 'w').write('ok')")
    assert outcome.status == "ok" and (tmp_path / "model.txt").read_text() == "fitted"
    assert ((tmp_path / "model.txt").stat().st_uid, (out / "log.txt").stat().st_uid) == (1000, 4321)


@pytest.mark.parametrize("entry, message", [
    ("/no/such/dir:/home/sandbox/data", "/no/such/dir does not exist on the host"),
    ("data:/home/sandbox/data", "the host path must be absolute"),
    ("{tmp}:/kernel", "a mount over /kernel is not allowed"),
    ("{tmp}:/etc", "the container path must be inside the sandbox's home"),
    ("{tmp}:/home/sandbox/out:rw", "the sandbox runs as 1000:1000, which cannot write"),
    ("{tmp}/private:/home/sandbox/in", "the sandbox runs as 1000:1000, which cannot read"),
])
async def test_bad_mounts_fail_the_start_with_one_message(make, tmp_path, entry, message):
    tmp_path.chmod(0o755)
    (tmp_path / "private").mkdir(mode=0o700)
    backend = make(mounts=[entry.format(tmp=tmp_path)])
    with pytest.raises(ConfigError, match="^Bad option for the docker backend: mount ") as info:
        await backend.start()
    assert message in str(info.value) and "\n" not in str(info.value)
    assert not backend.started


# -- the persistent workspace -----------------------------------------------------------------------
async def test_workspace_survives_a_restart_and_a_new_backend(make, docker_client, volume_name):
    async with make(workdir_volume=volume_name) as first:
        await run(first, "import os\nos.makedirs('models')\nopen('models/m.txt', 'w').write('v1')")
        await first.restart()
        _, after_restart = await run(first, "print(open('models/m.txt').read(), os.getcwd() if 'os' in dir() else '')")
        async with make(workdir_volume=volume_name) as second:  # a second kernel, at the same time
            _, shared = await run(second, "import os\nprint(open('models/m.txt').read(), os.stat('.').st_uid)")
    assert after_restart.text() == "v1 \n" and shared.text() == "v1 1000\n"
    labels = docker_client.api.inspect_volume(volume_name)["Labels"]
    assert labels[workspace.WORKSPACE_LABEL] == volume_name  # and no owner label: leftover removal skips it
    assert not any(key.endswith(".owner") for key in labels)
    async with make(workdir_volume=volume_name) as third:  # after every sandbox of it is gone
        _, later = await run(third, "print(open('models/m.txt').read())")
    assert later.text() == "v1\n"


async def test_workspace_size_limit_or_the_warning_that_it_has_none(make, docker_client, volume_name):
    shown = Recorder()
    backend = make(workdir_volume=volume_name, workdir_size="8m")
    backend.set_progress_handler(shown)
    async with backend:
        outcome, _ = await run(backend, "open('big', 'wb').write(b'x' * 16 * 1024**2)")
    options = docker_client.api.inspect_volume(volume_name).get("Options") or {}
    if "size" in options:  # an engine with project quota
        assert outcome.status == "error" and "No space left" in outcome.error.evalue
    else:
        assert outcome.status == "ok"
        assert f"the workspace volume {volume_name} has no size limit" in shown.text("stderr")


@pytest.mark.machine_lock(WORKSPACE_VOLUMES, exclusive=True)  # --volumes removes every unused workspace volume
async def test_gc_lists_workspaces_and_removes_them_only_with_volumes(make, docker_client, volume_name):
    async with make(workdir_volume=volume_name) as backend:
        await run(backend, "open('f', 'w').write('x')")
        assert f"workspace volume {volume_name} (in use)" in gc("--dry-run", "--volumes")
        assert f"workspace volume {volume_name} (in use: kept)" in gc("--volumes")
    listed = gc("--dry-run")
    assert f"workspace volume {volume_name} (kept; --volumes removes it)" in listed
    assert f"workspace volume {volume_name} (would remove)" in gc("--dry-run", "--volumes")
    assert f"workspace volume {volume_name} (kept" in gc() and docker_client.api.inspect_volume(volume_name)
    assert f"removed {volume_name}" in gc("--volumes")
    assert volume_name not in [v["Name"] for v in docker_client.api.volumes().get("Volumes") or []]


# -- gpus --------------------------------------------------------------------------------------------
async def test_gpus_on_an_engine_without_gpu_support_says_so(make, docker_client):
    if "nvidia" in str(docker_client.info().get("Runtimes", {})):
        pytest.skip("this engine has GPU support")
    backend = make(gpus="all")
    with pytest.raises(SandboxStartError, match=r"gpus=all needs GPU support in the Docker engine, which it lacks\. "
                                                r"Fix: install the NVIDIA Container Toolkit"):
        await backend.start()


# -- through the kernel: one short message, and the kernel keeps answering ---------------------------
@pytest.mark.parametrize("option, message", [
    ("--DockerBackend.memory_limt=2g", "Bad option for the sandbox kernel: unknown option "
                                       "--DockerBackend.memory_limt; did you mean --DockerBackend.memory_limit?"),
    ("--DockerBackend.mounts=/no/such:/home/sandbox/d", "Bad option for the docker backend: mount "
                                                         "'/no/such:/home/sandbox/d': /no/such does not exist"),
])
def test_kernel_reports_bad_options_at_every_cell(docker_client, option, message):
    with kernel("docker", option) as (km, kc):
        for _ in range(2):
            reply, outputs = run_in_kernel(kc, "1 + 1")
            assert reply["status"] == "error" and message in reply["evalue"], reply["evalue"]
            [error] = [m for m in outputs if m["header"]["msg_type"] == "error"]
            assert len(error["content"]["traceback"]) == 1
        assert kc.kernel_info(reply=True)["content"]["status"] == "ok"
        pid = km.provisioner.pid
    assert held_by(docker_client, pid) == NOTHING


def test_kernel_with_a_mount_and_a_workspace(docker_client, tmp_path, volume_name):
    tmp_path.chmod(0o755)
    (tmp_path / "in.txt").write_text("from the host")
    options = (f"--DockerBackend.mounts={tmp_path}:/home/sandbox/data", f"--DockerBackend.workdir_volume={volume_name}")
    with kernel("docker", *options) as (km, kc):
        _, outputs = run_in_kernel(kc, "print(open('/home/sandbox/data/in.txt').read())\nopen('kept', 'w').write('1')")
        km.restart_kernel()
        kc.wait_for_ready(timeout=60)
        _, after = run_in_kernel(kc, "print(open('kept').read())")
    assert stdout(outputs) == "from the host\n" and stdout(after) == "1\n"


def test_magic_line_takes_mounts_and_a_workspace_and_suggests_a_misspelt_option(docker_client, tmp_path, volume_name):
    from tests.support.host import host_kernel

    tmp_path.chmod(0o755)
    (tmp_path / "in.txt").write_text("from the host")
    line = f"%%sandbox --backend docker --name data --mounts {tmp_path}:/home/sandbox/data --workdir-volume {volume_name}"
    with host_kernel("docker") as (_, kc):
        reply, outputs = run_in_kernel(kc, f"{line}\nprint(open('/home/sandbox/data/in.txt').read())\n"
                                           "open('kept', 'w').write('1')")
        restarted = run_in_kernel(kc, "%sandbox restart data")[0]
        _, after = run_in_kernel(kc, "%%sandbox --name data\nprint(open('kept').read())")
        _, typo = run_in_kernel(kc, "%%sandbox --backend docker --name other --workdir-volum x\n1")
        run_in_kernel(kc, "%sandbox stop --all")
    assert reply["status"] == "ok" and stdout(outputs) == "from the host\n"
    assert restarted["status"] == "ok" and stdout(after) == "1\n"
    assert "unknown option --workdir-volum for the docker backend (did you mean --workdir-volume?)" in \
        stdout(typo, "stderr")


def test_gc_dry_run_lists_leftovers_and_removes_nothing(docker_client):
    """The owner and gc run as a host of their own (``as_host``): another test's sandbox start on
    this machine would remove this host's leftovers of a killed owner."""
    host = f"sk-test-{secrets.token_hex(4)}"
    script = ("import asyncio\nfrom sandbox_kernel.backends.docker import DockerBackend\n"
              "async def main():\n    await DockerBackend(session='dry-orphan').start()\n"
              "    print('up', flush=True)\n    await asyncio.sleep(600)\nasyncio.run(main())")
    owner = subprocess.Popen([*as_host(host), sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert owner.stdout.readline() == "up\n"
    owner.kill()
    owner.wait()
    held = held_by(docker_client, owner.pid, host)
    [container] = held["containers"]
    listed = gc("--dry-run", host=host)
    assert f"would remove {container.lstrip('/')}" in listed and "would remove" in listed.splitlines()[-1]
    assert held_by(docker_client, owner.pid, host) == held  # nothing removed, host directory included
    gc(host=host)  # (removal itself: test_docker_leftovers.py)
    assert held_by(docker_client, owner.pid, host) == NOTHING

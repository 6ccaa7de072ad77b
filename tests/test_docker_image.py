"""The docker backend's image: built at the first cell with progress, rebuilt when its recipe
changed, and clear, fast messages for images that cannot run a kernel, a missing image, and a
missing docker-py. Against the real engine (no registry: bases are local images)."""

from __future__ import annotations

import io
import subprocess
import sys
import time

import pytest

from sandbox_kernel.backends.docker.images import RECIPE_LABEL, image_is_current
from sandbox_kernel.core.errors import BackendUnavailable, SandboxStartError
from sandbox_kernel.core.events import Display
from tests.support.backends import backends
from tests.support.recorder import Recorder

pytestmark = [pytest.mark.docker, pytest.mark.timeout(300)]


@pytest.fixture
def scratch_tags(docker_client):
    """Image tags a test makes; removed afterwards (layers are shared with the real images)."""
    tags: list[str] = []
    yield tags
    for tag in tags:
        try:
            docker_client.images.remove(tag, noprune=False)
        except Exception:
            pass


@pytest.fixture
async def make(scratch_tags):
    """Backends made by a test; shut down before its scratch images are removed."""
    async with backends("docker") as factory:
        yield factory


def build(docker_client, tag: str, dockerfile: str) -> None:
    docker_client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, rm=True, forcerm=True)


async def test_first_cell_builds_a_missing_image_with_progress_in_the_cell(make, docker_client, scratch_tags, test_run):
    tag = f"sandbox-kernel:autobuild-{test_run}"  # this run's own: missing at the start
    scratch_tags.append(tag)
    backend = make(image=tag)
    rec = Recorder()
    outcome = await backend.execute("1 + 1", rec)
    assert outcome.status == "ok" and rec.result() == "2"
    progress = [e for e in rec.events if isinstance(e, Display) and e.execution_count is None]
    assert len(progress) >= 2 and not progress[0].update and all(e.update for e in progress[1:])
    assert len({e.display_id for e in progress}) == 1
    assert f"Building the sandbox image {tag}" in progress[0].data["text/plain"]
    assert progress[-1].data["text/plain"].startswith(f"Built the sandbox image {tag} in ")
    assert image_is_current(docker_client, tag)


async def test_an_image_from_an_older_recipe_is_rebuilt(make, docker_client, scratch_tags, test_run):
    tag = f"sandbox-kernel:stale-{test_run}"
    scratch_tags.append(tag)
    build(docker_client, tag, f"FROM sandbox-kernel:latest\nLABEL {RECIPE_LABEL}=older\n")
    assert image_is_current(docker_client, tag) is False
    async with make(image=tag) as backend:
        rec = Recorder()
        await backend.execute("1 + 1", rec)
    assert image_is_current(docker_client, tag)


async def test_auto_build_off_names_the_build_command(make):
    backend = make(image="sandbox-kernel:never-built", auto_build=False)
    with pytest.raises(BackendUnavailable, match=r"Fix: sandbox-kernel image build --tag sandbox-kernel:never-built"):
        await backend.start()


async def test_a_missing_custom_image_is_never_pulled(make):
    backend = make(image="example.org/nobody/nothing:1")
    with pytest.raises(SandboxStartError, match=r"not present locally \(the docker backend never pulls\)"):
        await backend.start()


async def test_an_image_without_python_fails_fast_with_the_fix(make):
    backend = make(image="sandbox-kernel-base:bookworm")  # python3 only
    started = time.monotonic()
    with pytest.raises(SandboxStartError, match=r"has no `python` on its PATH, so it cannot run the kernel\. Fix: .*sandbox-kernel image build --base"):
        await backend.start()
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("transport", ["ipc", "api"])
async def test_an_image_without_ipykernel_fails_fast_with_the_fix(make, docker_client, scratch_tags, transport,
                                                                  test_run):
    tag = f"sandbox-kernel-test:no-ipykernel-{test_run}"
    scratch_tags.append(tag)
    build(docker_client, tag, "FROM sandbox-kernel-base:bookworm\nRUN ln -s /usr/bin/python3 /usr/local/bin/python\n")
    backend = make(image=tag, transport=transport)  # api: the relay itself lacks pyzmq there
    started = time.monotonic()
    with pytest.raises(SandboxStartError, match=r"has no ipykernel\. Fix: add it \(`RUN pip install ipykernel`"):
        await backend.start()
    assert time.monotonic() - started < 5


async def test_missing_docker_py_is_one_message_with_the_fix(make, monkeypatch):
    backend = make()
    for module in [name for name in sys.modules if name == "docker" or name.startswith("docker.")]:
        monkeypatch.delitem(sys.modules, module)
    monkeypatch.setitem(sys.modules, "docker", None)  # import docker -> ImportError
    with pytest.raises(BackendUnavailable, match=r"needs the Python package 'docker'.*Fix: pip install 'sandbox-kernel\[docker\]'"):
        await backend.start()


def test_image_command_line(docker_client):
    cli = [sys.executable, "-m", "sandbox_kernel"]
    current = subprocess.run([*cli, "image", "build", "--if-needed"], capture_output=True, text=True)
    assert current.returncode == 0 and "sandbox-kernel:latest is up to date" in current.stdout
    check = subprocess.run([*cli, "image", "check", "sandbox-kernel-base:bookworm"], capture_output=True, text=True)
    assert check.returncode == 1 and "ipykernel missing" in check.stdout

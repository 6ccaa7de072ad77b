"""A docker sandbox's leftovers against the real engine: those of a killed owner go at the next
start and with ``gc``, a sandbox whose wrapper is killed ends by itself, and ``gc --all`` on an
engine shared by several hosts removes only its own host's. Each test's owner runs as a host of
its own (``as_host``), so that no other test's sweep takes what it checks, and it takes nobody's.
(Split from tests/test_docker.py, whose tests run on its module's event loop: these are plain
functions.)"""

from __future__ import annotations

import ast
import contextlib
import os
import secrets
import subprocess
import sys
import time

import pytest

from sandbox_kernel.backends.docker import engine
from sandbox_kernel.runtime.owners import start_time
from tests.targets.docker import NOTHING, as_host, held_by

pytestmark = [pytest.mark.docker, pytest.mark.timeout(180)]


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

"""What the docker backend does differently on Podman's Docker-compatible API (tests/targets/podman.py
starts the service), beyond the contract suite, which runs there too: the options it would
ignore are refused, and the limits and deaths it reports differently are still said right."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time

import pytest

from sandbox_kernel.backends.docker.engine import OWNER_LABEL, owner
from sandbox_kernel.core.errors import ConfigError, SandboxDied
from tests.support.backends import backends, prepared
from tests.support.hostile import run, test_workdir_has_a_size_limit  # noqa: F401 - collected here
from tests.targets import env_vars
from tests.targets.docker import NOTHING, engine_requests, held_by

pytestmark = [pytest.mark.docker, pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def client():
    """A docker-py client of the session's Podman service (skips, or fails in CI, without it)."""
    import docker

    with env_vars(prepared("podman").kernel_env), contextlib.closing(docker.from_env()) as client:
        yield client


@pytest.fixture
async def make(client):
    """``make(**traits)`` → an unstarted DockerBackend on Podman; nothing of it is left afterwards."""
    async with backends("podman") as factory:
        yield factory
    assert held_by(client, os.getpid()) == NOTHING


async def test_options_podman_would_ignore_are_refused_before_anything_starts(make, client):
    def ours() -> list[str]:  # this process's containers: other test workers use this Podman too
        return [c["Id"] for c in client.api.containers(all=True, filters={"label": OWNER_LABEL})
                if c["Labels"][OWNER_LABEL] == owner()]

    before = ours()
    backend = make(runtime="runsc")
    with pytest.raises(ConfigError, match=r"cannot use runtime='runsc' on Podman: .* runs the sandbox without an "
                                          r"OCI runtime\. Fix: leave runtime empty"):
        await backend.execute("1", lambda event: None)
    assert ours() == before


async def test_a_start_asks_podman_one_ping_and_one_description_never_its_version(make, monkeypatch):
    """Podman 4.3 runs dpkg-query at each ``/version`` and ``/info`` (0.3 s of a start each, and
    half the CPU of a sandbox's whole life): a sandbox's start pings once, whose headers give the
    API version and say Podman (so ``runtime`` is refused, as above), and asks ``/info`` once.
    Before: ``/version`` twice (docker-py's probe, then ours) and ``/info`` twice."""
    paths = engine_requests(monkeypatch)
    async with make() as backend:
        assert (await run(backend, "1 + 1"))[1].result() == "2"
        assert backend._link.podman
    assert paths.count("/_ping") == 1 and paths.count("/info") == 1 and "/version" not in paths, paths


def service_cpu_s() -> float:
    """CPU-seconds used so far by this session's ``podman system service`` (tests/targets/podman.py)."""
    import psutil

    socket = prepared("podman").kernel_env["DOCKER_HOST"].removeprefix("unix://")
    [service] = [p for p in psutil.process_iter(["cmdline"]) if (p.info["cmdline"] or [])[:3] == ["podman", "system", "service"]
                 and p.info["cmdline"][-1].endswith(socket)]
    times = service.cpu_times()
    return times.user + times.system


async def test_an_idle_sandbox_leaves_podman_idle(make):
    """The backend waits for its container's end. Podman's Docker-compatible wait checks the
    container's state with no pause (containers/podman#18150): the service used 0.7-0.9 of a core
    for as long as a sandbox ran (one core per open notebook, on a hub user's engine too). Podman's
    own wait endpoint checks every 250 ms."""
    async with make() as backend:
        assert (await run(backend, "1 + 1"))[1].result() == "2"
        before = service_cpu_s()
        await asyncio.sleep(3)
        used = service_cpu_s() - before
        assert (await run(backend, "2 + 2"))[1].result() == "4"
    assert used < 0.6, f"Podman's service used {used:.2f} CPU-seconds in the 3 s the sandbox was idle"


async def test_memory_bomb_says_it_was_most_likely_out_of_memory(make):
    async with make(memory_limit="256m") as backend:
        started = time.monotonic()
        with pytest.raises(SandboxDied, match=r"killed by SIGKILL, most likely for running out of memory \(limit 256 MiB; "
                                              r"Podman does not report"):
            await run(backend, "hog = []\nfor _ in range(64): hog.append(bytearray(16 * 1024**2))")  # 1 GiB at most
        assert time.monotonic() - started < 10
        assert (await run(backend, "1 + 1"))[1].result() == "2"


async def test_container_killed_from_outside(make, client):
    async with make() as backend:
        await run(backend, "kept = 1")
        running = asyncio.ensure_future(run(backend, "import time\nwhile True: time.sleep(0.1)"))
        await asyncio.sleep(1)
        client.api.kill(backend._container.id)
        with pytest.raises(SandboxDied, match=r"stopped from outside the notebook \(podman kill, stop or rm\)"):
            await running

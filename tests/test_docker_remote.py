"""The docker backend on an engine that does not share this host's filesystem (the rig of
tests/targets/remote_engine.py, reached over TCP with TLS and over ssh) with the engine-API
transport: the backend contract (a cell, live streams, interrupt, timeout, stdin, death, files,
comms; the read-only cases share the plugin's ``sandbox``), death by out-of-memory. Inspected on
the inner engine: no host path of the wrapper is mounted. (Through the installed kernelspec, the
interrupt button and a widget's round trip: tests/test_docker_remote_kernel.py, whose tests are
not on this module's event loop.)"""

from __future__ import annotations

import pytest
import pytest_asyncio

from tests.support.backends import backends, prepared
from tests.support.contract import *  # noqa: F403 - the contract's test_* functions are collected here
from tests.support.hostile import test_memory_bomb_is_reported_as_out_of_memory  # noqa: F401 - collected here
from tests.support.recorder import Recorder
from tests.targets import REMOTE_NAMES, env_vars, remote_engine

pytestmark = [pytest.mark.docker, pytest.mark.timeout(300), pytest.mark.asyncio(loop_scope="module")]


@pytest.fixture(scope="module", params=REMOTE_NAMES)
def backend_name(request) -> str:
    """``docker_tcp``, then ``docker_ssh``: the docker backend on the rig (see tests/targets)."""
    prepared(request.param)
    return request.param


@pytest_asyncio.fixture(loop_scope="module")
async def make_backend(backend_name):
    """``make_backend(**traits)`` → an unstarted DockerBackend for the rig. The rig's environment
    (DOCKER_HOST, ...) holds for the whole test: docker-py reads it when the backend starts."""
    with env_vars(prepared(backend_name).kernel_env):
        async with backends(backend_name) as make:
            yield make


@pytest.fixture
def make(make_backend):
    """The name tests/support/hostile.py uses."""
    return make_backend


@pytest.fixture(scope="module")
def client(backend_name):
    """A docker-py client of the rig's engine, reached as the backend reaches it."""
    inner = remote_engine.session_rig().client(prepared(backend_name).kernel_env)
    yield inner
    inner.close()


async def test_no_host_path_of_the_wrapper_is_mounted_and_auto_picks_the_api(make_backend, client):
    async with make_backend(transport="auto") as backend:
        rec = Recorder()
        await backend.execute("import os\nprint(os.getcwd())", rec)
        attrs = client.api.inspect_container(backend._container.id)
        assert backend.describe()["transport"] == "api"
    assert rec.text().strip() == "/home/sandbox/work"
    assert [m for m in attrs["Mounts"] if m["Type"] == "bind"] == []
    assert not attrs["HostConfig"]["Binds"]
    host = attrs["HostConfig"]
    assert host["NetworkMode"] == "none" and host["ReadonlyRootfs"] and host["CapDrop"] == ["ALL"]


async def test_transport_ipc_on_a_remote_engine_is_one_message_naming_the_option(make_backend):
    from sandbox_kernel.core.errors import ConfigError

    backend = make_backend(transport="ipc")
    with pytest.raises(ConfigError, match=r"transport=ipc needs an engine on this machine.*transport=api"):
        await backend.execute("1", Recorder())


async def test_mounts_name_paths_on_the_engines_host(make_backend, tmp_path):
    """A path of the engine's host (the rig's sshd config, absent from this machine's checks)
    mounts; a path that exists only on this machine is refused by the engine, in one message."""
    from sandbox_kernel.core.errors import SandboxStartError

    async with make_backend(mounts=["/etc/ssh:/home/sandbox/ssh"]) as backend:
        rec = Recorder()
        await backend.execute("import os\nprint('sshd_config' in os.listdir('/home/sandbox/ssh'))", rec)
    assert rec.text() == "True\n"
    (tmp_path / "only-here").mkdir()
    backend = make_backend(mounts=[f"{tmp_path}/only-here:/home/sandbox/data"])
    with pytest.raises(SandboxStartError, match=rf"host path {tmp_path}/only-here does not exist on the Docker "
                                                r"engine's host\. `mounts` name paths on the engine's host"):
        await backend.execute("1", Recorder())

"""The docker backend on an engine that does not share this host's filesystem (the rig of
tests/targets/remote_engine.py, reached over TCP with TLS and over ssh) with the engine-API
transport: the backend contract (a cell, live streams, interrupt, timeout, stdin, death, files,
comms), death by out-of-memory, and through the installed kernelspec, the interrupt button and a
widget's round trip. Inspected on the inner engine: no host path of the wrapper is mounted."""

from __future__ import annotations

import threading
import time

import pytest
import pytest_asyncio

from tests.kernels import kernel, run
from tests.support.backends import backends, prepared
from tests.support.contract import *  # noqa: F403 - the contract's test_* functions are collected here
from tests.support.hostile import test_memory_bomb_is_reported_as_out_of_memory  # noqa: F401 - collected here
from tests.support.recorder import Recorder
from tests.support.widgets import WidgetFrontend, comm_msgs, result
from tests.targets import REMOTE_NAMES, env_vars, remote_engine

pytestmark = [pytest.mark.docker, pytest.mark.timeout(300), pytest.mark.asyncio(loop_scope="module")]


@pytest.fixture(scope="module", params=REMOTE_NAMES)
def backend_name(request) -> str:
    """``docker_tcp``, then ``docker_ssh``: the docker backend on the rig (see tests/targets)."""
    prepared(request.param)
    return request.param


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sandbox(backend_name):
    """A started DockerBackend on the rig that the contract's read-only cases share."""
    async with backends(backend_name) as make, make() as backend:
        yield backend


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


@pytest.fixture(scope="module")
def remote_kernel(backend_name):
    """The installed ``sandbox-docker`` kernelspec started as a notebook starts it, on the rig."""
    with kernel(backend_name) as (km, kc):
        yield km, kc


def test_the_interrupt_button_stops_a_busy_loop_and_state_survives(remote_kernel):
    km, kc = remote_kernel
    run(kc, "survivor = 'alive'")
    delay = 1.5
    threading.Timer(delay, km.interrupt_kernel).start()
    started = time.monotonic()
    reply, _ = run(kc, "while True: pass", timeout=30)
    assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt"
    assert time.monotonic() - started - delay < 2.0
    assert result(run(kc, "survivor")[1])["text/plain"] == "'alive'"


def test_a_widget_moves_both_ways(remote_kernel):
    frontend = WidgetFrontend(remote_kernel[1])
    reply, outputs = frontend.execute("import ipywidgets as widgets\ns = widgets.IntSlider(value=1, max=10)\ns")
    assert reply["status"] == "ok"
    slider = frontend.find("IntSliderModel")
    [echo] = comm_msgs(frontend.update(slider, {"value": 9}), slider, "echo_update")
    assert echo["content"]["data"]["state"] == {"value": 9}
    assert result(frontend.execute("s.value")[1])["text/plain"] == "9"
    _, outputs = frontend.execute("s.value = 5")
    assert [m["content"]["data"]["state"] for m in comm_msgs(outputs, slider, "update")] == [{"value": 5}]

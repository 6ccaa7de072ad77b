"""The installed ``sandbox-docker`` kernelspec on an engine that does not share this host's
filesystem (the rig of tests/targets/remote_engine.py, over TCP with TLS and over ssh), started
as a notebook starts it: the interrupt button, and a widget's round trip. (The backend contract
on the rig: tests/test_docker_remote.py; these tests are plain functions, off its event loop.)"""

from __future__ import annotations

import pytest

from tests.kernels import interrupted_loop, kernel, run
from tests.support.backends import prepared
from tests.support.widgets import WidgetFrontend, comm_msgs, result
from tests.targets import REMOTE_NAMES

pytestmark = [pytest.mark.docker, pytest.mark.timeout(300)]


@pytest.fixture(scope="module", params=REMOTE_NAMES)
def backend_name(request) -> str:
    """``docker_tcp``, then ``docker_ssh``: the docker backend on the rig (see tests/targets)."""
    prepared(request.param)
    return request.param


@pytest.fixture(scope="module")
def remote_kernel(backend_name):
    """The installed ``sandbox-docker`` kernelspec started as a notebook starts it, on the rig."""
    with kernel(backend_name) as (km, kc):
        yield km, kc


def test_the_interrupt_button_stops_a_busy_loop_and_state_survives(remote_kernel):
    km, kc = remote_kernel
    run(kc, "survivor = 'alive'")
    reply, took = interrupted_loop(km, kc)
    assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt"
    assert took < 2.0
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

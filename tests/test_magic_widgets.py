"""ipywidgets made in ``%%sandbox`` cells, through a plain ``python3`` host kernel (issue 18).

The host kernel is a real ipykernel with ``%load_ext magics``; :class:`WidgetFrontend` speaks to it
as JupyterLab's widget manager does. Every test runs on local and on docker (the real engine).
"""

from __future__ import annotations

import time

import pytest

from tests.kernels import stdout
from tests.support.backends import prepared
from tests.support.widgets import (
    INTERACT,
    WIDGET_VIEW,
    WidgetFrontend,
    check_interact,
    comm_msgs,
    e2b_widget_notes,
    result,
)

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(300)]


@pytest.fixture(scope="module", params=["local", "docker"])
def host(request):
    from tests.support.host import host_kernel

    prepared(request.param)
    with host_kernel(request.param) as (_, kc):
        frontend = WidgetFrontend(kc)
        frontend.backend = request.param
        assert frontend.execute(f"%%sandbox --backend {request.param} --name w\n1")[0]["status"] == "ok"
        yield frontend


def cell(code: str, name: str = "w") -> str:
    return f"%%sandbox --name {name}\n{code}"


def test_slider_moves_both_ways(host):
    reply, outputs = host.execute(cell("import ipywidgets as widgets\ns = widgets.IntSlider(value=1, max=10)\ns"))
    assert reply["status"] == "ok"
    slider = host.find("IntSliderModel")
    assert result(outputs)[WIDGET_VIEW]["model_id"] == slider
    comms = host.kc.comm_info(target_name="jupyter.widget", reply=True)["content"]["comms"]
    assert comms[slider] == {"target_name": "jupyter.widget"}  # the host's comm manager knows it

    caused = host.update(slider, {"value": 9})  # the page moves it
    [echo] = comm_msgs(caused, slider, "echo_update")
    assert echo["content"]["data"]["state"] == {"value": 9}
    assert result(host.execute(cell("s.value"))[1])["text/plain"] == "9"

    _, outputs = host.execute(cell("s.value = 5"))  # the sandbox moves it
    assert [m["content"]["data"]["state"] for m in comm_msgs(outputs, slider, "update")] == [{"value": 5}]
    assert host.models[slider]["value"] == 5


def test_interact_output_lands_in_its_output_widget(host):
    caused = check_interact(host, cell(INTERACT))
    assert all(m["parent_header"]["msg_id"] == caused[0]["parent_header"]["msg_id"] for m in caused)


def test_button_callback_runs_after_its_cell_ended(host):
    host.execute(cell("import ipywidgets as widgets\nclicks = []\nb = widgets.Button(description='go')\n"
                      "b.on_click(lambda b: (clicks.append(1), print('clicked')))\nb"))
    button = host.find("ButtonModel", description="go")
    time.sleep(1)
    host.execute("x = 1  # a host cell in between")
    caused = host.send("comm_msg", {"comm_id": button, "data": {"method": "custom", "content": {"event": "click"}}})
    assert stdout(caused) == "clicked\n"
    assert result(host.execute(cell("len(clicks)"))[1])["text/plain"] == "1"


def test_widget_state_passes_the_output_policy(host):
    hostile = '<img src=x onerror="fetch(1)"><b>ok</b>'
    reply, outputs = host.execute(cell(f"import ipywidgets as widgets\nh = widgets.HTML({hostile!r})\nh"))
    assert reply["status"] == "ok"
    assert host.models[host.find("HTMLModel", value='<img src="x"><b>ok</b>')]
    assert "[output policy 'sanitize'" in stdout(outputs, "stderr")


def test_thread_changes_between_cells_reach_the_page(host):
    host.execute(cell("import threading, ipywidgets as widgets\nlate = widgets.IntSlider(description='late')\n"
                      "threading.Timer(0.5, lambda: setattr(late, 'value', 7)).start()"))
    slider = host.find("IntSliderModel", description="late")
    deadline = time.monotonic() + 20
    while host.models[slider]["value"] != 7 and time.monotonic() < deadline:
        host.take(host.kc.get_iopub_msg(timeout=20))
    assert host.models[slider]["value"] == 7


def test_sessions_do_not_mix_and_stop_closes_the_comms(host):
    host.execute(cell("import ipywidgets as widgets\nmine = widgets.IntText(description='other')", name="other2")
                 .replace("%%sandbox", f"%%sandbox --backend {host.backend}"))
    other = host.find("IntTextModel", description="other")
    host.update(other, {"value": 4})
    assert result(host.execute(cell("mine.value", name="other2"))[1])["text/plain"] == "4"
    assert "NameError" in str(host.execute(cell("mine"))[0].get("ename"))  # not in session w
    _, outputs = host.execute("%sandbox stop other2")
    closed = [m["content"]["comm_id"] for m in outputs if m["header"]["msg_type"] == "comm_close"]
    assert other in closed and len(closed) == 3  # the IntText, its Layout and its style
    assert not set(closed) & set(host.kc.comm_info(reply=True)["content"]["comms"])


def test_restart_closes_the_sessions_comms(host):
    host.execute(cell("import ipywidgets as widgets\nbefore = widgets.IntText(description='before-restart')"))
    text = host.find("IntTextModel", description="before-restart")
    _, outputs = host.execute("%sandbox restart w")
    assert text in [m["content"]["comm_id"] for m in outputs if m["header"]["msg_type"] == "comm_close"]
    assert text not in host.kc.comm_info(reply=True)["content"]["comms"]


def test_e2b_says_once_that_widgets_cannot_work():
    from tests.support.host import host_kernel

    prepared("e2b")
    with host_kernel("e2b") as (_, kc):
        frontend = WidgetFrontend(kc)
        notes = e2b_widget_notes(frontend, "%%sandbox --backend e2b --name e\nimport ipywidgets as widgets\n"
                                           "widgets.IntSlider(value=3)")
        assert "ipywidgets cannot work with the e2b backend" in notes[0] and notes[1] == ""
        assert not [s for s in frontend.models.values() if s.get("_model_name") == "IntSliderModel"]

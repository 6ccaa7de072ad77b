"""ipywidgets through the sandbox kernel, and the magic's own widgets.

The kernels are the installed kernelspecs started through jupyter_client; :class:`WidgetFrontend`
sends and reads comm messages as JupyterLab's widget manager (jupyterlab_widgets 3, ipywidgets 8)
does: widget models by comm_id from ``comm_open`` and ``comm_msg`` ``update``/``echo_update``
with binary buffers put back at their ``buffer_paths``; user changes as ``comm_msg`` ``update``
(binary values as buffers), clicks as ``custom`` messages; on connect, the ``jupyter.widget.control``
comm's ``request_states``. Every test of the round trip runs on local and on docker (the real engine).
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import time

import pytest

from tests.kernels import kernel, python3, stdout
from tests.support.backends import prepared
from tests.support.widgets import (
    INTERACT,
    WIDGET_VIEW,
    WidgetFrontend,
    check_interact,
    comm_msgs,
    e2b_widget_notes,
    put_buffers,
    result,
)

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(300)]

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 64  # binary state: travels as a buffer, never as JSON


@pytest.fixture(scope="module", params=["local", "docker", "gateway"])
def frontend(request):
    """A sandbox kernel of each comm-carrying backend, with a widget-manager frontend."""
    prepared(request.param)
    with kernel(request.param) as (_, kc):
        yield WidgetFrontend(kc)


# -- the round trip, both ways ---------------------------------------------------------------------
def test_slider_renders_and_moves_both_ways(frontend):
    reply, outputs = frontend.execute("import ipywidgets as widgets\ns = widgets.IntSlider(value=1, max=10)\ns")
    assert reply["status"] == "ok"
    slider = frontend.find("IntSliderModel")
    assert frontend.models[slider]["value"] == 1
    assert result(outputs)[WIDGET_VIEW]["model_id"] == slider  # the view JupyterLab renders

    caused = frontend.update(slider, {"value": 9})  # the user drags the slider
    [echo] = comm_msgs(caused, slider, "echo_update")  # before the request's idle, parented by it
    assert echo["content"]["data"]["state"] == {"value": 9}
    assert result(frontend.execute("s.value")[1])["text/plain"] == "9"

    _, outputs = frontend.execute("s.value = 5")  # a cell moves the slider
    assert [m["content"]["data"]["state"] for m in comm_msgs(outputs, slider, "update")] == [{"value": 5}]
    assert frontend.models[slider]["value"] == 5

    comms = frontend.kc.comm_info(target_name="jupyter.widget", reply=True)["content"]["comms"]
    assert comms[slider] == {"target_name": "jupyter.widget"}


def test_binary_state_travels_as_buffers_both_ways(frontend):
    _, outputs = frontend.execute(f"import ipywidgets as widgets\nimg = widgets.Image(value={PNG!r}, format='png')")
    image = frontend.find("ImageModel")
    [opened] = [m for m in outputs if m["header"]["msg_type"] == "comm_open" and m["content"]["comm_id"] == image]
    assert opened["content"]["data"]["buffer_paths"] == [["value"]] and opened["buffers"][0] == PNG
    assert frontend.models[image]["value"] == PNG

    new = PNG[::-1] * 3
    [echo] = comm_msgs(frontend.update(image, {}, buffers={"value": new}), image, "echo_update")
    assert echo["buffers"][0] == new
    assert result(frontend.execute(f"img.value == {new!r}")[1])["text/plain"] == "True"

    _, outputs = frontend.execute("img.value = img.value[:1000]")
    [update] = comm_msgs(outputs, image, "update")
    assert update["buffers"][0] == new[:1000] and frontend.models[image]["value"] == new[:1000]


def test_widget_manager_restores_state_on_reconnect(frontend):
    """A page reload: the ``jupyter.widget.control`` comm's ``request_states`` brings every model's
    state back, binary values as buffers."""
    frontend.execute(f"import ipywidgets as widgets\nkept = widgets.Image(value={PNG!r})\nkept_id = kept.model_id")
    kept = result(frontend.execute("kept_id")[1])["text/plain"].strip("'")
    control = "control-" + os.urandom(4).hex()
    assert frontend.send("comm_open", {"comm_id": control, "target_name": "jupyter.widget.control", "data": {}},
                         metadata={"version": "1.0.0"}) == []
    [reply] = comm_msgs(frontend.send("comm_msg", {"comm_id": control, "data": {"method": "request_states"}}),
                        control, "update_states")
    data = reply["content"]["data"]
    put_buffers(data["states"], data["buffer_paths"], reply["buffers"])
    assert data["states"][kept]["state"]["value"] == PNG
    frontend.send("comm_close", {"comm_id": control, "data": {}})


def test_interact_re_renders_into_its_output_widget(frontend):
    # the Output widget captures what has its msg_id as parent: the frontend's own request
    caused = check_interact(frontend, INTERACT)
    assert "clear_output" in [m["header"]["msg_type"] for m in caused]
    assert result(frontend.execute("shown.widget.kwargs")[1])["text/plain"] == "{'x': 5}"


def test_button_click_runs_its_callback_in_the_sandbox(frontend):
    frontend.execute("import ipywidgets as widgets\nclicks = []\nb = widgets.Button(description='go')\n"
                     "b.on_click(lambda b: (clicks.append(1), print('clicked')))")
    button = frontend.find("ButtonModel", description="go")
    caused = frontend.send("comm_msg", {"comm_id": button, "data": {"method": "custom", "content": {"event": "click"}}})
    assert stdout(caused) == "clicked\n"
    assert result(frontend.execute("len(clicks)")[1])["text/plain"] == "1"


def test_frontend_closes_a_comm(frontend):
    frontend.execute("import ipywidgets as widgets\ngone = widgets.IntText()")
    text = frontend.find("IntTextModel")
    frontend.send("comm_close", {"comm_id": text, "data": {}})
    assert text not in frontend.kc.comm_info(reply=True)["content"]["comms"]


def test_changes_between_cells_reach_the_frontend(frontend):
    """A sandbox thread moves a widget after its cell ended: the update is published at once,
    parented by a request this frontend sent (JupyterLab routes it by comm_id)."""
    frontend.execute("import threading, ipywidgets as widgets\nlate = widgets.IntSlider(description='late')\n"
                     "threading.Timer(0.5, lambda: setattr(late, 'value', 7)).start()")
    slider = frontend.find("IntSliderModel", description="late")
    deadline = time.monotonic() + 20
    while frontend.models[slider]["value"] != 7 and time.monotonic() < deadline:
        msg = frontend.kc.get_iopub_msg(timeout=20)
        frontend.take(msg)
        frontend.elsewhere.append(msg)
    [update] = comm_msgs(frontend.elsewhere, slider, "update")
    assert update["parent_header"]["msg_id"] in frontend.requests


def test_a_message_for_an_unknown_comm_beside_a_cell_shows_in_no_cell(frontend):
    """A reopened JupyterLab asks each widget for its state while a cell may run; the sandbox's
    ipykernel 7.4 handles a comm message beside the busy cell and logs "No such comm" for one it
    does not know, with no parent header, so python3's frontend shows it in no cell. CI once found
    that line as the running cell's first output: a parentless output was given the latest request
    as its parent. Now it keeps no parent, as python3's."""
    kc = frontend.kc
    # the cell also publishes a parentless stream itself, as ipykernel does for a comm handled beside
    # it: the latest request is then this cell's, which the comm relay's own request may not be
    msg_id = kc.execute("print('started', flush=True)\nk = get_ipython().kernel\n"
                        "k.session.send(k.iopub_socket, 'stream', {'name': 'stderr', 'text': 'parentless\\n'}, "
                        "parent={}, ident=b'stream')\nimport time\ntime.sleep(3)\nprint('slept')")
    frontend.requests.add(msg_id)
    seen = []
    while not any(m["msg_type"] == "stream" and "started" in m["content"]["text"] for m in seen):
        msg = kc.get_iopub_msg(timeout=60)
        (seen if msg["parent_header"].get("msg_id") == msg_id else frontend.elsewhere).append(msg)
    kc.shell_channel.send(kc.session.msg("comm_msg", {"comm_id": "no-such-comm-1234", "data": {
        "method": "request_state"}}))
    cell = seen + frontend.until_idle(msg_id)
    assert "".join(m["content"]["text"] for m in cell if m["msg_type"] == "stream") == "started\nslept\n"
    late = time.monotonic() + 20  # its handling after the cell (ipykernel handles it twice)
    while time.monotonic() < late and not any("No such comm" in str(m["content"]) for m in frontend.elsewhere):
        with contextlib.suppress(queue.Empty):
            frontend.elsewhere.append(kc.get_iopub_msg(timeout=0.5))
    logged = [m for m in frontend.elsewhere if "No such comm: no-such-comm-1234" in str(m["content"])]
    assert logged and all(m["parent_header"].get("msg_id") != msg_id for m in logged)
    assert [m["parent_header"] for m in frontend.elsewhere if "parentless" in str(m["content"])] == [{}]


SLOW_INTERACT = ("from ipywidgets import interact\nimport time\ndef draw(freq):\n    time.sleep(0.5)\n"
                 "    print('drawn:', freq)\nshown = interact(draw, freq=(0, 10))")
"""An ``interact`` whose drawing takes 0.5 s: a dragged slider's next change comes meanwhile."""


def two_changes(frontend: WidgetFrontend) -> list[str]:
    """Show :data:`SLOW_INTERACT`, send the slider's changes to 2 and to 8 at once (the second
    arrives while the first is handled), and return what IOPub carried for them until the idle
    of the second, one line each: ``[2] status: busy``, ``[8] stream: drawn: 8``..."""
    _, outputs = frontend.execute(SLOW_INTERACT)
    opened = {m["content"]["data"]["state"]["_model_name"]: m["content"]["comm_id"] for m in outputs
              if m["msg_type"] == "comm_open" and m["content"].get("target_name") == "jupyter.widget"}
    slider, out = opened["IntSliderModel"], opened["OutputModel"]
    kc, names = frontend.kc, {}
    for value in (2, 8):
        msg = kc.session.msg("comm_msg", {"comm_id": slider, "data": {
            "method": "update", "state": {"value": value}, "buffer_paths": []}})
        kc.session.send(kc.shell_channel.socket, msg)
        names[msg["header"]["msg_id"]] = str(value)
    seen, deadline = [], time.monotonic() + 30
    while not seen or seen[-1] != "[8] status: idle":
        try:
            msg = kc.get_iopub_msg(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            raise AssertionError(f"no idle for the change to 8 in 30 s; IOPub carried {seen}") from None
        parent, kind, content = names.get(msg["parent_header"].get("msg_id")), msg["msg_type"], msg["content"]
        if parent is None:
            continue
        if kind == "status":
            what = content["execution_state"]
        elif kind == "stream":
            what = content["text"].strip()
        elif kind == "comm_msg" and content["comm_id"] == out:
            what = "output msg_id " + names.get(content["data"]["state"].get("msg_id"), "''")
        else:
            what = content.get("data", {}).get("method", "")
        seen.append(f"[{parent}] {kind}: {what}")
    return seen


@pytest.fixture(scope="module")
def python3_two_changes() -> list[str]:
    """:func:`two_changes` on a plain python3 kernel (ipykernel 7.4): the reference."""
    with python3() as (_, kc):
        return two_changes(WidgetFrontend(kc))


def test_a_change_that_comes_while_another_is_handled_gets_its_turn_and_status(frontend, python3_two_changes):
    """python3 handles a slider's second change after the first, each between a busy and an idle
    of its own. The wrapper's handling of a comm message awaits the sandbox, so ipykernel 7.4
    dispatched the second beside it, with no status at all; ipywidgets' frontend sends a model's
    next change only at the idle of its last one, so every later change was held back (in
    Voilà the plot stayed one value behind the slider)."""
    assert python3_two_changes == [
        "[2] status: busy", "[2] comm_msg: echo_update", "[2] comm_msg: output msg_id 2", "[2] clear_output: ",
        "[2] stream: drawn: 2", "[2] comm_msg: output msg_id ''", "[2] status: idle",
        "[8] status: busy", "[8] comm_msg: echo_update", "[8] comm_msg: output msg_id 8", "[8] clear_output: ",
        "[8] stream: drawn: 8", "[8] comm_msg: output msg_id ''", "[8] status: idle"]
    assert two_changes(frontend) == python3_two_changes


def change_during_a_cell(frontend: WidgetFrontend) -> list[str]:
    """A slider's change sent while a sync cell sleeps 2 s, on the main shell; returns what IOPub
    carried for the cell and the change until the change's idle (30 s at most), one line each."""
    _, outputs = frontend.execute("import ipywidgets as w\nduring = w.IntSlider()\nduring")
    [slider] = [m["content"]["comm_id"] for m in outputs if m["msg_type"] == "comm_open"
                and m["content"]["data"]["state"].get("_model_name") == "IntSliderModel"]
    kc = frontend.kc
    cell = kc.execute("import time\ntime.sleep(2)")
    names, seen, sent = {cell: "cell"}, [], False
    deadline = time.monotonic() + 30
    while "[change] status: idle" not in seen:
        try:
            msg = kc.get_iopub_msg(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            raise AssertionError(f"no idle for the change in 30 s; IOPub carried {seen}") from None
        parent = names.get(msg["parent_header"].get("msg_id"))
        if parent is not None:
            kind, content = msg["msg_type"], msg["content"]
            seen.append(f"[{parent}] {kind}: {content.get('execution_state', content.get('data', {}).get('method', ''))}")
        if msg["msg_type"] == "execute_input" and not sent:  # the cell runs: the change comes beside it
            change = kc.session.msg("comm_msg", {"comm_id": slider, "data": {
                "method": "update", "state": {"value": 7}, "buffer_paths": []}})
            kc.session.send(kc.shell_channel.socket, change)
            names[change["header"]["msg_id"]], sent = "change", True
    return seen


@pytest.fixture(scope="module")
def python3_change_during_a_cell() -> list[str]:
    """:func:`change_during_a_cell` on a plain python3 kernel: the reference (one for every target)."""
    with python3() as (_, kc):
        return change_during_a_cell(WidgetFrontend(kc))


def test_a_change_made_while_a_cell_runs_gets_a_busy_and_an_idle_after_it(frontend, python3_change_during_a_cell):
    """python3 handles a widget's change sent on the main shell during a sync cell after the cell,
    with a busy and an idle. The wrapper relays it into the sandbox at once, beside the cell, so
    ipykernel 7.4 gave it no status; ipywidgets' frontend then held back that widget's every later
    change. The sandbox's kernel answers it with an idle after its cell: so does the wrapper now."""
    assert python3_change_during_a_cell == ["[cell] status: busy", "[cell] execute_input: ", "[cell] status: idle",
                                           "[change] status: busy", "[change] comm_msg: echo_update",
                                           "[change] status: idle"]
    seen = change_during_a_cell(frontend)
    assert [line for line in seen if line.startswith("[change] status")] == \
        ["[change] status: busy", "[change] status: idle"]
    assert seen.index("[cell] status: idle") < seen.index("[change] status: busy")
    assert seen.index("[change] comm_msg: echo_update") < seen.index("[change] status: idle")


def test_widget_state_passes_the_output_policy(frontend):
    """HTML-bearing state is sanitized at comm_open, on updates from a cell and from a sandbox
    thread, and in the state a reloaded page restores; widgets of other modules never open."""
    hostile = '<img src=x onerror="fetch(1)"><b>ok</b>'
    reply, outputs = frontend.execute(
        f"import threading, ipywidgets as widgets, traitlets\nh = widgets.HTML({hostile!r})\n"
        "class Evil(widgets.DOMWidget):\n    _model_module = traitlets.Unicode('evil-module').tag(sync=True)\n"
        "    _model_name = traitlets.Unicode('EvilModel').tag(sync=True)\nevil = Evil()\nh")
    assert reply["status"] == "ok"
    html = frontend.find("HTMLModel")
    assert frontend.models[html]["value"] == '<img src="x"><b>ok</b>'
    assert not [s for s in frontend.models.values() if s.get("_model_module") == "evil-module"]
    notes = stdout(outputs, "stderr")
    assert "[output policy 'sanitize'" in notes and "'evil-module' was not shown" in notes
    frontend.execute(f"h.value = {hostile!r} + 'cell'")
    assert frontend.models[html]["value"] == '<img src="x"><b>ok</b>cell'
    frontend.execute(f"threading.Timer(0.3, lambda: setattr(h, 'value', {hostile!r} + 'thread')).start()")
    deadline = time.monotonic() + 20
    while not frontend.models[html]["value"].endswith("thread") and time.monotonic() < deadline:
        frontend.take(frontend.kc.get_iopub_msg(timeout=20))
    assert frontend.models[html]["value"] == '<img src="x"><b>ok</b>thread'
    control = "control-" + os.urandom(4).hex()
    frontend.send("comm_open", {"comm_id": control, "target_name": "jupyter.widget.control", "data": {}},
                  metadata={"version": "1.0.0"})
    [restore] = comm_msgs(frontend.send("comm_msg", {"comm_id": control, "data": {"method": "request_states"}}),
                          control, "update_states")
    states = restore["content"]["data"]["states"]
    assert states[html]["state"]["value"] == '<img src="x"><b>ok</b>thread'
    assert not [s for s in states.values() if s["model_module"] == "evil-module"]
    frontend.send("comm_close", {"comm_id": control, "data": {}})


def test_a_link_that_would_copy_text_into_markup_is_refused(frontend):
    """``jsdlink`` copies in the browser, where no policy runs: Text.value into HTML.value would be
    unpoliced innerHTML, so the link model never opens (issue 16)."""
    reply, outputs = frontend.execute(
        "import ipywidgets as widgets\nsrc = widgets.Text('<img src=x onerror=alert(1)>')\n"
        "dst = widgets.HTML('safe', description='d')\n"
        "bad = [widgets.jsdlink((src, 'value'), (dst, t)) for t in ('value', 'description', 'description_allow_html')]")
    assert reply["status"] == "ok"
    assert not [s for s in frontend.models.values() if s.get("_model_name") == "DirectionalLinkModel"]
    assert "[a widget link (jslink/jsdlink) to 'value' of a HTMLModel was not made" in stdout(outputs, "stderr")
    assert frontend.models[frontend.find("HTMLModel", description="d")]["value"] == "safe"


def test_ordinary_widgets_keep_their_state_under_the_typed_rules(frontend):
    """A jslink of two sliders, a styled Button with an icon, a Layout, an Output widget with a
    display, a Dropdown and a DatePicker pass without a note and with their state."""
    reply, outputs = frontend.execute(
        "import datetime, ipywidgets as widgets\na = widgets.IntSlider(value=2, description='a')\n"
        "b = widgets.IntSlider(description='b')\nlink = widgets.jslink((a, 'value'), (b, 'value'))\n"
        "go = widgets.Button(description='Go', icon='check', button_style='success', tooltip='run it',\n"
        "    style={'button_color': 'lightgreen', 'font_weight': 'bold', 'font_family': \"'Courier New', mono\"},\n"
        "    layout=widgets.Layout(width='120px', border='1px solid red', grid_area='main'))\n"
        "pick = widgets.Dropdown(options=['x', 'y'], value='y', description=r'pick $\\frac{x_1}{2}$')\n"
        "day = widgets.DatePicker(value=datetime.date(2026, 11, 24), description='day')\n"
        "from IPython.display import HTML\nout = widgets.Output()\nout.add_class('typed-out')\nout.append_display_data(HTML('<b>inside</b>'))\n"
        "out.append_stdout('printed\\n')\nwidgets.VBox([a, b, go, pick, day, out])")
    assert reply["status"] == "ok" and stdout(outputs, "stderr") == ""
    link = frontend.find("LinkModel")
    first, second = frontend.find("IntSliderModel", description="a"), frontend.find("IntSliderModel", description="b")
    assert frontend.models[link]["target"] == [f"IPY_MODEL_{second}", "value"]
    assert frontend.models[first]["value"] == 2
    go = frontend.models[frontend.find("ButtonModel", description="Go")]
    assert go["icon"] == "check" and go["button_style"] == "success" and go["tooltip"] == "run it"
    style, layout = frontend.models[go["style"][len("IPY_MODEL_"):]], frontend.models[go["layout"][len("IPY_MODEL_"):]]
    assert style["button_color"] == "lightgreen" and style["font_weight"] == "bold"
    assert style["font_family"] == '"Courier New", mono'  # the policy's canonical CSS, said as no change
    assert layout["width"] == "120px" and layout["border_top"] == "1px solid red" and layout["grid_area"] == "main"
    pick = frontend.models[frontend.find("DropdownModel")]
    assert pick["index"] == 1 and pick["description"] == r"pick $\frac{x_1}{2}$"  # maths MathJax may typeset
    assert frontend.models[frontend.find("DatePickerModel")]["value"] == {"year": 2026, "month": 10, "date": 24}
    inside = frontend.models[frontend.find("OutputModel", _dom_classes=["typed-out"])]["outputs"]
    assert inside[0]["data"]["text/html"] == "<b>inside</b>" and inside[1]["text"] == "printed\n"
    caused = frontend.update(first, {"value": 7})  # the user drags a slider
    assert [m["content"]["data"]["state"] for m in comm_msgs(caused, first, "echo_update")] == [{"value": 7}]


# -- where comms cannot go -------------------------------------------------------------------------
def test_widget_manager_connecting_does_not_start_a_sandbox():
    """At connect JupyterLab opens ``jupyter.widget.control``: with no sandbox running, no target
    can take it, so it is closed at once, as a kernel without the target does. (The sandbox
    starts at the first cell here: local's default starts it at launch.)"""
    with kernel("local", "--SandboxKernel.start_sandbox_at_launch=False") as (_, kc):
        frontend = WidgetFrontend(kc)
        caused = frontend.send("comm_open", {"comm_id": "c1", "target_name": "jupyter.widget.control", "data": {}})
        assert [(m["header"]["msg_type"], m["content"]["comm_id"]) for m in caused] == [("comm_close", "c1")]
        assert kc.comm_info(reply=True)["content"]["comms"] == {}
        assert "sandbox_id=" not in kc.kernel_info(reply=True)["content"]["banner"]
        assert frontend.execute("1")[0]["execution_count"] == 1


def test_e2b_says_once_that_widgets_cannot_work():
    prepared("e2b")
    with kernel("e2b") as (_, kc):
        frontend = WidgetFrontend(kc)
        notes = e2b_widget_notes(frontend, "import ipywidgets as widgets\nwidgets.IntSlider(value=3)")
        assert "ipywidgets cannot work with the e2b backend" in notes[0] and notes[1] == ""
        caused = frontend.send("comm_open", {"comm_id": "c1", "target_name": "jupyter.widget.control", "data": {}})
        assert [m["header"]["msg_type"] for m in caused] == ["comm_close"]


def test_magic_drops_widget_views_the_host_cannot_render():
    from sandbox_kernel.core.events import Display, Stream
    from sandbox_kernel.frontdoors.magics.session import COMMS_NOTE
    from sandbox_kernel.policy import OutputPolicy
    from sandbox_kernel.session.session import SandboxSession

    shown = []
    session = SandboxSession("local", parent=None, policy=OutputPolicy(), page_comms=False, no_comms_note=COMMS_NOTE)
    cell = session.cell(shown.append)
    cell.emit(Display({"text/plain": "IntSlider(value=0)", WIDGET_VIEW: {"model_id": "m"}}, execution_count=1))
    assert shown == [Stream("stderr", COMMS_NOTE), Display({"text/plain": "IntSlider(value=0)"}, execution_count=1)]


# -- the magic's own widgets ------------------------------------------------------------------------
@pytest.fixture(params=["local", "docker", "gateway"])
def host(request):
    """A plain python3 kernel with the magic loaded, and a widget-manager frontend on it."""
    from tests.support.host import host_kernel

    prepared(request.param)
    with host_kernel(request.param) as (_, kc):
        yield request.param, WidgetFrontend(kc)


def html_values(frontend: WidgetFrontend) -> dict[str, str]:
    return {cid: s["value"] for cid, s in frontend.models.items() if s.get("_model_name") == "HTMLModel"}


def test_status_panel_is_a_live_table_with_buttons(host):
    backend, frontend = host
    for name in ("a", "b"):
        assert frontend.execute(f"%%sandbox --backend {backend} --name {name}\n1")[0]["status"] == "ok"
    _, outputs = frontend.execute("%sandbox status")
    data = result(outputs)
    assert re.search(r"^session\s+a$", data["text/plain"], re.M) and "<table>" in data["text/html"]  # the fallbacks
    assert frontend.models[data[WIDGET_VIEW]["model_id"]]["_model_name"] == "VBoxModel"
    headings = [v for v in html_values(frontend).values() if v.startswith("<b>")]
    assert headings == [f"<b>{h}</b>" for h in ("session", "backend", "sandbox id", "state", "uptime", "memory",
                                                 "cells")]
    time.sleep(2.5)  # the refresh thread: uptime ticks, memory is measured
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            frontend.take(frontend.kc.get_iopub_msg(timeout=0.5))
        except Exception:  # queue.Empty
            break
    values = list(html_values(frontend).values())
    assert len([v for v in values if re.fullmatch(r"\d+(\.\d+)? MiB", v)]) == 2, values
    assert len([v for v in values if re.fullmatch(r"0:00:0[2-9]|0:00:[1-5]\d", v)]) == 2, values

    restart_a, _, _, stop_b = [cid for cid, s in frontend.models.items() if s.get("_model_name") == "ButtonModel"]
    click = {"method": "custom", "content": {"event": "click"}}
    frontend.execute("%%sandbox --name a\nmarker = 1")
    frontend.send("comm_msg", {"comm_id": restart_a, "data": click})
    assert "Restarted session 'a'" in " ".join(html_values(frontend).values())
    assert stdout(frontend.execute("%%sandbox --name a\nprint('marker' in globals())")[1]) == "False\n"
    frontend.send("comm_msg", {"comm_id": stop_b, "data": click})
    assert "Stopped session 'b'" in " ".join(html_values(frontend).values())
    assert frontend.models[stop_b]["disabled"] is True
    assert "stopped" in html_values(frontend).values()
    assert [line.split()[0] for line in result(frontend.execute("%sandbox list")[1])["text/plain"].splitlines()] \
        == ["session", "a"]


def test_start_up_progress_shows_then_leaves_only_the_cells_outputs():
    """The backend's progress (as the docker backend reports an image build) shows the bar; a
    quick start shows nothing."""
    from tests.support.host import host_kernel

    with host_kernel("local") as (_, kc):
        frontend = WidgetFrontend(kc)
        # quick: under StartProgress.SHOW_AFTER_S (2 s), which a loaded run's local start once passed
        frontend.execute("from sandbox_kernel.frontdoors.magics.widgets import StartProgress\n"
                         "StartProgress.SHOW_AFTER_S = 60")
        _, outputs = frontend.execute("%%sandbox --name quick\n1")
        assert [m["header"]["msg_type"] for m in outputs if m["header"]["msg_type"] != "status"] == \
            ["execute_input", "execute_result"]
        frontend.execute("import asyncio\nfrom sandbox_kernel.backends.local import LocalBackend\n"
                         "from sandbox_kernel.core.events import Display\n_start = LocalBackend.start\n"
                         "async def start(self):\n    if self._progress_handler:\n"
                         "        self._progress_handler(Display({'text/plain': 'Step 2/4 : RUN build'}))\n"
                         "        await asyncio.sleep(1)\n    await _start(self)\nLocalBackend.start = start")
        _, outputs = frontend.execute("%%sandbox --name p\n41 + 1")
        kinds = [m["header"]["msg_type"] for m in outputs if m["header"]["msg_type"] in
                 ("display_data", "clear_output", "execute_result", "stream")]
        assert kinds == ["display_data", "clear_output", "execute_result"]
        view = outputs[[m["header"]["msg_type"] for m in outputs].index("display_data")]["content"]["data"]
        assert view["text/plain"] == "Starting a local sandbox for session 'p'..." and WIDGET_VIEW in view
        states = comm_opened(outputs)
        bar = next(s for s in states if s["_model_name"] == "IntProgressModel")
        assert bar["value"] == 2 and bar["max"] == 4  # the step, from the backend's text
        [label] = [s["value"] for s in states if s["_model_name"] == "HTMLModel"]
        assert label.startswith("Starting a local sandbox for session 'p'... ")
        assert label.endswith("<br>Step 2/4 : RUN build")
        closed = [m["content"]["comm_id"] for m in outputs if m["header"]["msg_type"] == "comm_close"]
        assert len(closed) >= 3  # the bar, its label and their box are closed once started


def comm_opened(outputs: list[dict]) -> list[dict]:
    """Each comm_open's final state, with the updates that followed it in ``outputs``."""
    states: dict[str, dict] = {}
    for m in outputs:
        kind, content = m["header"]["msg_type"], m["content"]
        if kind == "comm_open":
            states[content["comm_id"]] = dict(content["data"].get("state", {}))
        elif kind == "comm_msg" and content["comm_id"] in states:
            states[content["comm_id"]].update(content["data"].get("state", {}))
    return list(states.values())


@pytest.mark.unit
def test_status_and_progress_fall_back_to_text_outside_a_kernel(capsys):
    """In a terminal (no kernel, so no widgets): the status is text and HTML, the start one line."""
    from sandbox_kernel.core.events import Display
    from sandbox_kernel.frontdoors.magics.session import Registry, Session
    from sandbox_kernel.frontdoors.magics.widgets import StartProgress, StatusPanel
    from sandbox_kernel.policy import OutputPolicy
    from sandbox_kernel.session.session import SandboxSession

    registry = Registry()
    session = Session("t", SandboxSession("local", parent=None, policy=OutputPolicy(), options=lambda cls: {"session": "t"}))
    registry.add(session)
    panel = StatusPanel([session], registry, restart=str, stop=str)
    bundle = panel._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/html"} and re.search(r"^state\s+stopped$", bundle["text/plain"], re.M)
    with StartProgress("t", "local"):
        pass  # a quick start shows nothing
    with StartProgress("t", "docker") as progress:
        progress.take(Display({"text/plain": "Building the sandbox image [3 s]\nStep 2/9 : RUN x"}))
    assert capsys.readouterr().err == ("Starting a docker sandbox for session 't'...\n"
                                       "Building the sandbox image [3 s]\nStep 2/9 : RUN x\n")

"""The cell pipeline and the widget rules, in-process (no kernel, no container).

The same pipeline serves the kernel (sink: IOPub), the magic (sink: IPython display) and the
API; these tests feed it events as a backend would and look at what reaches the sink.
"""

from __future__ import annotations

import asyncio

import pytest

from sandbox_kernel.core.errors import SandboxDied
from sandbox_kernel.core.events import Comm, Display, Error, Outcome, Stream
from sandbox_kernel.policy import OutputPolicy
from sandbox_kernel.session.pipeline import OutputPipeline

pytestmark = pytest.mark.unit

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def widget_open(comm_id, model="HTMLModel", module="@jupyter-widgets/controls", **state):
    return Comm("comm_open", {"comm_id": comm_id, "target_name": "jupyter.widget", "data": {
        "state": {"_model_name": model, "_model_module": module, "_view_module": module, **state},
        "buffer_paths": []}})


def widget_update(comm_id, method="update", **state):
    return Comm("comm_msg", {"comm_id": comm_id, "data": {"method": method, "state": state, "buffer_paths": []}})


def run(events, policy=None, max_output_bytes=0, pipeline=None):
    shown = []
    pipeline = pipeline or OutputPipeline(policy or OutputPolicy())
    cell = pipeline.cell(shown.append, max_output_bytes)
    for event in events:
        cell.emit(event)
    cell.finish()
    return shown


def notes(shown):
    return [e.text for e in shown if isinstance(e, Stream) and e.name == "stderr"]


# -- the pipeline -----------------------------------------------------------------------------------------
def test_policy_change_is_said_once_per_cell_before_the_output():
    hostile = Display({"text/html": "<img src=x onerror=alert(1)>"})
    shown = run([Stream("stdout", "a"), hostile, hostile, Display({"text/html": "<b>ok</b>"})])
    assert [type(e).__name__ for e in shown] == ["Stream", "Stream", "Display", "Display", "Display"]
    assert shown[1].name == "stderr" and "output policy 'sanitize'" in shown[1].text
    assert "--SandboxKernel.output_policy=isolate" in shown[1].text
    assert shown[2].data == {"text/html": '<img src="x">'} and shown[4].data == {"text/html": "<b>ok</b>"}
    assert run([Display({"text/html": "<b>ok</b>"})]) == [Display({"text/html": "<b>ok</b>"})]  # no note


def test_budget_counts_what_the_policy_left():
    big = "x" * 2000
    shown = run([Display({"text/html": f"<script>{big}</script><b>y</b>"}), Stream("stdout", "z" * 10)],
                max_output_bytes=1000)
    assert Display({"text/html": "<b>y</b>"}) in shown and Stream("stdout", "z" * 10) in shown
    assert not any("output limit" in n for n in notes(shown))


def test_infrastructure_failure_is_one_error_and_an_error_outcome():
    shown = []
    cell = OutputPipeline(OutputPolicy()).cell(shown.append)

    async def dies(emit):
        emit(Stream("stdout", "before\n"))
        raise SandboxDied("it ran out of memory (limit 1 GiB)")

    outcome = asyncio.run(cell.run(dies))
    assert outcome.status == "error" and outcome.error.ename == "SandboxDied"
    assert shown[0] == Stream("stdout", "before\n") and shown[1] == outcome.error
    assert shown[1].traceback == [f"\x1b[0;31mSandboxDied\x1b[0m: {outcome.error.evalue}"]


def test_run_returns_the_backends_outcome():
    cell = OutputPipeline(OutputPolicy()).cell(lambda e: None)

    async def ok(emit):
        return Outcome("ok", 3)

    assert asyncio.run(cell.run(ok)) == Outcome("ok", 3)


def test_without_comms_widget_views_go_and_it_is_said_once_per_session():
    pipeline = OutputPipeline(OutputPolicy(), comms=False)
    pipeline.backend = "e2b"
    view = Display({"text/plain": "IntSlider(value=1)", WIDGET_VIEW: {"model_id": "m"}}, execution_count=1)
    first = run([view, widget_open("m", "IntSliderModel")], pipeline=pipeline)
    assert first[1] == Display({"text/plain": "IntSlider(value=1)"}, execution_count=1)
    assert notes(first) == ["[ipywidgets cannot work with the e2b backend: it does not carry comms, so widgets are "
                            "shown as text. Use the local or docker backend for widgets.]\n"]
    assert notes(run([view], pipeline=pipeline)) == []


def test_errors_and_streams_pass_unchanged():
    events = [Stream("stdout", "<script>alert(1)</script>"), Error("ValueError", "<b>", ["tb"])]
    assert run(events) == events


# -- the widget rules ------------------------------------------------------------------------------------
def test_html_widget_value_is_sanitized_at_open_and_on_every_update():
    shown = run([widget_open("h", value="<img src=x onerror=alert(1)><b>ok</b>"),
                 widget_update("h", value="<script>alert(1)</script>hi"),
                 widget_update("h", method="echo_update", value="<svg onload=alert(1)>")])
    comms = [e for e in shown if isinstance(e, Comm)]
    assert comms[0].content["data"]["state"]["value"] == '<img src="x"><b>ok</b>'
    assert comms[1].content["data"]["state"]["value"] == "hi"
    assert comms[2].content["data"]["state"]["value"] == "<svg></svg>"  # inline SVG: the SVG rule
    assert len(notes(shown)) == 1


def test_html_widget_under_isolate_gets_a_frame():
    [_, comm] = run([widget_open("h", value="<script>draw()</script>")], OutputPolicy("isolate"))
    assert comm.content["data"]["state"]["value"].startswith('<iframe sandbox="allow-scripts"')


def test_description_is_sanitized_when_it_is_html():
    shown = run([widget_open("b", "CheckboxModel", description="<img src=x onerror=alert(1)>"),
                 widget_update("b", description_allow_html=True)])
    comms = [e for e in shown if isinstance(e, Comm)]
    assert comms[0].content["data"]["state"]["description"] == "<img src=x onerror=alert(1)>"  # shown as text
    assert comms[1].content["data"]["state"]["description"] == '<img src="x">'  # now HTML: sanitized


def test_other_modules_and_targets_are_refused_and_their_traffic_dropped():
    shown = run([widget_open("q", "FigureModel", "bqplot"), widget_update("q", value=1),
                 Comm("comm_close", {"comm_id": "q", "data": {}}),
                 Comm("comm_open", {"comm_id": "t", "target_name": "evil.target", "data": {}})])
    assert not [e for e in shown if isinstance(e, Comm)]
    assert notes(shown) == [
        "[a widget from the module 'bqplot' was not shown: the output policy allows only the standard ipywidgets; "
        "--SandboxKernel.allowed_widget_modules=bqplot allows it]\n",
        "[the sandbox opened a comm to 'evil.target', which the output policy refuses; "
        "--SandboxKernel.allowed_comm_targets=evil.target allows it]\n"]
    allowing = OutputPolicy(widget_modules=["bqplot"])
    assert [e for e in run([widget_open("q", "FigureModel", "bqplot")], allowing) if isinstance(e, Comm)]


def test_an_update_cannot_change_a_models_class():
    [comm] = [e for e in run([widget_open("s", "IntSliderModel"),
                               widget_update("s", _view_module="evil", _model_name="X", value=3)])
              if isinstance(e, Comm) and e.msg_type == "comm_msg"]
    assert comm.content["data"]["state"] == {"value": 3}


def test_messages_on_unknown_comms_are_dropped_and_frontend_comms_pass():
    pipeline = OutputPipeline(OutputPolicy())
    assert run([widget_update("nobody-opened-this", value=1)], pipeline=pipeline) == []
    pipeline.from_frontend("comm_open", {"comm_id": "f", "target_name": "some.frontend.target"})
    reply = Comm("comm_msg", {"comm_id": "f", "data": {"method": "custom"}})
    assert run([reply], pipeline=pipeline) == [reply]


def test_output_widget_outputs_and_media_urls_and_styles():
    output = {"output_type": "display_data", "data": {"text/html": "<img src=x onerror=alert(1)>"}, "metadata": {}}
    shown = run([widget_open("o", "OutputModel", "@jupyter-widgets/output", outputs=[output]),
                 widget_open("i", "ImageModel", format="url"),
                 widget_open("st", "HTMLStyleModel", _view_module="@jupyter-widgets/base",
                             background="url(https://x.example/leak)", font_size="12px")])
    states = {e.content["comm_id"]: e.content["data"]["state"] for e in shown if isinstance(e, Comm)}
    assert states["o"]["outputs"][0]["data"] == {"text/html": '<img src="x">'}
    assert "format" not in states["i"]  # "url" is refused: the view's default (png) stays
    assert "background" not in states["st"] and states["st"]["font_size"] == "12px"


def test_control_comm_states_are_policed_with_their_buffers():
    pipeline = OutputPipeline(OutputPolicy())
    pipeline.from_frontend("comm_open", {"comm_id": "ctl", "target_name": "jupyter.widget.control"})
    states = {
        "a": {"model_name": "HTMLModel", "model_module": "@jupyter-widgets/controls",
              "state": {"_view_module": "@jupyter-widgets/controls", "value": "<script>x</script>ok"}},
        "b": {"model_name": "FigureModel", "model_module": "bqplot", "state": {"_view_module": "bqplot"}},
        "c": {"model_name": "ImageModel", "model_module": "@jupyter-widgets/controls",
              "state": {"_view_module": "@jupyter-widgets/controls", "format": "png"}},
    }
    reply = Comm("comm_msg", {"comm_id": "ctl", "data": {"method": "update_states", "states": states,
                                                          "buffer_paths": [["b", "state", "x"], ["c", "state", "value"]]}},
                 buffers=(b"bqplot-bytes", b"png-bytes"))
    [*_, comm] = run([reply], pipeline=pipeline)
    data = comm.content["data"]
    assert set(data["states"]) == {"a", "c"} and data["states"]["a"]["state"]["value"] == "ok"
    assert data["buffer_paths"] == [["c", "state", "value"]] and comm.buffers == (b"png-bytes",)
    assert run([widget_update("a", value="<b>again</b>")], pipeline=pipeline)[0].content["data"]["state"] == {
        "value": "<b>again</b>"}  # restored models are known to the rules
    assert run([widget_update("b", value=1)], pipeline=pipeline) == []


def test_trust_lets_every_comm_through():
    events = [widget_open("q", "FigureModel", "bqplot"), widget_open("h", value="<script>x</script>")]
    assert run(events, OutputPolicy("trust")) == events


def test_output_outside_cells_has_a_budget_renewed_at_each_cell():
    pipeline, shown = OutputPipeline(OutputPolicy()), []
    pipeline.renew_outside_budget(100)
    for _ in range(3):  # a sandbox thread printing after its cell ended
        pipeline.outside_cell(Stream("stdout", "x" * 60), shown.append)
    pipeline.outside_cell(widget_open("w1", value="<b>ok</b>"), shown.append)  # comms are never cut
    assert "".join(e.text for e in shown if isinstance(e, Stream) and e.name == "stdout") == "x" * 100
    assert notes(shown) == ["\n[output limit of 100 bytes reached: further output from outside a cell "
                            "(a sandbox thread's) before the next cell is dropped]\n"]
    assert isinstance(shown[-1], Comm)
    pipeline.outside_cell(Display({"text/html": "<img src=x onerror=alert(1)>"}), shown.append)
    assert len(shown) == 4  # still over: dropped, not shown
    pipeline.renew_outside_budget(100)
    pipeline.outside_cell(Display({"text/html": "<img src=x onerror=alert(1)>"}), shown.append)
    assert "onerror" not in shown[-1].data["text/html"]  # under the policy, as inside a cell


def test_a_widget_events_outputs_are_policed_and_cut_without_the_cells_note():
    pipeline, shown = OutputPipeline(OutputPolicy()), []
    event_outputs = pipeline.cell(shown.append, 100, scope="of this widget event", say_changes=False)
    event_outputs.emit(Display({"text/html": "<img src=x onerror=alert(1)>"}))
    event_outputs.emit(Stream("stdout", "y" * 200))
    event_outputs.finish()
    assert "onerror" not in shown[0].data["text/html"]
    assert [n for n in notes(shown) if "output policy" in n] == []
    assert "further output of this widget event is dropped" in notes(shown)[0]


def test_a_bundle_or_comm_that_is_not_a_json_object_is_refused_with_a_note_not_a_crash():
    """A sandbox's kernel can send ``display_data`` whose ``data`` is a string or a list, and comm
    messages whose ``content`` is not an object: under every policy that is an output saying so
    (the page's nbformat model expects an object), never a traceback of ours or the value shown."""
    hostile = '<img src=x onerror="alert(1)">'
    for mode in ("sanitize", "isolate", "trust"):
        for data in (hostile, [hostile], None, 3):
            shown = run([Display(data=data, metadata=hostile)], OutputPolicy(mode))
            displays = [e for e in shown if isinstance(e, Display)]
            assert len(displays) == 1 and list(displays[0].data) == ["text/plain"], (mode, data, shown)
            assert "not shown" in displays[0].data["text/plain"] and displays[0].metadata == {}
        if mode != "trust":
            shown = run([Comm("comm_msg", [hostile]), Comm("comm_open", hostile)], OutputPolicy(mode))
            assert not [e for e in shown if isinstance(e, Comm)]


def test_an_iopub_message_with_fields_of_the_wrong_type_is_made_whole_not_raised_on():
    """The sandbox writes IOPub messages: a stream or error whose fields have the wrong type (a
    sandbox's own ZMQ socket can send anything) becomes text, never a reader's exception."""
    from sandbox_kernel.backends.kernel_client.messages import event_from_iopub
    from sandbox_kernel.core.events import Display, Error, Stream

    def msg(kind, content):
        return {"header": {"msg_type": kind}, "content": content}

    assert event_from_iopub(msg("stream", {"text": ["a"]})) == Stream("stderr", '["a"]')
    assert event_from_iopub(msg("stream", {"name": "stdout", "text": "x"})) == Stream("stdout", "x")
    assert event_from_iopub(msg("stream", ["not", "an", "object"])) == Stream("stderr", "")
    error = event_from_iopub(msg("error", {"ename": 1, "traceback": "no list"}))
    assert isinstance(error, Error) and error.ename == "1" and error.evalue == "" and list(error.traceback) == []
    display = event_from_iopub(msg("display_data", {"data": {"text/plain": "x"}, "transient": ["id"]}))
    assert isinstance(display, Display) and display.display_id is None


# -- input that breaks a parser ----------------------------------------------------------------------------
# each level names a selector: a nested rule without one is dropped unread (it could select the root)
DEEP = ["<style>" + "a{" * 1000 + "</style>", "<style>a{x:" + "f(" * 1000 + "</style>",
        "<style>" + "@media all{" * 1000 + "</style>"]


@pytest.mark.parametrize("payload", DEEP)
def test_nesting_past_the_recursion_limit_is_refused_with_a_note_never_raised(payload):
    """tinycss2 recurses: a style nested a thousand deep raised RecursionError out of the cell
    (its execute_reply lost). Every policed type, and a widget's HTML value, says it instead."""
    from tests.support.policy import opening

    for mime in ("text/html", "image/svg+xml", "text/markdown"):
        shown = run([Display({mime: payload}), Display({"text/plain": "after"})])
        assert [e.data for e in shown if isinstance(e, Display)] == [
            {"text/plain": f"[a {mime} output was not shown: the output policy could not read it (RecursionError)]"},
            {"text/plain": "after"}]
    pipeline = OutputPipeline(OutputPolicy(), comms=True)
    shown = run([opening("a" * 32, "HTMLModel", value=payload), Stream("stdout", "after")], pipeline=pipeline)
    assert not [e for e in shown if isinstance(e, Comm)]
    assert "[a widget message was not shown: the output policy could not read it" in "".join(notes(shown))
    assert shown[-1] == Stream("stdout", "after")

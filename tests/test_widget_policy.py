"""Typed widget state, in process: the widget rules against what the review got through (issue 16).

Each model is opened as ipywidgets 8.1 opens it (its class keys from the table); the rules'
verdicts are read off the messages they write.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from sandbox_kernel.core.events import Comm
from sandbox_kernel.policy import OutputPolicy
from sandbox_kernel.policy.widgets.rules import WidgetRules
from sandbox_kernel.policy.widgets.types import table
from tests.support.policy import BASE, CONTROLS, OUTPUT, classes, opening, state_of, update

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent
@pytest.fixture
def rules() -> WidgetRules:
    return WidgetRules(OutputPolicy())


# -- the table ----------------------------------------------------------------------------------------
def test_the_table_is_ipywidgets_own():
    """Every standard model's synced traits, from the installed ipywidgets: drift fails here
    (rewrite with ``scripts/widget_table.py``)."""
    spec = importlib.util.spec_from_file_location("widget_table", ROOT / "scripts" / "widget_table.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    built = script.build()["models"]
    committed = json.loads((ROOT / "sandbox_kernel" / "policy" / "widgets" / "models.json").read_text())["models"]
    assert built == committed


def test_the_table_covers_every_synced_trait_of_every_standard_widget():
    import ipywidgets
    from ipywidgets.widgets.widget import Widget

    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    seen = 0
    for cls in subclasses(Widget):
        if not cls.__module__.startswith("ipywidgets."):
            continue
        entry = table()[f"{cls._model_module.default_value}:{cls._model_name.default_value}"]
        assert set(cls.class_traits(sync=True)) <= set(entry.traits), cls
        seen += 1
    assert seen > 70 and ipywidgets.__version__.startswith("8.1")
    assert table()[f"{CONTROLS}:HTMLModel"].traits["value"] == {"type": "str", "sink": "html"}
    assert table()[f"{BASE}:LayoutModel"].traits["grid_template_areas"]["sink"] == "css:grid-template-areas"
    assert table()[f"{CONTROLS}:ButtonStyleModel"].traits["button_color"]["sink"] == "css:background-color"


# -- links --------------------------------------------------------------------------------------------
def test_a_link_may_not_carry_text_into_markup_urls_or_switches(rules):
    """jsdlink(Text.value → HTML.value) ran unpoliced text as HTML; the same into Image.format
    ("url") and description_allow_html (True)."""
    for comm_id, name in (("text", "TextModel"), ("html", "HTMLModel"), ("img", "ImageModel"),
                          ("chk", "CheckboxModel"), ("label", "LabelModel")):
        assert rules.from_sandbox(opening(comm_id, name))[0] is not None
    for target, trait in (("html", "value"), ("img", "format"), ("chk", "description_allow_html"),
                          ("chk", "description"), ("label", "value"), ("html", "layout"), ("chk", "_view_name"),
                          ("nobody", "value")):
        event, _, note = rules.from_sandbox(opening(f"dl-{target}-{trait}", "DirectionalLinkModel",
                                                    source=["IPY_MODEL_text", "value"],
                                                    target=[f"IPY_MODEL_{target}", trait]))
        assert event is None and "widget link (jslink/jsdlink)" in note, (target, trait)
        assert rules.from_sandbox(update(f"dl-{target}-{trait}", value=1))[0] is None  # refused comm: dropped
    # a two-way link sets its source too
    event, _, note = rules.from_sandbox(opening("l", "LinkModel", source=["IPY_MODEL_html", "value"],
                                               target=["IPY_MODEL_text", "value"]))
    assert event is None and "'value' of a HTMLModel" in note


def test_links_between_numbers_and_plain_text_still_work(rules):
    for comm_id, name in (("a", "IntSliderModel"), ("b", "IntSliderModel"), ("t", "TextModel"), ("t2", "TextModel")):
        rules.from_sandbox(opening(comm_id, name))
    for link, name, source, target in (("l1", "LinkModel", "a", "b"), ("l2", "DirectionalLinkModel", "t", "t2"),
                                       ("l3", "DirectionalLinkModel", "a", "t")):
        event, changed, note = rules.from_sandbox(opening(link, name, source=[f"IPY_MODEL_{source}", "value"],
                                                          target=[f"IPY_MODEL_{target}", "value"]))
        assert note is None and not changed and state_of((event, 0, 0))["target"] == [f"IPY_MODEL_{target}", "value"]


def test_a_link_update_cannot_retarget_it_to_markup(rules):
    for comm_id, name in (("a", "IntSliderModel"), ("b", "IntSliderModel"), ("h", "HTMLModel")):
        rules.from_sandbox(opening(comm_id, name))
    rules.from_sandbox(opening("l", "DirectionalLinkModel", source=["IPY_MODEL_a", "value"],
                               target=["IPY_MODEL_b", "value"]))
    event, changed, note = rules.from_sandbox(update("l", target=["IPY_MODEL_h", "value"]))
    assert changed and "widget link" in note and "target" not in state_of((event, 0, 0))
    event, _, note = rules.from_sandbox(update("l", source=["IPY_MODEL_b", "value"]))  # the old target stands
    assert note is None and state_of((event, 0, 0)) == {"source": ["IPY_MODEL_b", "value"]}


# -- types --------------------------------------------------------------------------------------------
def test_values_of_the_wrong_type_are_dropped_lists_too(rules):
    """``HTML.value: ["<img src=x onerror=...>"]`` skipped every check (innerHTML of a list is
    its toString)."""
    event, changed, _ = rules.from_sandbox(opening("h", "HTMLModel", value=["<img src=x onerror=alert(1)>"],
                                                   description={"x": 1}, layout="javascript:x", unknown_key="x"))
    state = state_of((event, 0, 0))
    assert changed and not {"value", "description", "layout", "unknown_key"} & set(state)
    event, changed, _ = rules.from_sandbox(opening("s", "IntSliderModel", value="7", max=10, disabled="no",
                                                   orientation="VERTICAL", _dom_classes=["ok", "a b", "x\"y"]))
    state = state_of((event, 0, 0))
    assert changed and "value" not in state and "disabled" not in state and state["max"] == 10
    assert state["orientation"] == "vertical" and state["_dom_classes"] == ["ok"]


def test_the_view_and_version_are_the_models_own(rules):
    """A Label model drawn by an HTMLView would put its value into innerHTML; a version string
    lands in the manager's error text."""
    for state in ({"_view_name": "HTMLView"}, {"_model_module_version": "<img src=x onerror=alert(1)>"},
                  {"_view_module": BASE}, {"_model_name": "IntModel"}):
        event, _, note = rules.from_sandbox(opening("x", "LabelModel", **state))
        assert event is None and "standard models of ipywidgets 8.1" in note


def test_an_update_cannot_change_a_models_class(rules):
    rules.from_sandbox(opening("s", "IntSliderModel"))
    assert state_of(rules.from_sandbox(update("s", _view_name="HTMLView", value=3))) == {"value": 3}


# -- sinks --------------------------------------------------------------------------------------------
def test_style_and_layout_values_are_parsed_not_substring_tested(rules):
    """``\\75 rl(...)`` is ``url(...)`` to the browser."""
    event, changed, _ = rules.from_sandbox(opening(
        "st", "HTMLStyleModel", background="\\75 rl(https://x.example/leak)",
        font_size="12px", text_color="red;background:url(https://x.example/)", description_width="calc(50% - 3px)"))
    state = state_of((event, 0, 0))
    assert changed and "background" not in state and "text_color" not in state
    assert state["font_size"] == "12px" and state["description_width"] == "calc(50% - 3px)"
    event, changed, _ = rules.from_sandbox(opening(
        "lay", "LayoutModel", BASE, grid_template_areas='"a b"', border_top="1px solid IMAGE-SET(x)",
        width="50%"))
    state = state_of((event, 0, 0))
    assert changed and "border_top" not in state and state["width"] == "50%" and "grid_template_areas" in state


def test_maths_markup_urls_and_classes_are_policed_where_views_render_them(rules):
    hostile_tex = r"$\style{cursor:url(https://x.example/)}{X}$"
    state = state_of(rules.from_sandbox(opening("lab", "LabelModel", value=hostile_tex,
                                                description=hostile_tex)))
    assert "\\style" not in state["value"] and "\\style" not in state["description"]
    state = state_of(rules.from_sandbox(opening("c", "CheckboxModel", description_allow_html=True,
                                                description="<img src=x onerror=alert(1)>ok")))
    assert state["description"] == '<img src="x">ok'
    state = state_of(rules.from_sandbox(opening("m", "HTMLMathModel", value=f"<b onclick=x>b</b>{hostile_tex}")))
    assert "onclick" not in state["value"] and "\\style" not in state["value"]
    state = state_of(rules.from_sandbox(opening("b", "ButtonModel", icon="check x\" onclick=y")))
    assert state["icon"] == "check"
    state = state_of(rules.from_sandbox(opening("tb", "ToggleButtonsModel", icons=["check", "x jp-mod-evil"])))
    assert state["icons"] == ["check", ""]
    state = state_of(rules.from_sandbox(opening("i", "ImageModel", format="url")))
    assert "format" not in state
    state = state_of(rules.from_sandbox(opening("ci", "ColorsInputModel", value=["red", "url(https://x.example/)"])))
    assert state["value"] == ["red"]


def test_description_becoming_html_is_sent_again_policed_as_html(rules):
    rules.from_sandbox(opening("c", "CheckboxModel", description="<img src=x onerror=alert(1)>"))
    event, changed, _ = rules.from_sandbox(update("c", description_allow_html=True))
    assert changed and state_of((event, 0, 0)) == {"description_allow_html": True, "description": '<img src="x">'}


def test_buffer_paths_name_only_binary_traits(rules):
    event, changed, _ = rules.from_sandbox(opening("i", "ImageModel", buffer_paths=[["value"], ["format"]],
                                                   buffers=[b"png", b"url"], format="png"))
    assert changed and event.content["data"]["buffer_paths"] == [["value"]] and event.buffers == (b"png",)
    event, changed, _ = rules.from_sandbox(opening("h", "HTMLModel", buffer_paths=[["value"]], buffers=[b"<img>"]))
    assert changed and event.buffers == () and event.content["data"]["buffer_paths"] == []


def test_output_widget_outputs_are_rebuilt_under_the_policy(rules):
    outputs = [{"output_type": "display_data", "data": {"text/html": "<img src=x onerror=alert(1)>"},
                "metadata": {"text/html": {"isolated": False}}, "extra": 1},
               {"output_type": "stream", "name": "stdout", "text": ["a", "b"]},
               {"output_type": "evil"}]
    state = state_of(rules.from_sandbox(opening("o", "OutputModel", OUTPUT, outputs=outputs)))
    assert state["outputs"][0]["data"] == {"text/html": '<img src="x">'} and "extra" not in state["outputs"][0]
    assert state["outputs"][1] == {"output_type": "stream", "name": "stdout", "text": "ab"}
    assert len(state["outputs"]) == 2


# -- update_states ------------------------------------------------------------------------------------
def test_update_states_is_judged_on_the_entry_the_manager_loads(rules):
    """The manager loads each entry's ``model_module``/``model_name``, not the state's."""
    rules.from_frontend("comm_open", {"comm_id": "ctl", "target_name": "jupyter.widget.control"})
    evil = {"model_module": "evil-module", "model_name": "X", "model_module_version": "1.0.0",
            "state": {**classes("HTMLModel"), "value": "<script>x</script>"}}
    disguised = {"model_module": CONTROLS, "model_name": "HTMLModel", "model_module_version": "2.0.0",
                 "state": {**classes("LabelModel"), "value": "<img src=x onerror=alert(1)>"}}
    listed = {"model_module": CONTROLS, "model_name": "HTMLModel", "model_module_version": "2.0.0",
              "state": {**classes("HTMLModel"), "value": ["<img src=x onerror=alert(1)>"]}}
    good = {"model_module": CONTROLS, "model_name": "HTMLModel", "model_module_version": "2.0.0",
            "state": {**classes("HTMLModel"), "value": "<b onclick=x>ok</b>"}}
    reply = Comm("comm_msg", {"comm_id": "ctl", "data": {
        "method": "update_states", "states": {"e": evil, "d": disguised, "l": listed, "g": good},
        "buffer_paths": [["g", "state", "value"], ["l", "state", "layout"]]}}, {}, (b"x", b"y"))
    event, changed, note = rules.from_sandbox(reply)
    states = event.content["data"]["states"]
    assert changed and note is not None and set(states) == {"l", "g"}
    assert "value" not in states["l"]["state"] and states["g"]["state"]["value"] == "<b>ok</b>"
    assert event.content["data"]["buffer_paths"] == [] and event.buffers == ()
    assert rules.from_sandbox(update("e", value="<script>x</script>"))[0] is None


def test_update_states_cannot_give_a_live_model_another_class(rules):
    rules.from_sandbox(opening("h", "HTMLModel"))
    rules.from_frontend("comm_open", {"comm_id": "ctl", "target_name": "jupyter.widget.control"})
    entry = {"model_module": CONTROLS, "model_name": "TextModel", "model_module_version": "2.0.0",
             "state": {**classes("TextModel"), "value": "<img src=x onerror=alert(1)>"}}
    event, _, note = rules.from_sandbox(Comm("comm_msg", {"comm_id": "ctl", "data": {
        "method": "update_states", "states": {"h": entry}, "buffer_paths": []}}))
    assert event.content["data"]["states"] == {} and note is not None


# -- what reaches the page is written here -----------------------------------------------------------
def test_the_rules_always_emit_their_own_copy(rules):
    """``WidgetRules._open`` used to emit the original event when nothing changed."""
    original = opening("s", "IntSliderModel", value=3, extra_content_key=None)
    original.content["sneaky"] = "<img src=x onerror=alert(1)>"
    event, changed, _ = rules.from_sandbox(original)
    assert event is not original and event.content is not original.content
    assert event.content["data"]["state"] is not original.content["data"]["state"]
    assert set(event.content) == {"comm_id", "target_name", "data"} and event.metadata == {"version": "2.1.0"}
    custom = Comm("comm_msg", {"comm_id": "s", "data": {"method": "custom", "content": {"event": "click"},
                                                        "other": "x"}})
    event, _, _ = rules.from_sandbox(custom)
    assert event is not custom and event.content["data"] == {"method": "custom", "content": {"event": "click"}}
    assert rules.from_sandbox(Comm("comm_msg", {"comm_id": "s", "data": {"method": "display"}}))[0] is None


def test_trust_passes_everything(rules):
    trusting = WidgetRules(OutputPolicy("trust"))
    event = opening("h", "HTMLModel", value="<script>x</script>")
    assert trusting.from_sandbox(event) == (event, False, None)


# -- the other ways a page gets a model ---------------------------------------------------------------
def test_a_state_the_page_requested_on_its_own_comm_is_judged_as_an_opening(rules):
    """When the control comm fails, the manager opens a ``jupyter.widget`` comm per model and makes
    the model from the ``update`` that answers its ``request_state`` (``_loadFromKernelModels``)."""
    rules.from_frontend("comm_open", {"comm_id": "w1", "target_name": "jupyter.widget"})
    rules.from_frontend("comm_open", {"comm_id": "w2", "target_name": "jupyter.widget"})
    event, changed, _ = rules.from_sandbox(update("w1", **classes("HTMLModel"), value="<img src=x onerror=alert(1)>"))
    assert changed and state_of((event, 0, 0))["value"] == '<img src="x">'
    event, _, note = rules.from_sandbox(update("w2", **{**classes("HTMLModel"), "_model_module": "evil"}, value="x"))
    assert event is None and "'evil' was not shown" in note
    assert rules.from_sandbox(update("w1", value="<b onclick=x>b</b>"))[0].content["data"]["state"] == {
        "value": "<b>b</b>"}  # known from then on


def test_ids_and_buffer_paths_cannot_reach_prototypes(rules):
    for bad in ("__proto__", "constructor", "a/b c", ""):
        assert rules.from_sandbox(opening(bad, "IntSliderModel"))[0] is None
    rules.from_sandbox(opening("t", "TextModel"))
    event, _, note = rules.from_sandbox(opening("l", "DirectionalLinkModel", source=["IPY_MODEL_t", "value"],
                                               target=["IPY_MODEL___proto__", "value"]))
    assert "target" not in state_of((event, 0, 0))  # not a reference: dropped, so the link sets nothing
    event, changed, _ = rules.from_sandbox(opening("i", "ImageModel", buffer_paths=[["__proto__", "x"], ["value", 0]],
                                                   buffers=[b"a", b"b"]))
    assert changed and event.content["data"]["buffer_paths"] == [] and event.buffers == ()
    rules.from_frontend("comm_open", {"comm_id": "ctl", "target_name": "jupyter.widget.control"})
    entry = {"model_module": CONTROLS, "model_name": "IntSliderModel", "model_module_version": "2.0.0",
             "state": classes("IntSliderModel")}
    event, _, _ = rules.from_sandbox(Comm("comm_msg", {"comm_id": "ctl", "data": {
        "method": "update_states", "states": {"ok": entry, "x y": entry},
        "buffer_paths": [["ok", "__proto__", "polluted"]]}}, {}, (b"x",)))
    assert set(event.content["data"]["states"]) == {"ok"} and event.content["data"]["buffer_paths"] == []


def test_a_link_cannot_redirect_an_output_widgets_capture(rules):
    rules.from_sandbox(opening("t", "TextModel"))
    rules.from_sandbox(opening("o", "OutputModel", OUTPUT))
    event, _, note = rules.from_sandbox(opening("l", "DirectionalLinkModel", source=["IPY_MODEL_t", "value"],
                                               target=["IPY_MODEL_o", "msg_id"]))
    assert event is None and "'msg_id' of a OutputModel" in note


def test_a_style_or_layout_reference_must_name_a_model_of_its_class(rules):
    rules.from_sandbox(opening("h", "HTMLModel", value="<b>x</b>"))
    rules.from_sandbox(opening("lay", "LayoutModel", BASE))
    state = state_of(rules.from_sandbox(opening("b", "ButtonModel", layout="IPY_MODEL_h", style="IPY_MODEL_lay")))
    assert "layout" not in state and "style" not in state
    state = state_of(rules.from_sandbox(opening("b2", "ButtonModel", layout="IPY_MODEL_lay")))
    assert state["layout"] == "IPY_MODEL_lay"


def test_update_states_with_buffer_paths_that_are_not_a_list_is_answered(rules):
    """Found by the property test's random search: ``buffer_paths: true`` raised in the output path."""
    rules.from_frontend("comm_open", {"comm_id": "ctl", "target_name": "jupyter.widget.control"})
    for paths in (True, 3, "x", {"a": 1}):
        event, changed, _ = rules.from_sandbox(Comm("comm_msg", {"comm_id": "ctl", "data": {
            "method": "update_states", "states": {}, "buffer_paths": paths}}, {}, (b"x",)))
        assert event.content["data"]["buffer_paths"] == [] and event.buffers == ()

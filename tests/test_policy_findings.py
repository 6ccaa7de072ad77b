"""What no HTML sanitizer looks at (issue 29), in process: each finding of the attacker review
fails on the policy before it. The browser proof is tests/test_browser_round3.py.

1. an ``Image`` widget with ``format="svg+xml"``: its blob, opened as a document, ran script;
2. vega-embed's tooltip handler wrote a data object's ``image`` as ``<img src>``;
3. an output's ``<style>`` styled JupyterLab's own elements (and lifted their clipping);
4. a Vega spec without marks (or a size) stopped the Lab tab;
5. policing twice changed the output again (misnested markup, attribute order, ``isolate``).
"""

from __future__ import annotations

import re

import pytest
import tinycss2

from sandbox_kernel.core.events import Comm
from sandbox_kernel.policy import OutputPolicy
from sandbox_kernel.policy.widgets.rules import WidgetRules
from tests.policy_oracle import css_violations, html_violations
from tests.support.policy import opening, state_of, update

pytestmark = pytest.mark.unit

SVG_SCRIPT = (b'<svg xmlns="http://www.w3.org/2000/svg" width="8" height="8"><rect width="8" height="8"/>'
              b'<script>fetch("/api/terminals", {method: "POST"})</script></svg>')
VL = "application/vnd.vegalite.v5+json"
VEGA = "application/vnd.vega.v5+json"


# -- 1. widget media --------------------------------------------------------------------------------
def media(event: Comm) -> tuple[dict, dict[str, bytes]]:
    """``(state, {path: buffer})`` of a comm message the rules wrote."""
    data = event.content["data"]
    return data.get("state", {}), {"/".join(map(str, p)): b for p, b in zip(data["buffer_paths"], event.buffers)}


def test_an_svg_image_widget_gets_its_value_through_the_svg_rule():
    rules = WidgetRules(OutputPolicy())
    event, changed, _ = rules.from_sandbox(opening("i", "ImageModel", buffer_paths=[["value"]],
                                                   buffers=[SVG_SCRIPT], format="svg+xml"))
    state, buffers = media(event)
    assert changed and state["format"] == "svg+xml"
    assert b"<script" not in buffers["value"] and b"<rect" in buffers["value"]


@pytest.mark.parametrize("switch", ["svg+xml", "SVG+XML"])
def test_switching_a_harmless_image_to_svg_sends_its_value_again_policed(switch):
    rules = WidgetRules(OutputPolicy())
    event, changed, _ = rules.from_sandbox(opening("i", "ImageModel", buffer_paths=[["value"]],
                                                   buffers=[SVG_SCRIPT], format="png"))
    assert media(event)[1]["value"] == SVG_SCRIPT  # image/png: the browser never runs it, even opened alone
    event, changed, _ = rules.from_sandbox(update("i", format=switch))
    state, buffers = media(event)
    assert changed and state == {"format": "svg+xml"} and b"<script" not in buffers["value"]


@pytest.mark.parametrize("model, fmt", [("ImageModel", "svg+xml "), ("ImageModel", "html"), ("ImageModel", ""),
                                        ("ImageModel", "url"), ("VideoModel", "svg+xml"), ("AudioModel", "svg+xml"),
                                        ("VideoModel", "x-html+xml")])
def test_a_format_outside_the_models_list_is_dropped(model, fmt):
    """``"svg+xml "`` ran script in Chromium (the MIME parser trims the space); the view keeps
    its previous format (or its default, png/mp4/mp3) for any format not listed."""
    rules = WidgetRules(OutputPolicy())
    event, changed, _ = rules.from_sandbox(opening("m", model, buffer_paths=[["value"]], buffers=[SVG_SCRIPT],
                                                   format=fmt))
    assert changed and "format" not in media(event)[0]


def test_an_update_of_an_svg_images_value_is_policed_and_so_is_a_restored_page():
    rules = WidgetRules(OutputPolicy())
    rules.from_sandbox(opening("i", "ImageModel", buffer_paths=[["value"]], buffers=[b"<svg/>"], format="svg+xml"))
    event, _, _ = rules.from_sandbox(update("i", buffer_paths=[["value"]], buffers=[SVG_SCRIPT]))
    assert b"<script" not in media(event)[1]["value"]
    rules.from_frontend("comm_open", {"comm_id": "ctl", "target_name": "jupyter.widget.control"})
    entry = {"model_name": "ImageModel", "model_module": "@jupyter-widgets/controls", "model_module_version": "2.0.0",
             "state": {**state_of((opening("j", "ImageModel"), 0, 0)), "format": "svg+xml"}}
    states = Comm("comm_msg", {"comm_id": "ctl", "data": {"method": "update_states", "states": {"j": entry},
                                                          "buffer_paths": [["j", "state", "value"]]}}, {}, (SVG_SCRIPT,))
    event, changed, _ = rules.from_sandbox(states)
    assert changed and b"<script" not in event.buffers[0] and event.content["data"]["buffer_paths"] == [
        ["j", "state", "value"]]


# -- 2. chart tooltips ------------------------------------------------------------------------------
TOOLTIPS = {
    "content-data": {"mark": {"type": "point", "tooltip": {"content": "data"}}, "encoding": {}},
    "altair-field": {"mark": "point", "encoding": {"tooltip": [{"field": "image", "type": "nominal"}]}},
    "expression": {"mark": "point", "transform": [{"calculate": "'https://x.example/?d=' + datum.x", "as": "image"}],
                   "encoding": {"tooltip": {"field": "image"}}},
}


@pytest.mark.parametrize("shape", list(TOOLTIPS))
def test_chart_tooltips_are_vegas_own_text(shape):
    """vega-tooltip writes ``<img src=image>`` for any data object with an ``image`` key, however
    the value was made; ``embed_options.tooltip: false`` leaves Vega's handler (a ``title``
    attribute, text only), for every spec."""
    spec = {"data": {"values": [{"x": 1, "image": "https://x.example/leak.png"}]}, **TOOLTIPS[shape]}
    policed = OutputPolicy().bundle({VL: spec}, {VL: {"embed_options": {"tooltip": True}}})
    assert policed.metadata[VL]["embed_options"]["tooltip"] is False


# -- 3. styles stay inside their output --------------------------------------------------------------
LIFT = (".lm-Widget, .jp-Cell, .jp-OutputArea-output, .jp-WindowedPanel-outer, html, body, :root, *, :scope, "
        "div {overflow: visible !important; contain: none !important}")


@pytest.mark.parametrize("source", [
    f"<style>{LIFT}</style><a href='https://x.example' style='position:relative;top:-3000px'>x</a>",
    f"<style>@media screen {{ {LIFT} }} @supports (display: grid) {{ {LIFT} }}</style>",
    f"<style>@scope (.jp-Cell) {{ {LIFT} }} @layer x {{ {LIFT} }}</style>",
    f"<div><svg><defs><style>{LIFT}</style></defs><rect/></svg></div>",
    "<style>:scope {overflow: visible; contain: none}</style>", "<style>:scope/**/ , td {overflow: visible}</style>",
    "<style>@media all { :scope\t{overflow: visible} }</style>", "<style>:scope + div, :scope > {color: red}</style>",
    "<style>div { :has(> &) { overflow: visible; transform: scale(40) } }</style><div>x</div>",
    "<style>div { :scope:has(&) {overflow: visible} }</style>", "<style>p { :root & {color: red} }</style>",
    "<style>div { @media all { span, :is(&) {overflow: visible} } }</style>",
])
def test_every_style_rule_is_scoped_below_its_output(source):
    """Each block is one ``@scope`` whose rules all start with ``:scope`` and a combinator:
    nothing outside the output, not even the node JupyterLab puts it in, can be selected."""
    for mode in ("sanitize", "isolate"):
        html = OutputPolicy(mode).bundle({"text/html": source}).data["text/html"]
        blocks = re.findall(r"<style>(.*?)</style>", html, re.S)
        assert blocks and not html.startswith("<iframe")
        for block in blocks:
            css = block.replace("&gt;", ">").replace("&amp;", "&")
            assert css_violations(css, block=True) == [], css
            assert [n.lower_at_keyword for n in tinycss2.parse_stylesheet(css, True, True)] == ["scope"]


def test_nested_rules_relative_to_their_parent_are_kept():
    css = OutputPolicy().html("<style>div { & > p, b {color: red} &:hover {color: blue} }</style>")[0]
    assert "{& > p, b {color: red}; &:hover {color: blue}}" in css, css


def test_scoped_styles_are_not_active_content():
    """``isolate`` frames what could act; a scoped style block cannot, so it is not framed,
    and the cell says nothing."""
    styled = "<style>td { color: red }</style><table><tr><td>1</td></tr></table>"
    policed = OutputPolicy("isolate").bundle({"text/html": styled})
    assert not policed.changed and policed.data["text/html"].startswith("<style>@scope {")


# -- 4. Vega specs the renderer cannot lay out ----------------------------------------------------------
SCHEMA = "https://vega.github.io/schema/vega/v5.json"
RECT = {"type": "rect", "encode": {"enter": {"width": {"value": 5}, "height": {"value": 5}}}}


@pytest.mark.parametrize("spec", [{"$schema": SCHEMA}, {}, {"data": [{"name": "t", "values": [{"a": 1}]}]},
                                  {"signals": [{"name": "s", "value": 1}]}, {"marks": []}, {"marks": [{"type": "group"}]},
                                  {"marks": [{"type": "rect"}]}, {"width": 50, "height": 0, "marks": [RECT]}])
def test_a_vega_spec_without_marks_or_size_is_refused_with_a_note(spec):
    """Each of these made JupyterLab 4.6.6's renderer spin (the tab stopped answering)."""
    policed = OutputPolicy().bundle({VEGA: spec, "text/plain": "chart"})
    assert policed.data == {"text/plain": "chart"} and policed.changed
    assert policed.notes == [f"[a {VEGA} output was not shown: a Vega spec without marks, or without a width and a "
                             "height in pixels, can lay out nothing, and then JupyterLab's chart renderer stops its tab]"]
    drawn = {"width": 50, "height": 50, "marks": [RECT]}
    assert OutputPolicy().bundle({VEGA: drawn}).data[VEGA] == drawn


# -- 5. a fixed point -------------------------------------------------------------------------------------
@pytest.mark.parametrize("source", ["<li><a><table><li>t", "<h1><a><h2></a>", "<select><a>x", "<p><table><p>x",
                                    '<a title="t" href="https://x.example" rel="x">a</a><a>b</a>',
                                    "<a><table><a>x</a></table></a>", "<svg><p>x</svg>", "<b><p>x</b>y</p>",
                                    "<style>:scope , td {overflow: visible}</style>",
                                    "<style>:scope + div, :scope {color: red}</style>",
                                    "<style>div { :has(> &) {color: red} & > p, b {color: blue} }</style>"])
@pytest.mark.parametrize("mode", ["sanitize", "isolate"])
def test_what_the_policy_writes_policed_again_is_byte_identical(source, mode):
    """nh3 keeps the children of what it removes; the nestings that leaves are parsed again as a
    browser parses them until nothing moves, so the page builds the tree the policy checked."""
    policy = OutputPolicy(mode)
    first = policy.bundle({"text/html": source})
    second = policy.bundle(first.data, first.metadata)
    assert second.data == first.data and not second.changed
    if not first.data["text/html"].startswith("<iframe"):
        assert "mutates when parsed again" not in html_violations(first.data["text/html"])


def test_isolate_never_frames_its_own_sanitized_output():
    policy = OutputPolicy("isolate")
    for source in ("<li><a><table><li>t", "<b style='color:red'>x</b><style>p{margin:0}</style>"):
        clean = OutputPolicy().bundle({"text/html": source}).data["text/html"]
        assert policy.bundle({"text/html": clean}).data["text/html"] == clean


# -- the page's own classes ------------------------------------------------------------------------
PAGE_CLASS_NAMES = ["lm-cursor-backdrop", "jp-Notebook-ExecutionIndicator-tooltip", "Toastify__toast-container",
                    "p-Widget", "cm-tooltip", "vg-tooltip", "mjx-container", "tex2jax_process"]


def test_ipywidgets_own_classes_stay():
    """``interact`` sets ``_dom_classes=['widget-interact']`` itself: kept, and no note."""
    verdict = WidgetRules(OutputPolicy()).from_sandbox(opening("c" * 32, "VBoxModel", _dom_classes=["widget-interact"]))
    assert state_of(verdict)["_dom_classes"] == ["widget-interact"] and not verdict[1]


@pytest.mark.parametrize("name", PAGE_CLASS_NAMES)
def test_an_output_does_not_wear_the_pages_own_classes(name):
    """Lumino's ``lm-cursor-backdrop`` is ``position: fixed; z-index: 100``: an invisible link
    wearing it covered the page (the inline position the policy refuses, by a class). HTML,
    Markdown and a widget's ``_dom_classes`` keep their own names only."""
    html, changed = OutputPolicy().html(f'<a href="https://example.org/" class="{name} mine" '
                                        'style="width:100vw;height:100vh;opacity:0">x</a>')
    assert changed and 'class="mine"' in html and name not in html
    markdown = OutputPolicy().bundle({"text/markdown": f'<span class="{name}">x</span>'}).data["text/html"]
    assert name not in markdown
    rules = WidgetRules(OutputPolicy())
    verdict = rules.from_sandbox(opening("b" * 32, "HTMLModel", _dom_classes=[name, "mine"]))
    assert state_of(verdict)["_dom_classes"] == ["mine"]


# -- 6. a reconnect's update_states applies to the models the page holds ----------------------------------
def states_reply(rules: WidgetRules, model_id: str, state: dict) -> tuple[Comm, bool]:
    """The page's ``request_states`` answered with one ``ImageModel`` entry (at every reconnect
    Lab's manager applies each entry with ``set_state`` to a model it already holds)."""
    rules.from_frontend("comm_open", {"comm_id": "ctl", "target_name": "jupyter.widget.control"})
    entry = {"model_module": "@jupyter-widgets/controls", "model_name": "ImageModel", "model_module_version": "2.0.0",
             "state": state}
    event, changed, _ = rules.from_sandbox(Comm("comm_msg", {"comm_id": "ctl", "data": {
        "method": "update_states", "states": {model_id: entry}, "buffer_paths": []}}))
    return event, changed


def test_an_update_states_format_switch_polices_the_value_the_page_holds():
    rules = WidgetRules(OutputPolicy())
    rules.from_sandbox(opening("i", "ImageModel", buffer_paths=[["value"]], buffers=[SVG_SCRIPT], format="png"))
    event, changed = states_reply(rules, "i", {"format": "svg+xml"})
    data = event.content["data"]
    assert changed and data["states"]["i"]["state"] == {"format": "svg+xml"}
    assert data["buffer_paths"] == [["i", "state", "value"]] and b"<script" not in event.buffers[0]


def test_an_update_states_entry_keeps_what_the_rules_remember_of_a_known_model():
    rules = WidgetRules(OutputPolicy())
    rules.from_sandbox(opening("i", "ImageModel", format="svg+xml"))
    states_reply(rules, "i", {"width": "10"})
    event, _, _ = rules.from_sandbox(update("i", buffer_paths=[["value"]], buffers=[SVG_SCRIPT]))
    assert b"<script" not in media(event)[1]["value"]

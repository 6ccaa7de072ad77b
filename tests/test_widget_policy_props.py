"""Property tests of the widget rules: random states of random standard models, hostile strings.

Whatever the sandbox sends (right types, wrong types, unknown keys, updates that flip
``description_allow_html``), the state the page ends up with, as the widget manager would hold
it, never has an event handler, a ``javascript:`` URL, an external URL, a ``url(``-like CSS value,
an unsafe MathJax macro or a stray class where a view renders it (issue 16). HTML is read with
html5lib, CSS with tinycss2.
"""

from __future__ import annotations

import re

import html5lib
import pytest
import tinycss2
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from sandbox_kernel.core.events import Comm
from sandbox_kernel.policy import OutputPolicy
from sandbox_kernel.policy.widgets.rules import WidgetRules
from sandbox_kernel.policy.widgets.types import CLASS_NAME, ICON, is_ref, table
from tests.policy_oracle import css_violations
from tests.support.fuzz import examples

pytestmark = pytest.mark.unit

HOSTILE = [
    "<img src=x onerror=alert(1)>", "<img src = \"https://x.example/a.png\">", "javascript:alert(1)",
    "<a href=\"javascript:alert(1)\">x</a>", "<a href=\"https://x.example/\" target=_top>x</a>",
    "url(https://x.example/a)", "\\75 rl(https://x.example/a)", "u\\rl(https://x.example/)",
    "image-set('https://x.example/' 1x)",
    "expression(alert(1))", "</style><img src=x onerror=alert(1)>", "<style>b{background:url(https://x.example/)}</style>",
    "<svg><image href=https://x.example/ /></svg>", "<sk-x oncontentvisibilityautostatechange=alert(1) "
    "style=display:block;content-visibility:auto>", "$\\style{cursor:url(https://x.example/),auto}{X}$",
    "$\\href{javascript:alert(1)}{x}$", "\\(\\class{jp-x}{y}\\)", "$$\\unicode{x}\\require{html}$$", "\" onmouseover=\"x",
    "<b style=\"background:url(https://x.example/)\">b</b>", "@import 'https://x.example/'", "red", "12px", "url",
    "<b>ok</b> $x^2$", "jp-mod-hidden", "a b", "check", "",
]
FETCHING_CSS = {"url", "image", "image-set", "-webkit-image-set", "cross-fade", "element", "expression", "src", "paint"}
TEX_UNSAFE = re.compile(r"\\(style|href|class|cssId|unicode|require|url|html|data|def|newcommand|renewcommand|let)"
                        r"(?![A-Za-z])")
EXTERNAL = re.compile(r"^\s*(https?:)?//|^\s*(javascript|vbscript|data:text/html)", re.IGNORECASE)
MODELS = sorted(table())

strings = st.one_of(st.sampled_from(HOSTILE), st.text(max_size=12),
                    st.lists(st.sampled_from(HOSTILE), min_size=1, max_size=3).map("".join))


def values(kind, depth: int = 0):
    """Values of the table type ``kind`` (right type), often mixed with others (wrong type)."""
    if isinstance(kind, str):
        right = {"str": strings, "color": strings, "bool": st.booleans(), "int": st.integers(-5, 5),
                 "float": st.floats(-5, 5), "scalar": strings, "ref": st.just("IPY_MODEL_x"),
                 "bytes": st.just("bytes in JSON"), "output": outputs(), "file": st.just({"name": "f"}),
                 "date": st.just({"year": 2026, "month": 1, "date": 2}),
                 "datetime": st.just({"year": 2026, "month": 1, "date": 2}), "time": st.just({"hours": 1})}[kind]
    elif "null" in kind:
        right = st.one_of(st.none(), values(kind["null"], depth))
    elif "enum" in kind:
        right = st.sampled_from(kind["enum"])
    elif "ref" in kind:
        right = st.just("IPY_MODEL_x")
    elif "union" in kind:
        right = st.one_of(*[values(k, depth) for k in kind["union"]])
    elif "list" in kind:
        right = st.lists(values(kind["list"], depth + 1), max_size=3)
    else:
        right = st.tuples(*[values(k, depth + 1) for k in kind["tuple"]]).map(list)
    if depth:
        return right
    return st.one_of(right, right, strings, st.lists(strings, max_size=2), st.integers())


def outputs():
    return st.builds(lambda html: {"output_type": "display_data", "data": {"text/html": html}, "metadata": {}}, strings)


@st.composite
def sequences(draw):
    """A model's comm_open then a few updates, as hostile as a sandbox may send them."""
    key = draw(st.sampled_from(MODELS))
    kind = table()[key]
    names = sorted(n for n in kind.traits if n not in ("_model_module", "_model_name", "_model_module_version",
                                                      "_view_module", "_view_name", "_view_module_version"))
    view_module, view_version, view_name = kind.views[0]
    cls = {"_model_module": kind.module, "_model_name": kind.name, "_model_module_version": kind.version,
           "_view_module": view_module, "_view_module_version": view_version, "_view_name": view_name}
    states = []
    for _ in range(draw(st.integers(1, 3))):
        chosen = draw(st.lists(st.sampled_from(names), max_size=6, unique=True)) if names else []
        state = {n: draw(values(kind.traits[n]["type"])) for n in chosen}
        if "description_allow_html" in kind.traits and draw(st.booleans()):
            state["description_allow_html"] = draw(st.booleans())
        if draw(st.integers(0, 9)) == 0:
            state["not_a_trait"] = draw(strings)
        states.append(state)
    return kind, cls, states


def check_html(html: str) -> None:
    """No active content in ``html``, except an ``isolate`` frame: an opaque-origin iframe
    (``sandbox`` without ``allow-same-origin``) whose document the page cannot be reached from."""
    for element in html5lib.parse(html, namespaceHTMLElements=False).iter():
        tag = element.tag if isinstance(element.tag, str) else ""
        if tag == "iframe" and set(element.attrib) <= {"sandbox", "srcdoc", "style", "title"}:
            assert "allow-same-origin" not in element.attrib.get("sandbox", "allow-same-origin"), html
            continue
        assert tag not in ("script", "iframe", "object", "embed", "base", "meta", "link"), html
        for name, value in element.attrib.items():
            assert not name.lower().startswith("on"), html
            assert name.lower() != "target" or value == "_blank", html
            if name.lower() in ("src", "srcset", "background", "poster", "data", "action", "formaction"):
                assert not EXTERNAL.search(value) and not value.lower().startswith("javascript"), html
            if name.lower() in ("href", "xlink:href"):
                assert not re.match(r"\s*(javascript|vbscript|data):", value, re.IGNORECASE), html
            if name.lower() == "style":
                check_css(value)
        if tag == "style":
            check_css(element.text or "", block=True)
            assert "<" not in (element.text or ""), html
    # The page's MathJax typesets this document's text, never an isolate frame's own
    # document (its srcdoc attribute, a separate origin with no MathJax).
    check_tex(re.sub(r'srcdoc="[^"]*"', 'srcdoc=""', html))


def check_css(css: str, *, block: bool = False) -> None:
    """No url, error token, at-rule or fetching function anywhere in ``css``. A ``<style>`` block
    (``block``) is the one prelude-less ``@scope { ... }`` rule the policy writes around an
    output's rules (sandbox_kernel/policy/stylesheet.py; the oracle's css_violations checks its
    selectors stay below ``:scope``), and its content is held to the same rule."""
    def walk(tokens):
        for token in tokens:
            assert token.type not in ("url", "error", "at-keyword"), css
            if token.type == "function":
                assert token.lower_name not in FETCHING_CSS, css
                walk(token.arguments)
            elif getattr(token, "content", None) is not None and not isinstance(token.content, str):
                walk(token.content)
    tokens = [t for t in tinycss2.parse_component_value_list(css) if t.type not in ("whitespace", "comment")]
    if block and tokens:
        assert not css_violations(css, block=True), (css_violations(css, block=True), css)
        assert len(tokens) == 2 and tokens[0].type == "at-keyword" and tokens[0].lower_value == "scope" \
            and tokens[1].type == "{} block", css
        tokens = tokens[1].content
    walk(tokens)
    assert "<" not in css, css


def check_tex(text: str) -> None:
    assert not TEX_UNSAFE.search(text), text


def check_page(kind, page: dict) -> None:
    """The state the widget manager holds after the messages, where each view renders it."""
    allow_html = page.get("description_allow_html") is True
    for name, value in page.items():
        spec = kind.traits.get(name)
        assert spec is not None, name  # unknown keys never reach the page
        sink = spec.get("sink")
        for text in _strings(value):
            if sink == "html" or sink == "description" and allow_html:
                check_html(text)
            elif sink in ("tex", "description"):
                check_tex(text)
            elif sink and sink.startswith("css:"):
                check_css(text)
            elif sink == "classes":
                assert CLASS_NAME.match(text), text
            elif sink in ("icon", "fa_icon"):
                assert all(ICON.match(part) for part in text.split()) and (sink == "icon" or " " not in text), text
            elif sink == "media_format":
                assert text.strip().lower() != "url"
        if sink == "outputs":
            for output in value:
                if "data" in output:
                    check_html(output["data"].get("text/html", ""))


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _html_math(states):
    kind = table()["@jupyter-widgets/controls:HTMLMathModel"]
    view_module, view_version, view_name = kind.views[0]
    cls = {"_model_module": kind.module, "_model_name": kind.name, "_model_module_version": kind.version,
           "_view_module": view_module, "_view_module_version": view_version, "_view_name": view_name}
    return kind, cls, states


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sequences(), st.sampled_from(["sanitize", "isolate"]))
# Found by CI: under isolate an HTMLMath value goes into a frame, and the oracle once read the
# frame's own document (srcdoc) as if the page's MathJax typeset it.
@example(_html_math([{}, {"description": "<img src=x onerror=alert(1)>",
                          "value": "$\\style{cursor:url(https://x.example/),auto}{X}$"}]), "isolate")
def test_no_hostile_string_reaches_a_rendering_position(sequence, mode):
    kind, cls, states = sequence
    rules, page = WidgetRules(OutputPolicy(mode)), {}
    for i, state in enumerate(states):
        if i == 0:
            event = Comm("comm_open", {"comm_id": "w", "target_name": "jupyter.widget",
                                       "data": {"state": {**cls, **state}, "buffer_paths": []}})
        else:
            event = Comm("comm_msg", {"comm_id": "w", "data": {"method": "update", "state": state,
                                                               "buffer_paths": []}})
        shown, _, _ = rules.from_sandbox(event)
        if shown is None:
            return
        page.update(shown.content["data"]["state"])
        check_page(kind, page)


@settings(max_examples=examples(300), deadline=None)
@given(st.sampled_from(MODELS), st.data())
def test_links_set_only_what_views_show_as_text_or_numbers(key, data):
    kind = table()[key]
    trait = data.draw(st.sampled_from(sorted(kind.traits)))
    name = data.draw(st.sampled_from(["LinkModel", "DirectionalLinkModel"]))
    rules = WidgetRules(OutputPolicy())
    view_module, view_version, view_name = kind.views[0]
    rules.from_sandbox(Comm("comm_open", {"comm_id": "t", "target_name": "jupyter.widget", "data": {"state": {
        "_model_module": kind.module, "_model_name": kind.name, "_model_module_version": kind.version,
        "_view_module": view_module, "_view_module_version": view_version, "_view_name": view_name}}}))
    link = Comm("comm_open", {"comm_id": "l", "target_name": "jupyter.widget", "data": {"state": {
        "_model_module": "@jupyter-widgets/controls", "_model_name": name, "_model_module_version": "2.0.0",
        "_view_module": "@jupyter-widgets/controls", "_view_module_version": "2.0.0", "_view_name": None,
        "source": ["IPY_MODEL_t", trait], "target": ["IPY_MODEL_t", trait]}}})
    shown, _, note = rules.from_sandbox(link)
    spec = kind.traits[trait]
    if shown is not None:
        assert "sink" not in spec and not trait.startswith("_") and trait != "description_allow_html"
        assert not is_ref(spec["type"]) and "bytes" not in str(spec["type"])
    else:
        assert "widget link" in note


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sequences(), st.sampled_from(MODELS), st.booleans())
def test_a_restored_page_holds_only_what_the_entrys_model_may_render(sequence, loaded, disguise):
    """``update_states``: the manager makes each model from the entry's ``model_module``/
    ``model_name``; the state may claim another class. What passes is checked against the
    class the manager loads."""
    kind, cls, states = sequence
    entry_kind = table()[loaded] if disguise else kind
    rules = WidgetRules(OutputPolicy())
    rules.from_frontend("comm_open", {"comm_id": "ctl", "target_name": "jupyter.widget.control"})
    entry = {"model_module": entry_kind.module, "model_name": entry_kind.name,
             "model_module_version": entry_kind.version, "state": {**cls, **states[0]}}
    shown, _, _ = rules.from_sandbox(Comm("comm_msg", {"comm_id": "ctl", "data": {
        "method": "update_states", "states": {"w": entry}, "buffer_paths": []}}))
    restored = shown.content["data"]["states"]
    if "w" in restored:
        assert restored["w"]["model_name"] == entry_kind.name and entry_kind.name == kind.name
        check_page(entry_kind, restored["w"]["state"])


json_values = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), strings),
                           lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                   st.dictionaries(st.text(max_size=8), inner, max_size=3)),
                           max_leaves=12)
CLASS_VALUES = st.one_of(json_values, st.sampled_from(["@jupyter-widgets/controls", "@jupyter-widgets/base",
                                                       "HTMLModel", "LinkModel", "2.0.0", "HTMLView", "w", "ctl"]))


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(["comm_open", "comm_msg", "comm_close"]),
                          st.fixed_dictionaries({"comm_id": st.sampled_from(["w", "ctl", "l"]) | json_values,
                                                 "target_name": st.sampled_from(["jupyter.widget"]) | json_values,
                                                 "data": st.fixed_dictionaries(
                                                     {"method": st.sampled_from(["update", "update_states", "custom"])
                                                      | json_values,
                                                      "state": st.dictionaries(st.sampled_from(
                                                          ["_model_module", "_model_name", "_view_name", "value",
                                                           "source", "target", "description"]), CLASS_VALUES),
                                                      "states": st.dictionaries(st.text(max_size=3), json_values),
                                                      "buffer_paths": json_values})})),
                min_size=1, max_size=4))
def test_any_json_from_the_sandbox_is_answered_never_raised(messages):
    """A sandbox may send any JSON in a comm message: the rules answer (pass, rewrite, drop),
    they never raise in the kernel's output path."""
    rules = WidgetRules(OutputPolicy())
    rules.from_frontend("comm_open", {"comm_id": "ctl", "target_name": "jupyter.widget.control"})
    for msg_type, content in messages:
        shown, _, _ = rules.from_sandbox(Comm(msg_type, content, {}, (b"x",)))
        assert shown is None or shown.content is not content

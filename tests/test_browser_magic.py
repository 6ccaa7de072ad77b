"""Widgets made in ``%%sandbox --backend docker`` cells, in a real browser (issue 18).

A ``python3`` notebook (a plain ipykernel host with ``%load_ext magics``) in JupyterLab and headless
Chromium (``tests/browser.py``): an ``IntSlider`` that a later sandboxed cell sets (the page shows
it) and that the page moves (the sandbox sees it), an ``interact`` whose output appears and
follows the page, and a ``Button`` whose callback runs in the sandbox after its cell ended.
"""

from __future__ import annotations

import sys
import time

import pytest

from tests.browser import cell_outputs, jupyterlab, run_all, run_cell, screenshot, wait_finished
from tests.support.backends import prepared

pytestmark = [pytest.mark.browser, pytest.mark.docker, pytest.mark.timeout(400)]

MAGIC = "%%sandbox --backend docker --name w"
CELLS = {
    "load": "%load_ext magics",
    "slider": f"{MAGIC}\nimport ipywidgets as widgets\nslider = widgets.IntSlider(value=3, max=10)\nslider",
    "set": f"{MAGIC}\nslider.value = 7",
    "read": f"{MAGIC}\nprint('slider value', slider.value)",
    "interact": f"{MAGIC}\nfrom ipywidgets import interact\n@interact(x=2)\ndef triple(x):\n"
                "    print('triple', 3 * x)",
    "button": f"{MAGIC}\nclicks = []\nlabel = widgets.Label('not clicked')\n"
              "button = widgets.Button(description='press me')\n"
              "button.on_click(lambda _: (clicks.append(1), setattr(label, 'value', f'clicked {len(clicks)}')))\n"
              "widgets.HBox([button, label])",
    "clicks": f"{MAGIC}\nprint('clicks', len(clicks))",
}
INDEX = {name: i for i, name in enumerate(CELLS)}


@pytest.fixture(scope="module")
def page():
    from tests.support.host import host_arguments

    prepared("docker")
    specs = {"python3": {"argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}",
                                  *host_arguments("docker")],
                         "display_name": "Python 3 (ipykernel)", "language": "python"}}
    with jupyterlab(specs, prepared("docker").kernel_env) as lab:
        page = lab.open("magic-widgets", "python3", list(CELLS.values()))
        try:
            run_all(page)
            wait_finished(page, timeout=180)
        except Exception:
            screenshot(page, "magic-widgets-stuck")
            raise
        yield page
        screenshot(page, "magic-widgets")
        page.close()


def outputs(page, name: str):
    return cell_outputs(page, INDEX[name])


def test_the_slider_moves_both_ways(page):
    from playwright.sync_api import expect

    slider = outputs(page, "slider").locator(".widget-slider")
    readout = slider.locator(".widget-readout")
    expect(readout).to_have_text("7")  # set by a later sandboxed cell
    expect(outputs(page, "read")).to_contain_text("slider value 7")
    slider.locator(".noUi-handle").focus()
    page.keyboard.press("ArrowRight")  # the page moves it
    expect(readout).to_have_text("8")
    run_cell(page, INDEX["read"])
    expect(outputs(page, "read")).to_contain_text("slider value 8")


def test_interact_output_appears_and_follows_the_page(page):
    from playwright.sync_api import expect

    area = outputs(page, "interact").first  # the interact's Output widget nests an output area
    expect(area).to_contain_text("triple 6")
    area.locator(".widget-slider .noUi-handle").focus()
    page.keyboard.press("ArrowRight")
    expect(area).to_contain_text("triple 9", timeout=30_000)


def test_a_button_callback_runs_after_its_cell_ended(page):
    from playwright.sync_api import expect

    area = outputs(page, "button")
    expect(area.locator(".widget-label")).to_have_text("not clicked")
    time.sleep(1)
    area.locator("button", has_text="press me").click()
    expect(area.locator(".widget-label")).to_have_text("clicked 1", timeout=30_000)
    run_cell(page, INDEX["clicks"])
    expect(outputs(page, "clicks")).to_contain_text("clicks 1", timeout=30_000)

"""JupyterLab 4.6 with ``commsOverSubshells: disabled``: widget messages on the main shell, as
Voilà 0.5 sends them, in real Chromium. A slider moved while a cell runs reaches the kernel after
the cell and moves again after it, on python3 and on sandbox-local (a module of its own: one
playwright per process, and tests/test_browser_frontends.py's module-scoped JupyterLabs hold theirs).
"""

from __future__ import annotations

import sys

import pytest

from tests.browser import cell_outputs, drag_slider, jupyterlab, run_cell, wait_ready
from tests.support.backends import prepared
from tests.test_browser_frontends import SLIDER

pytestmark = [pytest.mark.browser, pytest.mark.kernel, pytest.mark.slow, pytest.mark.timeout(900)]

MAIN_SHELL = {"@jupyterlab/apputils-extension/kernels-settings.jupyterlab-settings": {"commsOverSubshells": "disabled"}}


@pytest.fixture(scope="module")
def main_shell_lab():
    """JupyterLab with ``commsOverSubshells: disabled``, sandbox-local and the plain python3 it is
    compared with."""
    from sandbox_kernel.frontdoors.kernel.kernelspec import kernel_json

    setup = prepared("local")
    specs = {"sandbox-local": kernel_json("local", setup.kernel_options),
             "python3": {"argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                         "display_name": "Python 3 (ipykernel)", "language": "python"}}
    with jupyterlab(specs, setup.kernel_env, settings=MAIN_SHELL) as server:
        yield server


@pytest.mark.parametrize("kernel", ["python3", "sandbox-local"])
def test_a_slider_moved_on_the_main_shell_during_a_cell_moves_again_after_it(main_shell_lab, kernel):
    """On the main shell a change made while a cell runs is handled after the cell. ipywidgets'
    page sends a slider's next change only at the idle of its last one: the wrapper gave the
    change made during the cell none, so the slider stopped reaching the kernel (before the fix,
    "got 9" never showed and neither did "got 12")."""
    from playwright.sync_api import expect

    name = f"main-shell-{kernel}"
    page = main_shell_lab.open(name, kernel, [SLIDER, "time.sleep(6)\nprint('slept')",
                                              "print('value', slider.value)"])
    wait_ready(page)
    run_cell(page, 0)
    label = page.locator(".probe").first
    label.wait_for(timeout=60_000)
    drag_slider(page, 4)
    expect(label).to_have_text("got 4", timeout=30_000)
    cell = page.locator(".jp-Notebook .jp-CodeCell").nth(1)
    cell.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Control+Enter")
    expect(cell.locator(".jp-InputArea-prompt")).to_have_text("[*]:", timeout=30_000)
    drag_slider(page, 9)
    expect(cell_outputs(page, 1)).to_contain_text("slept", timeout=30_000)
    expect(label).to_have_text("got 9", timeout=30_000)
    drag_slider(page, 12)
    expect(label).to_have_text("got 12", timeout=30_000)
    run_cell(page, 2)
    expect(cell_outputs(page, 2)).to_contain_text("value 12", timeout=30_000)
    page.close()

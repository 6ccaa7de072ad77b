"""The sandbox kernels as drop-ins in today's frontends, in real Chromium (issue 28): JupyterLab 4.6
and Notebook 7.6 with their default settings, so widget messages travel over kernel subshells
(``commsOverSubshells: perCommTarget``), on sandbox-local and sandbox-docker.

- a slider dragged through five values: each reaches the sandbox (its observer sees 4..8), and a
  later cell reads the last; moved again while a cell runs (one that ends only after the callback
  saw the move), its callback's effect (a label the callback sets) shows before that cell ends, as
  on python3 (a comm that last spoke on a subshell is served there, beside the running cell);
- the notebook closed and reopened three times, a cell run each time: no freeze (each reopen makes
  new subshells and opens the widget manager's comms on them; before the fix a reopen froze the
  kernel in 5 of 6 tries in Notebook 7 and 1 of 1 in Lab);
- ``len?`` shows its help (the pager's payload) under the cell;
- the debugger: a breakpoint in a sandboxed cell stops it there, the variables panel shows a local
  variable's value, continue finishes the cell.

tests/test_browser_main_shell.py has the same slider with widget messages on the main shell.
"""

from __future__ import annotations

import contextlib

import pytest

from tests.browser import cell_outputs, drag_slider, jupyterlab, run_cell, screenshot, wait_ready
from tests.support.backends import prepared

pytestmark = [pytest.mark.browser, pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(900)]

KERNELS = ["local", "docker"]

SLIDER = ("import ipywidgets as w, time\nseen = []\nslider = w.IntSlider(3, max=20)\nlabel = w.Label('none')\n"
          "label.add_class('probe')\ndef moved(change):\n    seen.append(change['new'])\n"
          "    label.value = f\"got {change['new']}\"\nslider.observe(moved, 'value')\nw.VBox([slider, label])")
# the third cell runs until the slider's callback has seen 9, then 5 s more: moved while it runs,
# the callback's effect must show before it ends (a callback held until the cell's end never lets
# it end by itself: the label's wait fails, not a race against a fixed sleep)
WAITS_FOR_9 = ("for _ in range(900):\n    if 9 in seen:\n        break\n    time.sleep(0.1)\n"
               "time.sleep(5)\nprint('slept')")
CELLS = [SLIDER, "print('seen', seen, 'value', slider.value)", WAITS_FOR_9, "len?"]
DEBUGGED = "def f():\n    secret_value = 4242\n    return secret_value + 1\nf()"


@pytest.fixture(scope="module", params=["lab", "notebook"])
def frontend(request):
    """JupyterLab, then Notebook 7, each with sandbox-local and sandbox-docker kernelspecs set up
    for this machine (their own settings left at the defaults)."""
    from sandbox_kernel.frontdoors.kernel.kernelspec import kernel_json

    specs, env = {}, {}
    for name in KERNELS:
        setup = prepared(name)
        specs[f"sandbox-{name}"] = kernel_json(name, setup.kernel_options)
        env.update(setup.kernel_env)
    with jupyterlab(specs, env, frontend=request.param) as server:
        yield server


@pytest.fixture(params=KERNELS)
def kernel(request) -> str:
    return f"sandbox-{request.param}"


def prompt(page, index: int) -> str:
    return page.locator(".jp-Notebook .jp-CodeCell").nth(index).locator(".jp-InputArea-prompt").inner_text().strip()


def test_a_slider_reaches_the_sandbox_at_every_value_and_while_a_cell_runs(frontend, kernel):
    from playwright.sync_api import expect

    name = f"slider-{frontend.frontend}-{kernel}"
    page = frontend.open(name, kernel, CELLS)
    wait_ready(page)
    run_cell(page, 0)
    label = page.locator(".probe").first
    label.wait_for(timeout=60_000)
    for value in range(4, 9):  # one drag through five values, pausing at each as a person does
        drag_slider(page, value)
        expect(label).to_have_text(f"got {value}", timeout=30_000)
    run_cell(page, 1)
    expect(cell_outputs(page, 1)).to_contain_text("seen [4, 5, 6, 7, 8] value 8", timeout=30_000)

    cell = page.locator(".jp-Notebook .jp-CodeCell").nth(2)
    cell.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Control+Enter")  # WAITS_FOR_9
    expect(cell.locator(".jp-InputArea-prompt")).to_have_text("[*]:", timeout=30_000)
    drag_slider(page, 9)
    expect(label).to_have_text("got 9", timeout=30_000)
    assert prompt(page, 2) == "[*]:", "the callback's effect came only after the cell ended"
    screenshot(page, name)
    expect(cell_outputs(page, 2)).to_contain_text("slept", timeout=30_000)

    run_cell(page, 3)
    expect(cell_outputs(page, 3)).to_contain_text("Return the number of items in a container", timeout=30_000)
    page.close()


def test_reopened_three_times_without_a_freeze(frontend, kernel):
    name = f"reopen-{frontend.frontend}-{kernel}"
    page = frontend.open(name, kernel, CELLS[:2])
    wait_ready(page)
    run_cell(page, 0)
    page.locator(".widget-slider").first.wait_for(timeout=60_000)
    for _ in range(3):
        page.close()
        page = frontend.reopen(name)
        wait_ready(page)
        run_cell(page, 1)  # waits (60 s at most) for the cell's new prompt
        assert "value 3" in cell_outputs(page, 1).first.inner_text()
    page.close()


def test_the_debugger_stops_at_a_breakpoint_inside_the_sandbox(frontend, kernel):
    from playwright.sync_api import expect

    name = f"debug-{frontend.frontend}-{kernel}"
    page = frontend.open(name, kernel, [DEBUGGED])
    wait_ready(page)
    bug = page.locator(".jp-DebuggerBugButton").first
    expect(bug).to_have_attribute("aria-disabled", "false", timeout=30_000)  # the kernelspec offers it
    bug.click()
    expect(bug).to_have_attribute("aria-pressed", "true", timeout=30_000)
    page.evaluate("() => window.jupyterapp.commands.execute('debugger:show-panel')")  # Notebook 7 starts it closed
    gutter = page.locator(".jp-Notebook .jp-CodeCell").first.locator(".cm-breakpoint-gutter .cm-gutterElement").nth(3)
    listed = page.locator(".jp-DebuggerBreakpoint")  # the panel lists a breakpoint once the kernel took it
    for _ in range(5):  # a click before the debug session has started is not sent to the kernel (twice, when loaded)
        gutter.click()
        with contextlib.suppress(AssertionError):
            expect(listed).to_have_count(1, timeout=10_000)
            break
    expect(listed).to_have_count(1)
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-cell'); }")  # its promise ends with the cell
    variables = page.locator(".jp-DebuggerVariables").first
    expect(variables).to_contain_text("secret_value", timeout=60_000)  # stopped: the frame's locals
    expect(variables).to_be_visible(timeout=30_000)
    expect(variables).to_contain_text("4242")
    screenshot(page, name)
    page.evaluate("() => { window.jupyterapp.commands.execute('debugger:continue'); }")
    expect(cell_outputs(page, 0)).to_contain_text("4243", timeout=60_000)
    page.close()

"""Voilà 0.5 (the server extension of one Jupyter server) rendering a dashboard on sandbox-local,
loaded 20 times, 4 pages at a time, each with a kernel of its own (issue 37 §5): every load's page
connects to its kernel and shows the dashboard's slider, and on every load the slider dragged
through three values draws the last one (once, the plot stayed at "freq 4" with the slider at 5).

Why the dashboard draws only when the slider moves: Voilà executes a notebook with nbclient, whose
stand-in for an Output widget answers each output the widget captures during that execution with a
``comm_msg`` that jupyter_client's ``Session.send`` writes on a blocking shadow of the asyncio shell
socket. An ``execute_reply`` that reached that socket just before, while the event loop was busy,
is never read (the raw send consumed the socket's edge-triggered readiness; the reply stays queued,
``ZMQ_EVENTS`` = 3), and the page never loads. That is upstream (voila-dashboards/voila#1428,
jupyter/jupyter_client#1010 and #1059, open) and python3 does it as often as a sandbox kernel (measured
here with ``interact``: python3 2 of 40 loads, sandbox-local 3 of 76; both kernels sent their reply,
traced on the wire): docs/how-to/jupyterhub.md, "Voilà". So the output widget is filled by the slider's
observer, never during Voilà's execution, and this test sees what the sandbox kernel does.
"""

from __future__ import annotations

import json
import urllib.request

import pytest

from tests.browser import NETWORK_CHANGED, drag_slider, jupyterlab
from tests.support.backends import prepared

pytestmark = [pytest.mark.browser, pytest.mark.kernel, pytest.mark.timeout(1200)]

LOADS, AT_ONCE = 20, 4
DASHBOARD = """import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
from IPython.display import clear_output, display

slider = widgets.IntSlider(value=3, min=1, max=10, description="freq")
plot = widgets.Output()


def draw(change):
    with plot:
        clear_output(wait=True)
        x = np.linspace(0, 2 * np.pi, 200)
        plt.figure(figsize=(4, 2))
        plt.plot(x, np.sin(slider.value * x))
        plt.title(f"freq {slider.value}")
        plt.show()
        print(f"drawn: freq {slider.value}")


slider.observe(draw, "value")
display(widgets.VBox([slider, plot]))"""


@pytest.fixture(scope="module")
def server():
    """One Jupyter server with Voilà's extension (the test extra's voila) and sandbox-local."""
    pytest.importorskip("voila", reason="pip install 'sandbox-kernel[test]'")
    from sandbox_kernel.frontdoors.kernel.kernelspec import kernel_json

    setup = prepared("local")
    with jupyterlab({"sandbox-local": kernel_json("local", setup.kernel_options)}, setup.kernel_env) as lab:
        lab.write_notebook("dashboard", "sandbox-local", [DASHBOARD])
        yield lab


def kernels(server) -> list[str]:
    return [kernel["id"] for kernel in server.api("kernels")]


def shut_down(server, kernel_id: str) -> None:
    request = urllib.request.Request(f"{server.url}/api/kernels/{kernel_id}", method="DELETE",
                                     headers={"Authorization": f"token {server.token}"})
    with urllib.request.urlopen(request, timeout=60):
        pass


def open_dashboard(context, url: str):
    """``(page, console)``: a new page loading ``url`` (returns at once) and the list its console's
    messages go to."""
    page, console = context.new_page(), []
    page.on("console", lambda message: console.append(message.text))
    page.goto(url, wait_until="commit")
    return page, console


def shows_the_dashboard(page, console: list[str]) -> None:
    """Wait for the dashboard's slider (up to 90 s), reloading once if Chromium aborted the page's
    loads because the host's network changed."""
    for attempt in (1, 2):
        try:
            page.locator(".widget-slider .noUi-handle").first.wait_for(timeout=90_000)
            return
        except Exception:
            if attempt == 2 or not any(NETWORK_CHANGED in text for text in console):
                raise
            console.clear()
            page.reload(wait_until="commit")


def test_the_dashboard_loads_20_times_and_draws_the_last_value(server):
    """Every load shows the dashboard, draws when its slider is dragged, draws the *last* dragged
    value, and has a kernel of its own that goes with it. The last value was missed in 2 of 4
    full runs (one load of 20 stayed one value behind): Voilà sends widget messages on the main
    shell, and a change that came while the wrapper relayed the previous one got no busy and no
    idle, so ipywidgets' page (which sends a model's next change only at the idle of its last one)
    held the later values back. Each now gets its own turn and status, as on python3
    (``SandboxKernel._relay_in_turn``; on the wire: tests/test_widgets.py)."""
    from playwright.sync_api import expect

    context = server.browser.new_context(viewport={"width": 1000, "height": 800})
    # the template's stylesheets from a CDN: this test reaches no listener but its own
    context.route("**/*", lambda route: route.continue_() if route.request.url.startswith(server.url)
                  else route.abort())
    url = f"{server.url}/voila/render/dashboard.ipynb?token={server.token}"
    failures = []
    for start in range(0, LOADS, AT_ONCE):
        before = set(kernels(server))
        pages = [open_dashboard(context, url) for _ in range(AT_ONCE)]
        for number, (page, console) in enumerate(pages, start + 1):
            try:
                shows_the_dashboard(page, console)
                kernel = json.loads(page.locator("#jupyter-config-data").text_content())["kernelId"]
                for value in (4, 5, 6):
                    drag_slider(page, value, minimum=1, maximum=10)
                expect(page.locator(".widget-output")).to_contain_text("drawn: freq", timeout=30_000)
                expect(page.locator(".widget-output img")).to_have_count(1, timeout=30_000)
                assert kernel in set(kernels(server)) - before
            except Exception as exc:  # playwright's timeout: the page never showed its slider
                shown = page.locator(".widget-readout").all_inner_texts()  # what the slider says it is at
                failures.append(f"load {number}: {type(exc).__name__}: {str(exc).splitlines()[0]} (slider: {shown})")
                continue
            try:
                expect(page.locator(".widget-output")).to_contain_text("drawn: freq 6", timeout=30_000)
            except AssertionError:
                drawn = page.locator(".widget-output").inner_text().strip()
                failures.append(f"load {number}: the last value was not drawn: {drawn!r} with the slider at "
                                f"{page.locator('.widget-readout').all_inner_texts()}")
        for page, _ in pages:
            page.close()
        for kernel in set(kernels(server)) - before:  # one kernel per load, gone with its load
            shut_down(server, kernel)
    context.close()
    assert not failures, failures

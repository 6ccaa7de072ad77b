"""The notebook's files in a real browser (issue 30): a notebook in JupyterLab and headless Chromium
(``tests/browser.py``) on ``sandbox-docker`` with the workspace on reads the data next to it, says
once which folder the sandbox sees, lists the figure a cell saves (with its thumbnail, as the
output policy left it), and copies it back with ``%sandbox download --artifacts`` after the user
answers the kernel's question in the page."""

from __future__ import annotations

import pytest

from sandbox_kernel.frontdoors.kernel.kernelspec import kernel_json
from tests.browser import cell_outputs, jupyterlab, run_all, screenshot, wait_cell
from tests.support.backends import prepared

pytestmark = [pytest.mark.browser, pytest.mark.docker, pytest.mark.timeout(400)]

CELLS = [
    "import pandas as pd\npd.read_csv('data/x.csv')",
    "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.savefig('fig.png')",
    "%sandbox download --artifacts",
]


def test_a_notebook_reads_its_folder_and_gets_its_figure_back():
    from playwright.sync_api import expect

    setup = prepared("docker")
    options = [*setup.kernel_options, *(f"--DockerBackend.{k}={v}" for k, v in setup.traits.items()),
               "--DockerBackend.workspace=ro"]
    with jupyterlab({"sandbox-docker": kernel_json("docker", options)}, setup.kernel_env) as lab:
        (lab.root / "data").mkdir(parents=True)
        (lab.root / "data" / "x.csv").write_text("city,temp\nLyon,14.5\n")
        lab.root.chmod(0o755)
        (lab.root / "data").chmod(0o755)
        page = lab.open("files", "sandbox-docker", CELLS)
        try:
            run_all(page)
            wait_cell(page, 1, timeout=180)
            expect(cell_outputs(page, 0).locator("table")).to_contain_text("Lyon")
            expect(cell_outputs(page, 0).first).to_contain_text(f"the sandbox's working directory shows {lab.root}")
            listing = cell_outputs(page, 1).last
            expect(listing).to_contain_text("1 file written:")
            expect(listing.locator("code").first).to_have_text("fig.png")
            assert listing.locator("img").get_attribute("src").startswith("data:image/png;base64,")
            stdin = page.locator(".jp-Stdin-input")
            stdin.wait_for(timeout=60_000)
            expect(cell_outputs(page, 2).first).to_contain_text(
                f"Copy 1 file (fig.png) from the sandbox into {lab.root}? [y/N]")
            stdin.fill("y")
            stdin.press("Enter")
            wait_cell(page, 2)
            expect(cell_outputs(page, 2).last).to_contain_text(f"to {lab.root}: fig.png")
            screenshot(page, "files")
        except Exception:
            screenshot(page, "files-stuck")
            raise
        assert (lab.root / "fig.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")

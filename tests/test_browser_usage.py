"""jupyter-resource-usage's Kernel Usage panel in JupyterLab 4.6 (Chromium), its settings at their
defaults (``show_host_usage``: on), on sandbox-local and sandbox-docker: the panel shows the
sandbox's figures where it stayed blank before (``TypeError: Cannot read properties of undefined
(reading 'active')``: the wrapper's ``usage_reply`` had no ``host_virtual_memory``)."""

from __future__ import annotations

import re
import time

import pytest

from tests.browser import jupyterlab, run_cell, wait_ready
from tests.support.backends import prepared

pytestmark = [pytest.mark.browser, pytest.mark.docker, pytest.mark.timeout(600)]

KERNELS = ["local", "docker"]
BALLAST = "ballast = bytearray(300 * 1024 * 1024)\nsum(i * i for i in range(2_000_000))"
LIMIT = ("int(next(open(p).read() for p in ('/sys/fs/cgroup/memory.max', "
         "'/sys/fs/cgroup/memory/memory.limit_in_bytes') if __import__('os').path.exists(p)))")
"""The sandbox's memory limit in bytes, read in the container (cgroup v2, else v1)."""
UNITS = {"B": 1, "KB": 1024, "MB": 1024**2, "GB": 1024**3, "TB": 1024**4}


@pytest.fixture(scope="module")
def lab():
    """JupyterLab with sandbox-local and sandbox-docker set up for this machine; the server has
    jupyter-resource-usage (the test extra's) with its default settings."""
    pytest.importorskip("jupyter_resource_usage", reason="pip install 'sandbox-kernel[test]'")
    from sandbox_kernel.frontdoors.kernel.kernelspec import kernel_json

    specs, env = {}, {}
    for name in KERNELS:
        setup = prepared(name)
        specs[f"sandbox-{name}"] = kernel_json(name, setup.kernel_options)
        env.update(setup.kernel_env)
    with jupyterlab(specs, env) as server:
        yield server


def panel_figures(page, memory_over: float = 0) -> dict[str, str]:
    """The Kernel Usage panel's lines (``{"Kernel Host": ..., "Memory": ..., "Total": ...}``) once it
    shows its host section and a kernel memory over ``memory_over`` bytes (read again for up to
    30 s: the panel asks every 5 s, so the figures it shows may predate the last cell), opened in
    the right sidebar as a person opens it."""
    page.evaluate("window.jupyterapp.shell.activateById('kernelusage-panel-id')")
    # it asks every 5 s while shown; its first answer may predate the sandbox's start (no figures
    # yet: a local sandbox has its id, its process, before its kernel answers), the next has them
    page.wait_for_function("() => { const text = document.querySelector('.jp-KernelUsage-view')?.innerText || '';"
                           " return /Kernel Host: sandbox \\(\\w+ \\w/.test(text) && !text.includes('not started')"
                           " && text.includes('Host Virtual Memory') && !/Memory: 0.00 B/.test(text); }", timeout=60_000)
    deadline = time.monotonic() + 30
    while True:
        lines = page.locator(".jp-KernelUsage-view .jp-KernelUsage-separator").all_inner_texts()
        figures = {key.strip(): value.strip() for key, value in (
            line.split(":", 1) for line in (text.strip() for text in lines) if ":" in line)}
        if in_bytes(figures.get("Memory", "0 B")) > memory_over or time.monotonic() > deadline:
            return figures
        time.sleep(1)


def in_bytes(shown: str) -> float:
    """``'1.00 GB'`` → bytes (the panel's units are powers of 1024)."""
    number, unit = shown.split()
    return float(number) * UNITS[unit]


@pytest.mark.parametrize("backend", KERNELS)
def test_the_kernel_usage_panel_shows_the_sandboxes_figures(lab, backend):
    """Its kernel section shows the sandbox's memory; its host section the machine the sandbox runs
    on: this one for local, the container for docker (its memory limit as the total)."""
    import psutil

    errors: list[str] = []
    page = lab.open(f"usage-{backend}", f"sandbox-{backend}", [BALLAST, LIMIT])
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    wait_ready(page)
    run_cell(page, 0)
    if backend == "docker":
        run_cell(page, 1)
        total = int(page.locator(".jp-Notebook .jp-CodeCell").nth(1).locator(".jp-OutputArea-output").inner_text())
    else:
        total = psutil.virtual_memory().total
    figures = panel_figures(page, memory_over=300 * 1024**2)
    assert figures["Kernel Host"].startswith(f"sandbox ({backend} "), figures
    assert in_bytes(figures["Memory"]) > 300 * 1024**2, figures  # the sandbox's ballast, not the wrapper's ~70 MiB
    assert abs(in_bytes(figures["Total"]) - total) <= 0.01 * total, (figures, total)
    assert 0 < in_bytes(figures["Active"]) and 0 < in_bytes(figures["Available"]) <= total, figures
    assert not [e for e in errors if re.search(r"TypeError|Cannot read properties", e)], errors
    page.close()

"""Checkpoints in a real browser (issue 38): a notebook in JupyterLab 4.6 and headless Chromium
(``tests/browser.py``) on ``sandbox-docker`` runs three cells, ``%sandbox undo`` gives the
variable its old value back; then the sandbox's kernel is killed from outside (``docker exec``,
as the OOM killer or a crash would end it), and the next cell says in one line which cell's
state it runs on, and shows the old value."""

from __future__ import annotations

import re
import secrets

import pytest

from sandbox_kernel.frontdoors.kernel.kernelspec import kernel_json
from tests.browser import cell_outputs, jupyterlab, run_all, run_cell, screenshot, wait_cell
from tests.support.backends import prepared

pytestmark = [pytest.mark.browser, pytest.mark.docker, pytest.mark.timeout(400)]

CELLS = ["x = 1", "x = 2", "x = 3", "%sandbox undo", "x", "y = 'kept'", "x, y"]

KILL_THE_KERNEL = (  # the running kernel is the one whose oom_score_adj the keeper raised (checkpoints: 0)
    "import os, signal\n"
    "for p in filter(str.isdigit, os.listdir('/proc')):\n"
    "    try:\n"
    "        if 'launch.py' in open(f'/proc/{p}/cmdline').read() and open(f'/proc/{p}/oom_score_adj').read().strip() == '500':\n"
    "            os.kill(int(p), signal.SIGKILL)\n"
    "            print(p)\n"
    "    except OSError:\n"
    "        pass\n")


def test_undo_and_a_kernel_killed_from_outside_in_jupyterlab():
    import docker
    from playwright.sync_api import expect

    setup = prepared("docker")
    session = f"ckpt-browser-{secrets.token_hex(4)}"
    options = [*setup.kernel_options, *(f"--DockerBackend.{k}={v}" for k, v in setup.traits.items()),
               "--DockerBackend.checkpoint_min_seconds=0", f"--DockerBackend.session={session}"]
    with jupyterlab({"sandbox-docker": kernel_json("docker", options)}, setup.kernel_env) as lab:
        page = lab.open("checkpoints", "sandbox-docker", CELLS)
        try:
            run_all(page)
            wait_cell(page, 6, timeout=180)
            expect(cell_outputs(page, 3).first).to_contain_text(re.compile(
                r"Undone cell \d+: the sandbox runs on the state after cell \d+, taken \d+ s ago"))
            expect(cell_outputs(page, 4).first).to_have_text("2")
            expect(cell_outputs(page, 6).first).to_have_text("(2, 'kept')")

            client = docker.from_env()
            [container] = client.containers.list(filters={"label": f"org.sandbox-kernel.session={session}"})
            killed = container.exec_run(["python", "-c", KILL_THE_KERNEL], user="1000:1000")
            assert killed.exit_code == 0 and killed.output.strip().isdigit(), killed

            run_cell(page, 6)
            said = cell_outputs(page, 6)
            expect(said.first).to_contain_text(re.compile(
                r"\[The sandbox had stopped \(its kernel was killed by SIGKILL\); this cell runs on the state after "
                r"cell \d+, taken \d+ s ago\.\]"))
            expect(said.last).to_have_text("(2, 'kept')")
            screenshot(page, "checkpoints")
        except Exception:
            screenshot(page, "checkpoints-stuck")
            raise

"""The newcomer's path, from a fresh copy of this tree: the README's install lines as written (a
new venv; pip reads the wheels .ci/test-wheels-setup.sh downloaded, with no index: tests/support/wheels.py),
JupyterLab opened on the sandbox kernels in Chromium, and the example notebooks run the way the
table of docs/get-started/examples.md says (each command is checked to be there)."""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.browser import CHROMIUM, SETTINGS, run_all, wait_finished
from tests.targets import skip_or_fail

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(1500)]

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()
EXAMPLES = (REPO / "docs" / "get-started" / "examples.md").read_text()
NOTEBOOK_COMMANDS = {  # as the table of example notebooks gives them
    "quickstart": "jupyter execute notebooks/quickstart.ipynb",
    "docker": "JUPYTER_CONFIG_PATH=$PWD/notebooks/config/docker jupyter execute notebooks/docker.ipynb",
    "magic": "jupyter execute --allow-errors notebooks/magic.ipynb",
    "data": "jupyter execute notebooks/data.ipynb",
}


def block_after(heading: str) -> list[str]:
    """The commands of the first indented code block after ``heading`` in the README (comments dropped)."""
    section = README[README.index(heading):]
    block = re.search(r"\n\n((?:    .*\n)+)", section).group(1)
    return [line[4:].split("  #")[0].strip() for line in block.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    """A copy of this tree's files (what a clone holds: git's tracked and new files, nothing
    ignored), with the README's install lines run in it; yields ``(folder, sh)``. Every pip there
    installs from build/test-wheels/host only."""
    from tests.support.backends import prepared
    from tests.support.wheels import offline_pip

    prepared("docker")
    pip = offline_pip("host")
    if shutil.which("git") is None:
        skip_or_fail("git is not installed")
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, capture_output=True,
                            check=True).stdout.decode().split("\0")
    clone = tmp_path_factory.mktemp("newcomer") / "sandbox-kernel"
    for name in filter(None, listed):
        if (REPO / name).is_file():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, clone / name)
    env = {"PATH": os.environ["PATH"], "HOME": str(clone.parent), "LANG": "C.UTF-8",
           **{k: v for k, v in os.environ.items() if k.startswith(("PIP_", "DOCKER_", "SSL_CERT")) or k.endswith("_CA_BUNDLE")},
           **pip}

    def sh(command: str, timeout: float = 900) -> subprocess.CompletedProcess:
        done = subprocess.run(["bash", "-c", f". .venv/bin/activate 2>/dev/null; {command}"], cwd=clone, env=env,
                              capture_output=True, text=True, timeout=timeout)
        assert done.returncode == 0, f"{command}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        return done
    install = block_after("## Install")
    assert install[0] == "cd sandbox-kernel" and install[1].startswith("python3 -m venv .venv")
    outputs = [sh(command).stdout for command in install[1:]]
    yield clone, sh, outputs


def test_the_readmes_install_lines_work_on_a_fresh_copy(fresh):
    _, _, outputs = fresh
    *_, installed, listed = outputs
    assert "skipped sandbox-e2b: its backend needs e2b-code-interpreter (pip install 'sandbox-kernel[e2b]', " \
           "then install again)" in installed
    kernels = {line.split()[0] for line in listed.splitlines()[1:]}
    assert {"sandbox-local", "sandbox-docker"} <= kernels and "sandbox-e2b" not in kernels


def test_jupyterlab_opens_on_the_sandbox_kernels(fresh):
    """The README's JupyterLab lines (``pip install jupyterlab``, ``jupyter lab``), then the quickstart
    notebook run in Chromium on sandbox-local."""
    clone, sh, _ = fresh
    lab = block_after("### Open JupyterLab or Notebook 7")
    assert lab == ["pip install jupyterlab", "jupyter lab"]
    sh(f"{lab[0]} pandas matplotlib ipywidgets")  # the examples' packages, as docs/get-started/examples.md says
    token = secrets.token_hex(8)
    (clone / "settings").mkdir()
    for name, values in SETTINGS.items():
        (clone / "settings" / name).parent.mkdir(parents=True, exist_ok=True)
        (clone / "settings" / name).write_text(json.dumps(values))
    server = subprocess.Popen(["bash", "-c", f". .venv/bin/activate; exec {lab[1]} --no-browser --ip=127.0.0.1 "
                               f"--port=0 --allow-root --IdentityProvider.token={token} "
                               f"--LabApp.user_settings_dir={clone / 'settings'} --LabApp.expose_app_in_browser=True"],
                              cwd=clone, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env={"PATH": os.environ["PATH"], "HOME": str(clone.parent)}, start_new_session=True)
    try:
        url = next(m.group(1) for line in server.stdout
                   if (m := re.search(r"(http://127\.0\.0\.1:\d+/)lab", line)))
        from playwright.sync_api import sync_playwright

        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1200, "height": 1600})
            page.goto(f"{url}lab/tree/notebooks/quickstart.ipynb?reset&token={token}")
            specs = page.evaluate("fetch('/api/kernelspecs').then(r => r.json()).then(j => Object.keys(j.kernelspecs))")
            assert {"sandbox-local", "sandbox-docker"} <= set(specs)
            run_all(page)
            wait_finished(page, timeout=300)
            shown = page.eval_on_selector_all(".jp-OutputArea-output", "els => els.map(e => e.innerText)")
            assert any("ZeroDivisionError" in text for text in shown) and len(shown) >= 8
            browser.close()
    finally:
        os.killpg(server.pid, 15)
        server.wait(30)


def test_each_example_notebook_runs_as_the_readme_says(fresh):
    clone, sh, _ = fresh
    sh("pip install -q pandas matplotlib ipywidgets pyarrow")
    for name, command in NOTEBOOK_COMMANDS.items():
        assert command in EXAMPLES, f"docs/get-started/examples.md does not give {command!r}"
        assert "**Run it:**" in (clone / "notebooks" / f"{name}.ipynb").read_text()
        sh(command, timeout=600)

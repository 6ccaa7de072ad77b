"""The newcomer's path, from a fresh copy of this tree: the README's install lines as written (a
new venv; pip reads the wheels .ci/test-wheels-setup.sh downloaded, with no index: tests/support/wheels.py),
JupyterLab opened on the sandbox kernels in Chromium, and the example notebooks run the way the
table of docs/get-started/examples.md says (each command is checked to be there)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from tests.browser import CHROMIUM, SETTINGS, run_all
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
    clone, _, outputs = fresh
    *_, installed, listed = outputs
    assert "skipped sandbox-e2b: its backend needs e2b-code-interpreter (pip install 'sandbox-kernel[e2b]', " \
           "then install again)" in installed
    kernels = {line.split()[0] for line in listed.splitlines()[1:]}
    assert {"sandbox-local", "sandbox-docker"} <= kernels and "sandbox-e2b" not in kernels
    # `pip install .` builds in place: nothing of the build may stay in the clone (setuptools left both)
    assert not (clone / "build").exists() and not list(clone.glob("*.egg-info"))


def lab_server(clone: Path):
    """The README's ``jupyter lab`` in the clone's venv, as a newcomer starts it (its own
    environment: PATH and HOME), on 127.0.0.1 with a token and settings that keep every cell in the
    DOM; returns ``(process, url, token)``."""
    token = secrets.token_hex(8)
    (clone / "settings").mkdir(exist_ok=True)
    for name, values in SETTINGS.items():
        (clone / "settings" / name).parent.mkdir(parents=True, exist_ok=True)
        (clone / "settings" / name).write_text(json.dumps(values))
    server = subprocess.Popen(["bash", "-c", ". .venv/bin/activate; exec jupyter lab --no-browser --ip=127.0.0.1 "
                               f"--port=0 --allow-root --IdentityProvider.token={token} "
                               f"--LabApp.user_settings_dir={clone / 'settings'} --LabApp.expose_app_in_browser=True"],
                              cwd=clone, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env={"PATH": os.environ["PATH"], "HOME": str(clone.parent)}, start_new_session=True)
    log: list[str] = []
    url = None
    for line in server.stdout:
        log.append(line)
        if m := re.search(r"(http://127\.0\.0\.1:\d+/)lab", line):
            url = m.group(1)
            break
    if url is None:
        raise AssertionError(f"jupyter lab ended (status {server.wait()}) without an address; its log's end:\n"
                             + "".join(log[-30:]))
    threading.Thread(target=lambda: log.extend(server.stdout), daemon=True).start()  # keep its pipe drained
    deadline = time.monotonic() + 60
    while True:  # it printed its address: it answers, or its log says why not (a run's page met a refused connection)
        try:
            with urllib.request.urlopen(f"{url}api/status?token={token}", timeout=5):
                return server, url, token
        except OSError as exc:
            if server.poll() is not None or time.monotonic() > deadline:
                os.killpg(server.pid, 15)
                raise AssertionError(f"jupyter lab does not answer at {url} ({exc}); its log's end:\n"
                                     + "".join(log[-30:])) from exc
            time.sleep(0.2)


ALL_NUMBERED = """() => [...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputArea-prompt')]
  .every(prompt => /^\\[\\d+\\]:$/.test(prompt.textContent.trim()))"""

LAUNCHER_CARDS = """() => [...document.querySelectorAll('.jp-Launcher-section')]
  .filter(section => section.querySelector('.jp-Launcher-sectionTitle')?.textContent.trim() === 'Notebook')
  .flatMap(section => [...section.querySelectorAll('.jp-LauncherCard')])
  .map(card => ({label: card.querySelector('.jp-LauncherCard-label')?.textContent.trim(),
                 logo: card.querySelector('.jp-LauncherCard-icon img')?.getAttribute('src') || null}))"""


def run_all_in_lab(browser, url: str, token: str, notebook: str) -> list[tuple[str, str, str]]:
    """Open ``notebook`` in JupyterLab as a newcomer does, Run All Cells, wait until every cell ran;
    returns each code cell's ``(prompt, output text, tags)``."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    page = browser.new_page(viewport={"width": 1200, "height": 1600})
    page.goto(f"{url}lab/workspaces/{Path(notebook).stem}/tree/{notebook}?reset&token={token}")
    run_all(page)
    # every code cell numbered: after an error, even in a cell tagged raises-exception, JupyterLab's
    # Run All shows the cells still queued as "[ ]:" while they go on running (wait_finished's "no
    # [*]" comes too early); a cell that never runs keeps "[ ]:" and ran_to_the_end names it
    with contextlib.suppress(PlaywrightTimeout):
        page.wait_for_function(ALL_NUMBERED, timeout=300_000)
    cells = page.evaluate("""() => [...window.jupyterapp.shell.currentWidget.content.widgets]
      .filter(cell => cell.model.type === 'code')
      .map(cell => [cell.node.querySelector('.jp-InputArea-prompt').textContent.trim(),
                    cell.node.querySelector('.jp-OutputArea')?.innerText || '',
                    (cell.model.getMetadata('tags') || []).join(' '),
                    cell.node.querySelectorAll('.jp-OutputArea img').length])""")
    page.close()
    return [tuple(cell) for cell in cells]


def ran_to_the_end(cells: list[tuple]) -> None:
    """Every code cell ran (a prompt with its count: Run All stops at an unexpected error), and
    only the cells tagged ``raises-exception`` show an error."""
    unrun = [(index, prompt, output[-300:]) for index, (prompt, output, *_) in enumerate(cells)
             if not re.fullmatch(r"\[\d+\]:", prompt)]
    assert not unrun, unrun
    failed = [(output[:300], tags) for _, output, tags, _ in cells if "Traceback" in output or "Error" in output]
    assert all("raises-exception" in tags for _, tags in failed), failed


def test_jupyterlab_opens_on_the_sandbox_kernels(fresh):
    """The README's JupyterLab lines (``pip install jupyterlab``, ``jupyter lab``) after its install
    lines, nothing else: each sandbox kernel shows its logo in the Launcher; the example notebooks run
    to their end with Run All as opened (quickstart on sandbox-local; docker.ipynb on sandbox-docker
    without the options of notebooks/config/docker: its mount and volume cells say so, in one line,
    instead of failing); the README's ``--default`` line makes sandbox-docker the Launcher's first card."""
    clone, sh, _ = fresh
    lab = block_after("### Open JupyterLab or Notebook 7")
    assert lab == ["pip install jupyterlab", "jupyter lab"]
    sh(lab[0])
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        server, url, token = lab_server(clone)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 1600})
            page.goto(f"{url}lab?reset&token={token}")
            page.locator(".jp-LauncherCard").first.wait_for(timeout=60_000)
            cards = page.evaluate(LAUNCHER_CARDS)
            logos = {card["label"]: card["logo"] for card in cards}
            for name in ("local", "docker"):
                assert logos[f"Python 3 (sandbox: {name})"], f"sandbox-{name} has no logo in the Launcher: {cards}"
            assert cards[0]["label"] == "Python 3 (ipykernel)"  # jupyter_server's default, until --default
            page.close()

            quickstart = run_all_in_lab(browser, url, token, "notebooks/quickstart.ipynb")
            ran_to_the_end(quickstart)  # matplotlib and pandas came with the install line's [examples]
            assert "ZeroDivisionError" in quickstart[-2][1] and sum(images for *_, images in quickstart) >= 1

            docker = run_all_in_lab(browser, url, token, "notebooks/docker.ipynb")
            ran_to_the_end(docker)
            shown = "\n".join(output for _, output, *_ in docker)
            assert "/home/sandbox/data is not mounted: this kernel runs without the `mounts` option" in shown
            assert "summary.csv went with the sandbox: its working directory was a tmpfs" in shown
        finally:
            os.killpg(server.pid, 15)
            server.wait(30)

        default = next(line for line in README.splitlines() if "sandbox-kernel install --sys-prefix --default" in line)
        sh(default.strip().split("  #")[0])
        server, url, token = lab_server(clone)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 1600})
            page.goto(f"{url}lab?reset&token={token}")
            page.locator(".jp-LauncherCard").first.wait_for(timeout=60_000)
            assert page.evaluate(LAUNCHER_CARDS)[0]["label"] == "Python 3 (sandbox: docker)"
            specs = page.evaluate("fetch('/api/kernelspecs').then(r => r.json())")
            assert specs["default"] == "sandbox-docker" and "python3" in specs["kernelspecs"]
        finally:
            os.killpg(server.pid, 15)
            server.wait(30)
            browser.close()


def test_each_example_notebook_runs_as_the_readme_says(fresh):
    clone, sh, _ = fresh
    for name, command in NOTEBOOK_COMMANDS.items():
        assert command in EXAMPLES, f"docs/get-started/examples.md does not give {command!r}"
        assert "**Run it:**" in (clone / "notebooks" / f"{name}.ipynb").read_text()
        sh(command, timeout=600)

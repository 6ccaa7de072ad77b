"""Take the site's JupyterLab screenshots again: ``make screenshots`` (or ``python docs/screenshots.py``).

Starts ``jupyter lab`` on 127.0.0.1 (a free port, a random token, a temporary root holding a copy
of ``notebooks/``) with the sandbox kernels installed in this environment, opens the Launcher and
the example notebooks in headless Chromium (Debian's ``chromium``, driven by playwright; no
browser is downloaded), runs each notebook's cells, and saves PNGs into
``docs/_static/screenshots/`` (``--out DIR`` elsewhere, ``--only NAME,...`` for some of them).

The PNGs are committed: the site is built without a browser, a Docker engine or a kernel. Take
them again when JupyterLab's look or a notebook changes. The docker notebook needs a Docker
engine and the sandbox image; its kernel gets the options ``notebooks/config/docker`` gives it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "docs" / "_static" / "screenshots"
CHROMIUM = os.environ.get("SANDBOX_KERNEL_CHROMIUM", "/usr/bin/chromium")
VIEWPORT = {"width": 1280, "height": 860}
SETTINGS = {  # every cell in the DOM, no news or update toasts, the light theme
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false",
                                                                         "checkForUpdates": False},
}
HIDDEN = {  # Jupyter config files: the extensions a user of sandbox-kernel does not have
    "labconfig/page_config.json": {"disabledExtensions": {"@jupyter/nbgrader": True}},
    "jupyter_server_config.json": {"ServerApp": {"jpserver_extensions": {
        "nbgrader.server_extensions.formgrader": False, "nbgrader.server_extensions.validate_assignment": False,
        "nbgrader.server_extensions.assignment_list": False, "nbgrader.server_extensions.course_list": False}}},
}
SHOTS = {  # name: the notebook it opens (None: the Launcher), the cell shown at the top, the answer to input()
    "launcher": (None, 0, None),
    "local-notebook": ("quickstart.ipynb", 0, None),
    "docker-notebook": ("docker.ipynb", 4, None),  # "Nothing of the host comes in" and what follows
    "magic-notebook": ("magic.ipynb", 0, "Ada"),
    "widgets-notebook": ("widgets.ipynb", 0, None),
}
KERNEL_READY = """() => {
  const widget = window.jupyterapp?.shell.currentWidget, session = widget?.sessionContext;
  const kernel = session?.session?.kernel;
  return Boolean(widget?.context?.isReady && session?.isReady && kernel?.connectionStatus === 'connected'
                 && kernel?.status === 'idle');
}"""
FINISHED = """() => {
  const prompts = [...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputArea-prompt')]
    .map(p => p.textContent.trim());
  return prompts.length > 0 && !prompts.includes("[*]:") && prompts.some(p => /^\\[\\d+\\]:$/.test(p));
}"""


@contextlib.contextmanager
def jupyterlab(root: Path) -> Iterator[tuple[str, str]]:
    """``jupyter lab`` serving ``root`` on 127.0.0.1; yields ``(url, token)``."""
    tmp = Path(tempfile.mkdtemp(prefix="sandbox-kernel-shots-"))
    for name, values in SETTINGS.items():
        (tmp / "settings" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp / "settings" / name).write_text(json.dumps(values))
    for name, values in HIDDEN.items():  # what the project's test extra adds to JupyterLab (nbgrader)
        (tmp / "config" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp / "config" / name).write_text(json.dumps(values))
    token = secrets.token_hex(16)
    config = os.pathsep.join(filter(None, [str(root / "config" / "docker"), os.environ.get("JUPYTER_CONFIG_PATH")]))
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"), "JUPYTER_CONFIG_DIR": str(tmp / "config"),
           "JUPYTER_CONFIG_PATH": config}
    log = open(tmp / "server.log", "wb")
    server = subprocess.Popen([sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", "--port=0",
                               f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
                               f"--LabApp.user_settings_dir={tmp / 'settings'}",
                               f"--LabApp.workspaces_dir={tmp / 'workspaces'}", "--LabApp.expose_app_in_browser=True",
                               "--allow-root"], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield _server_url(server, tmp), token
    finally:
        server.terminate()  # the server shuts its kernels down on SIGTERM
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)


def _server_url(server: subprocess.Popen, tmp: Path) -> str:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.poll() is not None:
            sys.exit(f"jupyter lab exited:\n{(tmp / 'server.log').read_text()[-2000:]}")
        for info in (tmp / "runtime").glob("jpserver-*.json"):
            with contextlib.suppress(json.JSONDecodeError, KeyError):
                return json.loads(info.read_text())["url"].rstrip("/")
        time.sleep(0.2)
    sys.exit("jupyter lab did not write its server info within 60 s")


def shoot(browser, url: str, token: str, name: str, out: Path) -> Path:
    """Open the Launcher or the shot's notebook in a page of its own, run all its cells, show
    the shot's cell at the top, and save ``out/NAME.png``."""
    notebook, top, answer = SHOTS[name]
    page = browser.new_page(viewport=VIEWPORT)
    page.set_default_timeout(30_000)
    if notebook is None:
        page.goto(f"{url}/lab/workspaces/{name}?reset&token={token}")
        page.locator(".jp-Launcher").wait_for()
    else:
        page.goto(f"{url}/lab/workspaces/{name}/tree/{notebook}?reset&token={token}")
        page.locator(".jp-Notebook .jp-CodeCell").first.wait_for(timeout=60_000)
        page.wait_for_function(KERNEL_READY, timeout=120_000)
        page.evaluate("() => window.jupyterapp.commands.execute('application:toggle-left-area')")
        page.evaluate("() => window.jupyterapp.commands.execute('notebook:clear-all-cell-outputs')")
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
        _finish(page, answer)
        page.locator(".jp-Notebook .jp-Cell").nth(top).evaluate("cell => cell.scrollIntoView({block: 'start'})")
    page.wait_for_timeout(800)  # fonts, figures and widgets settle
    path = out / f"{name}.png"
    page.screenshot(path=str(path))
    page.close()
    _shrink(path)
    return path


def _shrink(path: Path) -> None:
    """128 colours are plenty for JupyterLab's flat UI: the PNG is 60 % smaller (Pillow, which
    matplotlib brings; without it the screenshot stays as Chromium wrote it)."""
    try:
        from PIL import Image
    except ImportError:
        return
    with Image.open(path) as image:
        small = image.convert("RGB").quantize(colors=128, method=Image.Quantize.MEDIANCUT)
    small.save(path, optimize=True)


def _finish(page, answer: str | None, timeout: float = 300) -> None:
    """Wait until every cell ran, answering an ``input()`` prompt with ``answer`` if one shows."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if page.evaluate(FINISHED):
            return
        prompt = page.locator(".jp-Stdin-input")
        if answer is not None and prompt.count():
            prompt.first.fill(answer)
            prompt.first.press("Enter")
        page.wait_for_timeout(500)
    raise TimeoutError("the notebook's cells did not all run")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT, help="folder for the PNGs (default: %(default)s)")
    parser.add_argument("--only", default=",".join(SHOTS), help="comma-separated names (default: all)")
    args = parser.parse_args(argv)
    names = args.only.split(",")
    if unknown := set(names) - set(SHOTS):
        parser.error(f"unknown screenshot {sorted(unknown)[0]} (one of {', '.join(SHOTS)})")
    if not os.access(CHROMIUM, os.X_OK):
        parser.error(f"no Chromium at {CHROMIUM} (Debian: apt-get install chromium; or SANDBOX_KERNEL_CHROMIUM)")
    from playwright.sync_api import sync_playwright

    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="sandbox-kernel-shots-root-") as root:
        shutil.copytree(REPO / "notebooks", root, dirs_exist_ok=True, ignore=shutil.ignore_patterns("conftest.py"))
        with jupyterlab(Path(root)) as (url, token), sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            for name in names:
                print(f"{name}: {shoot(browser, url, token, name, args.out)}")
            browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""JupyterLab 4 in headless Chromium, for the end-to-end tests of what outputs may do in the page.

:class:`JupyterLab` runs ``jupyter lab`` on 127.0.0.1 (port picked by the OS, a random token,
a temporary root directory, kernelspecs and settings in temporary Jupyter directories) and
opens notebooks in Chromium through the ``playwright`` Python package. The browser is Debian's
``chromium`` (``.ci/browser-setup.sh`` installs it); playwright never downloads one.
:class:`RequestRecorder` is a plain HTTP server on 127.0.0.1 that records every request: the
"outside" that a sandbox without network might try to reach through the user's browser.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import nbformat

from tests.targets import skip_or_fail

CHROMIUM = os.environ.get("SANDBOX_KERNEL_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[1] / "build" / "browser-artifacts"
PNG_1PX = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000"
                        "1f15c4890000000d49444154789c6360f8ffff3f0005fe02fea7d6a4bb"
                        "0000000049454e44ae426082")
SETTINGS = {  # JupyterLab user settings: every cell in the DOM, no news or update toasts
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false",
                                                                         "checkForUpdates": False},
}


def stop_server(process: subprocess.Popen, log: Any, log_path: Path, artifact: str, grace: float) -> None:
    """SIGTERM a test's server (SIGKILL after ``grace`` seconds), close its ``log`` and keep a
    copy of it as ``build/browser-artifacts/ARTIFACT``."""
    from tests.targets.gateway import stop_process

    stop_process(process, grace)
    log.close()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shutil.copy(log_path, ARTIFACTS / artifact)


class RequestRecorder:
    """An HTTP server on 127.0.0.1 (OS-picked port) that answers every GET with a 1x1 PNG and
    keeps the request paths in :attr:`paths` (in arrival order)."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                recorder.paths.append(self.path)
                self.send_response(200)
                self.send_header("Content-Type", "image/png")
                self.send_header("Content-Length", str(len(PNG_1PX)))
                self.end_headers()
                self.wfile.write(PNG_1PX)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.origin = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class JupyterLab:
    """A JupyterLab server and a headless Chromium, both started by :meth:`start`.

    ``kernelspecs``: ``{name: kernel.json dict}`` written into a temporary ``JUPYTER_PATH``
    (they take precedence over the installed ones of the same name). ``frontend``: ``"lab"``
    (JupyterLab) or ``"notebook"`` (Notebook 7, the same components in its own shell, one notebook
    per page).
    """

    APPS = {"lab": ("jupyterlab", "LabApp"), "notebook": ("notebook", "JupyterNotebookApp")}

    def __init__(self, kernelspecs: dict[str, dict[str, Any]], env: dict[str, str] | None = None,
                 frontend: str = "lab", options: tuple[str, ...] = (),
                 settings: dict[str, dict[str, Any]] | None = None) -> None:
        self.kernelspecs, self.env, self.frontend, self.options = kernelspecs, env or {}, frontend, options
        self.settings = {**SETTINGS, **(settings or {})}
        self.tmp = Path(tempfile.mkdtemp(prefix="sandbox-kernel-lab-"))
        self.root = self.tmp / "root"
        self.token = secrets.token_hex(16)
        self.url = ""
        self.process: subprocess.Popen | None = None
        self._playwright = self.browser = None

    # -- server -----------------------------------------------------------------------------
    def _write_dirs(self) -> dict[str, str]:
        for sub in ("root", "config", "runtime"):
            (self.tmp / sub).mkdir()
        for name, spec in self.kernelspecs.items():
            (self.tmp / "data" / "kernels" / name).mkdir(parents=True)
            (self.tmp / "data" / "kernels" / name / "kernel.json").write_text(json.dumps(spec))
        for name, values in self.settings.items():
            path = self.tmp / "settings" / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(values))
        return {"JUPYTER_PATH": str(self.tmp / "data"), "JUPYTER_CONFIG_DIR": str(self.tmp / "config"),
                "JUPYTER_RUNTIME_DIR": str(self.tmp / "runtime")}

    def start_server(self) -> None:
        """Start the server alone (:meth:`start` starts the browser too)."""
        env = {**os.environ, **self._write_dirs(), **self.env}
        module, app = self.APPS[self.frontend]
        argv = [sys.executable, "-m", module, "--no-browser", "--ip=127.0.0.1", "--port=0",
                f"--IdentityProvider.token={self.token}", f"--ServerApp.root_dir={self.root}",
                f"--{app}.user_settings_dir={self.tmp / 'settings'}",
                f"--{app}.workspaces_dir={self.tmp / 'workspaces'}", f"--{app}.expose_app_in_browser=True",
                "--allow-root", *self.options]
        self.log = open(self.tmp / "server.log", "wb")
        self.process = subprocess.Popen(argv, env=env, stdout=self.log, stderr=subprocess.STDOUT,
                                        start_new_session=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"jupyter lab exited: {(self.tmp / 'server.log').read_text()[-2000:]}")
            infos = list((self.tmp / "runtime").glob("jpserver-*.json"))
            if infos:
                with contextlib.suppress(json.JSONDecodeError, OSError):  # written; then listening?
                    self.url = json.loads(infos[0].read_text())["url"].rstrip("/")
                    self.api("status")
                    return
            time.sleep(0.2)
        raise RuntimeError("jupyter lab did not answer within 60 s")

    # -- browser ----------------------------------------------------------------------------
    def _start_browser(self) -> None:
        from playwright.sync_api import sync_playwright

        self._playwright = sync_playwright().start()
        self.browser = self._playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])

    def start(self) -> JupyterLab:
        self.start_server()
        self._start_browser()
        return self

    def stop(self) -> None:
        if self.browser is not None:
            self.browser.close()
        if self._playwright is not None:
            self._playwright.stop()
        if self.process is not None:  # the server shuts its kernels down on SIGTERM
            stop_server(self.process, self.log, self.tmp / "server.log", f"{self.APPS[self.frontend][0]}-server-{running_module()}.log",
                        grace=30)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def api(self, path: str) -> Any:
        """The JSON answer of ``GET /api/PATH`` (with the token); None when the server answers
        404 (e.g. ``terminals`` without terminado installed)."""
        import urllib.error
        import urllib.request

        request = urllib.request.Request(f"{self.url}/api/{path}", headers={"Authorization": f"token {self.token}"})
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                return json.loads(answer.read())
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise

    def post(self, path: str, body: dict[str, Any]) -> Any:
        """The JSON answer of ``POST /api/PATH`` with ``body`` (with the token)."""
        import urllib.request

        request = urllib.request.Request(f"{self.url}/api/{path}", data=json.dumps(body).encode(), method="POST",
                                         headers={"Authorization": f"token {self.token}",
                                                  "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=120) as answer:
            return json.loads(answer.read())

    def run(self, kernel_id: str, code: str, timeout: float = 120) -> str:
        """Run ``code`` on the server's kernel ``kernel_id`` through its connection file, as a
        second client; returns the ``execute_reply``'s status."""
        from jupyter_client import BlockingKernelClient

        client = BlockingKernelClient(connection_file=str(self.tmp / "runtime" / f"kernel-{kernel_id}.json"))
        client.load_connection_file()
        client.start_channels(hb=False)  # a heartbeat not answered yet by a kernel still starting reads as "died"
        try:
            client.wait_for_ready(timeout=timeout)
            return client.execute_interactive(code, timeout=timeout)["content"]["status"]
        finally:
            client.stop_channels()

    # -- notebooks --------------------------------------------------------------------------
    def write_notebook(self, name: str, kernel: str, cells: list[str]) -> Path:
        """``ROOT/NAME.ipynb`` with one code cell per source, for kernelspec ``kernel``."""
        nb = nbformat.v4.new_notebook()
        nb.metadata["kernelspec"] = {"name": kernel, "display_name": self.kernelspecs.get(kernel, {}).get(
            "display_name", kernel), "language": "python"}
        nb.cells = [nbformat.v4.new_code_cell(source) for source in cells]
        path = self.root / f"{name}.ipynb"
        nbformat.write(nb, path)
        return path

    def open(self, name: str, kernel: str, cells: list[str]):
        """Write the notebook and start opening it in a new page (a playwright ``Page``); the
        page loads and starts the kernel while the caller goes on."""
        self.write_notebook(name, kernel, cells)
        return self.reopen(name)

    def reopen(self, name: str):
        """Open the notebook ``NAME.ipynb`` as it is in a new page (its kernel, if the server still
        runs one for it, is the one the page connects to)."""
        page = self.browser.new_page(viewport={"width": 1200, "height": 1600})
        page.set_default_timeout(60_000)  # a loaded CI machine: a page with others open answered late
        watch_failures(page)
        # a workspace per page: pages sharing the default one would open each other's notebooks
        path = f"lab/workspaces/{name}/tree/{name}.ipynb?reset&" if self.frontend == "lab" else \
            f"notebooks/{name}.ipynb?"
        page.goto(f"{self.url}/{path}token={self.token}", wait_until="commit")
        return page


def drag_slider(page, value: int, minimum: int = 0, maximum: int = 20) -> None:
    """Drag the page's first ipywidgets slider to ``value`` on its ``minimum``..``maximum`` scale,
    as a person's mouse does, on the tab in front: press on the handle, move in steps, release.

    The page is brought to the front first (a person drags in the tab they see). Chromium acks a
    page's mouse moves with its frames, and a tab behind others in its window gets about one a
    second: a drag there took 4 to 5 s instead of 0.1 s (measured on Voilà's dashboard), three
    drags per page were most of test_voila's 5 minutes."""
    page.bring_to_front()
    handle = page.locator(".widget-slider .noUi-handle").first
    track = page.locator(".widget-slider .noUi-base").first.bounding_box()
    box = handle.bounding_box()
    y = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + box["width"] / 2, y)
    page.mouse.down()
    page.mouse.move(track["x"] + track["width"] * (value - minimum) / (maximum - minimum), y, steps=4)
    page.mouse.up()


def run_all(page) -> None:
    """Wait for the page's notebook and kernel, then choose Run > Run All Cells (returns at
    once; :func:`wait_finished` waits for the cells)."""
    wait_ready(page)
    page.locator(".lm-MenuBar-item", has_text="Run").first.click()
    page.locator(".lm-Menu-item:visible", has_text="Run All Cells").first.click()


NETWORK_CHANGED = "ERR_NETWORK_CHANGED"
"""What Chromium calls aborting a page's requests because this host's network interfaces changed:
each container another test starts adds one, so a page loading meanwhile can miss a stylesheet or
a script chunk and never get ready (a run at 3 workers: a notebook's page "not ready in 180 s",
its failed requests all ERR_NETWORK_CHANGED). A person reloads; so do :func:`wait_ready` and
test_voila, once."""


def _network_changed(page) -> bool:
    return any(NETWORK_CHANGED in failure for failure in getattr(page, "failed_requests", []))


def wait_ready(page, timeout: float = 180) -> None:
    """Wait up to ``timeout`` seconds for the page's notebook and its kernel (:data:`KERNEL_READY`),
    accepting a dialog shown meanwhile: one that came before the kernel (a loaded server's
    "Server Connection Error") held the wait until it ended (CI, 90 s). A page whose requests
    Chromium aborted because the host's network changed (:data:`NETWORK_CHANGED`; the page's
    :func:`watch_failures` sees them) is reloaded once."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    deadline = time.monotonic() + timeout
    reloaded = False

    def reload_once() -> bool:
        nonlocal reloaded
        if reloaded or not _network_changed(page):
            return False
        reloaded = True
        page.reload(wait_until="commit")
        return True

    while True:  # the notebook's first cell: up to the deadline, in 5 s steps, so a broken load is seen
        try:
            page.locator(".jp-Notebook .jp-CodeCell").first.wait_for(timeout=5_000)
            break
        except PlaywrightTimeout:
            if not reload_once() and time.monotonic() > deadline:
                raise
    while True:
        dismiss_dialog(page)
        try:
            page.wait_for_function(KERNEL_READY, timeout=5_000)
            break
        except PlaywrightTimeout:
            if reload_once():
                continue
            if time.monotonic() > deadline:
                state, shot = page.evaluate(KERNEL_STATE), "none"
                with contextlib.suppress(Exception):  # the state is the message; the picture helps
                    shot = screenshot(page, f"not-ready-{running_module()}-{int(time.time())}")
                failed = getattr(page, "failed_requests", [])[-5:]
                raise AssertionError(f"the notebook's kernel was not ready in {timeout:.0f} s: {state} "
                                     f"(failed requests: {failed}; screenshot: {shot})") from None
    dismiss_dialog(page)


def watch_failures(page) -> None:
    """Keep the page's failed requests (method, URL, Chromium's error text) in
    ``page.failed_requests``, for the message of a page that did not get ready."""
    page.failed_requests = []
    page.on("requestfailed", lambda request: page.failed_requests.append(
        f"{request.method} {request.url.split('?')[0]}: {request.failure}"))


def running_module() -> str:
    """The running test's module name (``test_voila``), for artifact names; "tests" outside one."""
    current = os.environ.get("PYTEST_CURRENT_TEST", "")
    return Path(current.split("::")[0]).stem if current else "tests"


def dismiss_dialog(page) -> None:
    """Accept a JupyterLab dialog that a loaded server made the page show meanwhile ("Server
    Connection Error" when a REST call came late): it stays until someone closes it, and it
    takes the menu's clicks (a run at 3 workers lost 12 setups to it)."""
    dialog = page.locator(".jp-Dialog .jp-mod-accept")
    if dialog.count():
        dialog.first.click()


KERNEL_READY = """() => {
  const widget = window.jupyterapp?.shell.currentWidget, session = widget?.sessionContext;
  const kernel = session?.session?.kernel;
  return Boolean(widget?.context?.isReady && session?.isReady && kernel?.connectionStatus === 'connected'
                 && kernel?.status === 'idle');
}"""
"""True once the current notebook's document is loaded and its kernel connected and idle
(``window.jupyterapp``: ``--LabApp.expose_app_in_browser``). The execution indicator says
"idle" earlier, and Run All in that gap clears the cells instead of running them."""

KERNEL_STATE = """() => {
  const widget = window.jupyterapp?.shell.currentWidget, session = widget?.sessionContext;
  const kernel = session?.session?.kernel;
  return {document: widget?.context?.isReady, session: session?.isReady, kernel: kernel?.name,
          connection: kernel?.connectionStatus, status: kernel?.status,
          dialogs: [...document.querySelectorAll('.jp-Dialog')].map(d => d.innerText.slice(0, 200))};
}"""
"""What :data:`KERNEL_READY` waits for, as it stands (for the message when it never comes)."""

EXECUTED = re.compile(r"^\[\d+\]:$")
"""A code cell's prompt once it has run: ``[N]:``."""

FINISHED = """() => {
  const prompts = [...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputArea-prompt')]
    .map(p => p.textContent.trim());
  return prompts.length > 0 && !prompts.includes('[*]:') && prompts.some(p => /^\\[\\d+\\]:$/.test(p));
}"""


def wait_finished(page, timeout: float = 120) -> list[str]:
    """Wait until no cell of the page's notebook is queued or running; returns the prompts
    (``["[1]:", "[2]:", ...]``)."""
    page.wait_for_function(FINISHED, timeout=timeout * 1000)
    return page.locator(".jp-Notebook .jp-CodeCell .jp-InputArea-prompt").all_inner_texts()


def wait_cell(page, index: int, timeout: float = 120) -> None:
    """Wait until code cell ``index`` has run (its prompt shows an execution count).

    One timeout governs the whole wait: playwright's ``expect`` finds the prompt again at each
    poll, so a page too busy to answer for the page's default 15 s (2 loaded cores, several
    JupyterLab pages) still has ``timeout`` seconds, and a prompt JupyterLab renders anew is
    followed."""
    from playwright.sync_api import expect

    prompt = page.locator(".jp-Notebook .jp-CodeCell").nth(index).locator(".jp-InputArea-prompt")
    expect(prompt).to_have_text(EXECUTED, timeout=timeout * 1000)


def run_cell(page, index: int, timeout: float = 60) -> None:
    """Run code cell ``index`` again (click into it, Ctrl+Enter: run in place) and wait, at most
    ``timeout`` seconds, for its new prompt (an execution count other than the one before)."""
    from playwright.sync_api import expect

    cell = page.locator(".jp-Notebook .jp-CodeCell").nth(index)
    prompt = cell.locator(".jp-InputArea-prompt")
    before = prompt.inner_text().strip()
    cell.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Control+Enter")
    expect(prompt).not_to_have_text(before, timeout=timeout * 1000)
    expect(prompt).to_have_text(EXECUTED, timeout=timeout * 1000)


def cell_outputs(page, index: int):
    """The output elements (``.jp-OutputArea-output``) of code cell ``index``."""
    return page.locator(".jp-Notebook .jp-CodeCell").nth(index).locator(".jp-OutputArea-output")


SCROLL_HEIGHT = """() => {
  const scroller = document.querySelector('.jp-NotebookPanel .jp-WindowedPanel-outer');
  const cells = document.querySelector('.jp-NotebookPanel .jp-WindowedPanel-viewport');
  if (!scroller || !cells) return 0;
  scroller.scrollTop = 0;
  return cells.offsetHeight;
}"""


def screenshot(page, name: str) -> Path:
    """Save a PNG of the page under ``build/browser-artifacts/NAME.png``."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    # the notebook scrolls inside the page: make the page tall enough to show all of it
    height = page.evaluate(SCROLL_HEIGHT)
    size = page.viewport_size
    if height + 200 > size["height"]:
        page.set_viewport_size({"width": size["width"], "height": height + 200})
    page.evaluate(SCROLL_HEIGHT)  # scrolls to the top
    # evidence, not a measured wait: a tall page's screenshot took more than the page's 15 s on this
    # 2-core machine under load (every test of test_browser.py then errored in its fixture)
    page.screenshot(path=str(path), timeout=180_000)
    return path


@contextlib.contextmanager
def jupyterlab(kernelspecs: dict[str, dict[str, Any]], env: dict[str, str] | None = None,
               frontend: str = "lab", settings: dict[str, dict[str, Any]] | None = None) -> Iterator[JupyterLab]:
    """A started :class:`JupyterLab` (``frontend``: ``"lab"`` or ``"notebook"``; ``settings``:
    user settings by plugin file, over :data:`SETTINGS`); skips (fails in CI) when JupyterLab,
    Notebook, playwright or Chromium is missing."""
    for module, hint in ((JupyterLab.APPS[frontend][0], "pip install 'sandbox-kernel[test]'"),
                         ("playwright", "pip install 'sandbox-kernel[test]'")):
        try:
            __import__(module)
        except ImportError:
            skip_or_fail(f"{module} is not installed ({hint})")
    if not os.access(CHROMIUM, os.X_OK):
        skip_or_fail(f"no Chromium at {CHROMIUM} (run `bash .ci/browser-setup.sh` as root)")
    lab = JupyterLab(kernelspecs, env, frontend, settings=settings)
    try:
        yield lab.start()
    finally:
        lab.stop()


def kernelspecs(allowed_origin: str) -> dict[str, dict[str, Any]]:
    """``sandbox-docker`` with the docker test set-up and ``allowed_origin`` as its one allowed
    image origin, its ``trust`` and ``isolate`` copies, and a ``python3`` whose argv carries the
    docker test set-up for the magic's backends."""
    from sandbox_kernel.frontdoors.kernel.kernelspec import kernel_json
    from tests.support.backends import prepared
    from tests.support.host import host_arguments

    setup = prepared("docker")
    options = [*setup.kernel_options, *(f"--DockerBackend.{k}={v}" for k, v in setup.traits.items())]
    specs = {"sandbox-docker": kernel_json("docker", [*options, f"--SandboxKernel.allowed_origins={allowed_origin}"])}
    for policy in ("trust", "isolate"):
        spec = kernel_json("docker", [*options, f"--SandboxKernel.output_policy={policy}"])
        specs[f"sandbox-docker-{policy}"] = {**spec, "display_name": f"{spec['display_name']} {policy}"}
    specs["python3"] = {"argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}",
                                 *host_arguments("docker")],
                        "display_name": "Python 3 (ipykernel)", "language": "python"}
    return specs

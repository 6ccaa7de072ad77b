"""JupyterHub with sandbox kernels, end to end: a real hub on 127.0.0.1 (tests/hub.py: LocalProcessSpawner,
PAM, npm's configurable-http-proxy), two real Linux users each with a rootless Podman engine of their
own, logged in through headless Chromium, set up as docs/how-to/jupyterhub.md says (kernelspecs installed by
root under umask 077, only sandbox kernels offered, no terminals, the administrator's lock).

One hub serves the module; each test logs its users in a browser context of their own. Servers cull
kernels idle for :data:`CULL_S` seconds, so a test keeps its pages open while it needs a kernel."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.browser import CHROMIUM, run_all, wait_finished
from tests.hub import (
    LOCK,
    LOCK_FILE,
    MANDATORY,
    USERS,
    Hub,
    as_user,
    install_kernelspecs,
    password,
    sandboxes,
    unavailable,
    user_engine,
    volumes,
    write_notebook,
)
from tests.plugin.locks import HUB_USERS
from tests.targets import skip_or_fail

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.timeout(900),
              pytest.mark.machine_lock(HUB_USERS, exclusive=True)]  # the rig's users and engines: one run at a time

ALICE, BOB = USERS
CULL_S = 40
ARGS = [*MANDATORY, f"--MappingKernelManager.cull_idle_timeout={CULL_S}", "--MappingKernelManager.cull_interval=5",
        "--LabApp.expose_app_in_browser=True"]  # the last one: tests/browser.py's run_all reads window.jupyterapp


@pytest.fixture(scope="module")
def hub():
    if (reason := unavailable()) is not None:
        skip_or_fail(reason)
    installed = install_kernelspecs()
    assert installed.returncode == 0, installed.stderr
    hub = Hub(args=ARGS).start()
    try:
        yield hub
    finally:
        hub.stop()


@pytest.fixture(scope="module")
def browser(hub):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield browser
        browser.close()


def login(browser, hub, user):
    """A browser context of ``user``, logged in (their server started); returns ``(context, page)``."""
    context = browser.new_context(viewport={"width": 1200, "height": 1200})
    page = context.new_page()
    page.set_default_timeout(60_000)  # a loaded machine: a page answered after 30 s
    page.goto(f"{hub.url}/hub/login")
    page.fill("#username_input", user)
    page.fill("#password_input", password(user))
    page.click("#login_submit")
    page.wait_for_url(f"**/user/{user}/lab**", timeout=180_000)
    return context, page


def open_notebook(page, hub, user, name):
    page.goto(f"{hub.url}/user/{user}/lab/workspaces/{name}/tree/{name}.ipynb?reset")


def run_notebook(context, hub, user, name, cells, kernel="sandbox-docker"):
    """Write ``~USER/NAME.ipynb``, open it in a new page of ``context``, run all its cells;
    returns ``(page, outputs as text)``."""
    write_notebook(user, name, cells, kernel)
    page = context.new_page()
    open_notebook(page, hub, user, name)
    run_all(page)
    wait_finished(page, timeout=180)
    return page, page.eval_on_selector_all(".jp-OutputArea-output", "els => els.map(e => e.innerText)")


def launcher(page, hub, user):
    page.goto(f"{hub.url}/user/{user}/lab?reset")
    page.wait_for_selector(".jp-LauncherCard")
    return page.eval_on_selector_all(".jp-LauncherCard[data-category='Notebook'] .jp-LauncherCard-label",
                                     "els => els.map(e => e.textContent)")


def eventually(check, timeout, what):
    deadline = time.monotonic() + timeout
    while not (result := check()):
        if time.monotonic() > deadline:
            pytest.fail(f"{what} within {timeout} s")
        time.sleep(1)
    return result


def test_kernelspecs_installed_by_root_under_umask_077_are_readable_by_each_user(hub):
    spec = Path(LOCK_FILE.parents[2], "share", "jupyter", "kernels", "sandbox-docker", "kernel.json")
    for user in USERS:
        read = as_user(user, "cat", str(spec), timeout=30)
        assert read.returncode == 0, read.stderr
        assert "--SandboxKernel.backend=docker" in json.loads(read.stdout)["argv"]


def test_each_user_is_offered_only_the_sandbox_kernels(hub, browser):
    """Not python3, nor a kernelspec the user wrote for their own Python."""
    mine = json.dumps({"argv": ["/usr/bin/python3", "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                       "display_name": "My host Python", "language": "python"})
    for user in USERS:
        folder = f"/home/{user}/.local/share/jupyter/kernels/mine"
        as_user(user, "sh", "-c", f'mkdir -p {folder} && cat > {folder}/kernel.json', input=mine, check=True,
                timeout=30)
        context, page = login(browser, hub, user)
        try:
            assert launcher(page, hub, user) == ["Python 3 (sandbox: docker)"]
            write_notebook(user, "plain", ["print(1)"], kernel="python3")  # a notebook made elsewhere, on python3
            open_notebook(page, hub, user, "plain")
            dialog = page.locator(".jp-Dialog")
            dialog.wait_for()
            assert dialog.locator("select").evaluate("s => s.options[s.selectedIndex].text") == \
                "Python 3 (sandbox: docker)"
            assert "Python 3 (ipykernel)" not in dialog.inner_text() and "My host Python" not in dialog.inner_text()
        finally:
            context.close()
            as_user(user, "rm", "-r", folder, timeout=30)


def test_each_user_runs_a_sandbox_in_their_own_engine_and_cannot_reach_the_others(hub, browser):
    probe = ["import os\nprint(os.getuid(), sorted(k for k in os.environ if k.startswith('JUPYTERHUB') "
             "or k == 'JPY_API_TOKEN'))",
             f"import urllib.request\ntry:\n    urllib.request.urlopen('{hub.url}/hub/api/user', timeout=5)\n"
             "    print('reached the hub')\nexcept OSError as e:\n    print('no hub:', type(e).__name__)"]
    contexts = []
    try:
        for user in USERS:
            context, _ = login(browser, hub, user)
            contexts.append(context)
            _, shown = run_notebook(context, hub, user, "probe", probe)
            uid = Path("/home", user).stat().st_uid
            assert shown == [f"{uid} []\n", "no hub: URLError\n"]  # the hub's token and network are out of reach
        alice, bob = (set(sandboxes(user)) for user in USERS)
        assert alice and bob and not alice & bob
        bob_pid = as_user(BOB, "podman", "inspect", "--format", "{{.State.Pid}}", *bob, timeout=60).stdout.split()[0]
        bob_socket = f"/run/user/{Path('/home', BOB).stat().st_uid}/podman/podman.sock"
        tries = {  # alice, on the host (a terminal, were terminals allowed)
            "bob's engine": ["curl", "-s", "--unix-socket", bob_socket, "http://d/_ping"],
            "signal bob's sandbox": ["kill", "-0", bob_pid],
            "enter bob's sandbox": ["nsenter", "-t", bob_pid, "-m", "true"],
            "bob's files": ["ls", f"/home/{BOB}"],
            "bob's sandbox's environment": ["cat", f"/proc/{bob_pid}/environ"]}
        for what, argv in tries.items():
            done = as_user(ALICE, *argv, timeout=30)
            assert done.returncode not in (0, 126, 127), f"alice reached {what} (or the tool is missing): " \
                                                         f"{done.returncode} {done.stdout} {done.stderr}"
        assert not set(as_user(ALICE, "podman", "ps", "-a", "--format", "{{.Names}}", timeout=60).stdout.split()) & bob
    finally:
        for context in contexts:
            context.close()


def test_a_locked_option_in_the_users_own_config_is_refused_in_the_notebook(hub, browser):
    config = Path("/home", ALICE, ".jupyter", "sandbox_kernel_config.json")
    as_user(ALICE, "mkdir", "-p", str(config.parent), check=True, timeout=30)
    as_user(ALICE, "sh", "-c", f"cat > {config}", input=json.dumps({"DockerBackend": {"network": "bridge"}}),
            check=True, timeout=30)
    context, _ = login(browser, hub, ALICE)
    try:
        _, shown = run_notebook(context, hub, ALICE, "loosened", ["print('ran')"])
        assert shown == [f"Locked: Refused by the administrator's lock ({LOCK_FILE}): DockerBackend.network must be "
                         "'none', not 'bridge'."]
    finally:
        context.close()
        config.unlink()


def test_idle_kernels_culled_by_the_server_take_their_sandboxes(hub, browser):
    """A notebook and a Voila page whose browser went without a word (no beforeunload beacon: a
    crash, a lost network): the server culls both kernels (docs/how-to/jupyterhub.md, section 6) and
    each sandbox goes with its kernel, its volume too."""
    context, page = login(browser, hub, BOB)
    before = set(sandboxes(BOB))
    _, shown = run_notebook(context, hub, BOB, "idle", ["print('working')"])
    assert shown == ["working\n"]
    write_notebook(BOB, "board", ["print('board ' + str(6 * 7))"])
    page.goto(f"{hub.url}/user/{BOB}/voila/render/board.ipynb", wait_until="commit")  # loads as it runs
    page.get_by_text("board 42").wait_for(timeout=120_000)
    mine = set(sandboxes(BOB)) - before
    assert len(mine) == 2
    context.close()  # the pages go, without a beacon: nothing is connected to the kernels any more
    eventually(lambda: not any(k for k in hub.kernels(BOB)), CULL_S + 60, "the server did not cull the idle kernels")
    eventually(lambda: not mine & set(sandboxes(BOB)), 30, f"the culled kernels' sandboxes {mine} stayed")
    assert not {f"{name}-work" for name in mine} & set(volumes(BOB))


def test_a_user_whose_engine_is_down_is_told_who_starts_it(hub, browser):
    """Not `sudo systemctl start docker`: the user has no sudo, and the engine is their own."""
    context, _ = login(browser, hub, ALICE)
    stopped = user_engine("stop", ALICE)
    try:
        assert stopped.returncode == 0, stopped.stderr
        _, shown = run_notebook(context, hub, ALICE, "down", ["print('ran')"])
        uid = Path("/home", ALICE).stat().st_uid
        assert len(shown) == 1 and shown[0].startswith(
            f"BackendUnavailable: Your own engine (rootless Podman, at unix:///run/user/{uid}/podman/podman.sock) is "
            "not answering. Fix: this engine is not the machine's Docker engine: on a shared machine (JupyterHub) the "
            f"administrator starts it (`sandbox-kernel user-engine start {ALICE}`"), shown
        assert "sudo" not in shown[0]
    finally:
        context.close()
        started = user_engine("start", ALICE)
        assert started.returncode == 0, started.stderr


def test_closing_a_voila_page_ends_its_sandbox(hub, browser):
    context, page = login(browser, hub, ALICE)
    write_notebook(ALICE, "dashboard", ["print('dashboard ' + str(6 * 7))"])
    before = set(sandboxes(ALICE))
    page.goto(f"{hub.url}/user/{ALICE}/voila/render/dashboard.ipynb", wait_until="commit")  # loads as it runs
    page.get_by_text("dashboard 42").wait_for(timeout=120_000)
    [mine] = set(sandboxes(ALICE)) - before
    page.close(run_before_unload=True)  # a tab closed by its user: Voila's beforeunload beacon
    eventually(lambda: mine not in sandboxes(ALICE), 60, f"the Voila page's sandbox {mine} stayed")
    context.close()


def test_the_per_user_sandbox_quota_says_so_when_reached(hub, browser):
    LOCK_FILE.write_text(json.dumps({**LOCK, "per_user": {"sandboxes": 1}}))
    context, _ = login(browser, hub, ALICE)
    try:
        _, first = run_notebook(context, hub, ALICE, "first", ["print('one')"])
        assert first == ["one\n"]
        _, second = run_notebook(context, hub, ALICE, "second", ["print('two')"])
        assert second == ["QuotaReached: You already run 1 sandbox, the most your administrator allows per user "
                          f"(per_user in {LOCK_FILE}): shut down the kernel of a notebook you no longer use (Kernel > "
                          "Shut Down Kernel), then run the cell again."]
    finally:
        LOCK_FILE.write_text(json.dumps(LOCK))
        context.close()


def test_a_users_engine_that_holds_the_image_starts_without_the_machines_engine(hub):
    """The copy is skipped, and said so, where the machine's engine is gone but the user's engine
    holds the image already: the user is served."""
    gone = "unix:///nonexistent/docker.sock"
    started = user_engine("start", BOB, DOCKER_HOST=gone)
    uid = Path("/home", BOB).stat().st_uid
    assert started.returncode == 0, started.stderr
    assert started.stdout.strip() == f"DOCKER_HOST=unix:///run/user/{uid}/podman/podman.sock"
    assert (f"{BOB}'s engine keeps its image sandbox-kernel:latest" in started.stderr
            and f"The Docker engine is not answering at {gone}" in started.stderr), started.stderr


def test_a_spawn_that_cannot_give_the_user_the_sandbox_image_says_why(hub, browser):
    """The hook copies the sandbox image from this machine's engine (docs/how-to/jupyterhub.md, section
    1). A second hub whose machine engine is gone and whose image no user's engine holds: the
    user's spawn page names the copy and the fix (it said "Spawn failed", the reason in the hub's
    log only)."""
    absent, gone = "sandbox-kernel:hub-test-absent", "unix:///nonexistent/docker.sock"
    broken = Hub(args=ARGS, lock=None, image=absent, env={"DOCKER_HOST": gone}).start()
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(f"{broken.url}/hub/login")
        page.fill("#username_input", ALICE)
        page.fill("#password_input", password(ALICE))
        page.click("#login_submit")
        page.get_by_text("could not be prepared").first.wait_for(timeout=120_000)
        text = page.inner_text("body")
        assert (f"The engine of your sandboxes could not be prepared. Could not give {ALICE}'s engine the sandbox "
                f"image {absent}, which is copied from this machine's Docker engine (docs/how-to/jupyterhub.md, section 1): "
                f"The Docker engine is not answering at {gone}.") in text, text
    finally:
        context.close()
        broken.stop()

"""The wrapper kernel through jupyter_client, started from the installed kernelspec as a
frontend starts it: the messages a notebook sees."""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import time

import pytest

from tests.kernels import JEDI_PARSED, interrupted_loop, kernel, kinds, run, stdout

pytestmark = pytest.mark.kernel


@pytest.fixture(scope="module")
def local_kernel():
    with kernel("local") as (km, kc):
        yield km, kc


def test_kernel_info_names_the_sandbox(local_kernel):
    _, kc = local_kernel
    info = kc.kernel_info(reply=True)["content"]
    assert info["implementation"] == "sandbox_kernel"
    assert info["language_info"]["name"] == "python"
    assert "local sandbox" in info["banner"]


def test_state_stdout_and_execute_result(local_kernel):
    _, kc = local_kernel
    reply, _ = run(kc, "answer = 41")
    reply, outputs = run(kc, "print('hi')\nanswer + 1")
    assert reply["status"] == "ok"
    assert stdout(outputs) == "hi\n"
    [result] = [m for m in outputs if m["header"]["msg_type"] == "execute_result"]
    assert result["content"]["data"]["text/plain"] == "42"
    assert result["content"]["execution_count"] == reply["execution_count"]


def test_stream_is_live(local_kernel):
    _, kc = local_kernel
    _, outputs = run(kc, "import time\nfor i in range(3):\n    print(i, flush=True)\n    time.sleep(0.6)")
    times = [m["t"] for m in outputs if m["header"]["msg_type"] == "stream"]
    assert len(times) == 3 and times[-1] - times[0] > 1.0


def test_error_reply_and_traceback(local_kernel):
    _, kc = local_kernel
    reply, outputs = run(kc, "def f():\n    raise ValueError('bad value')\nf()")
    assert reply["status"] == "error" and reply["ename"] == "ValueError"
    [error] = [m for m in outputs if m["header"]["msg_type"] == "error"]
    assert any("bad value" in line for line in error["content"]["traceback"])
    assert run(kc, "1 + 1")[0]["status"] == "ok"


def test_display_kinds_and_matplotlib(local_kernel):
    _, kc = local_kernel
    _, outputs = run(kc, "from IPython.display import display, HTML\ndisplay(HTML('<i>x</i>'))\n"
                         "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()")
    bundles = [m["content"]["data"] for m in outputs if m["header"]["msg_type"] == "display_data"]
    assert {"text/html"} <= set(bundles[0]) and "image/png" in bundles[1]


@pytest.mark.parametrize("name", ["local", "docker", "gateway"])
def test_interrupt_button_stops_busy_loop_and_state_survives(name):
    with kernel(name) as (km, kc):
        run(kc, "survivor = 'alive'")
        reply, took = interrupted_loop(km, kc)
        assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt"
        assert took < 2.0  # under 2 s from the button to the stop
        _, outputs = run(kc, "survivor")
        assert outputs[-2]["content"]["data"]["text/plain"] == "'alive'"


def test_a_shutdown_request_ends_the_kernel_process_by_itself():
    """The wrapper exits on its own after ``shutdown_request``, as JupyterLab's shutdown and
    restart ask. Its control thread used to flush stdout after the IOPub thread had stopped and
    wait out ipykernel's 10 s flush timeout, about one shutdown in two; four rounds catch that."""
    for _ in range(4):
        with kernel("local") as (km, kc):
            run(kc, "x = 1")
            km.request_shutdown()
            assert km.provisioner.process.wait(timeout=5) == 0


def test_completion_inspection_is_complete(local_kernel):
    _, kc = local_kernel
    run(kc, "only_in_sandbox = [1, 2]")
    matches = kc.complete("only_in_s", 9, reply=True)["content"]["matches"]
    assert "only_in_sandbox" in matches
    found = kc.inspect("only_in_sandbox", 15, reply=True)["content"]
    assert found["found"] and "list" in found["data"]["text/plain"]
    kc.is_complete("if True:")
    assert kc.get_shell_msg(timeout=10)["content"]["status"] == "incomplete"


def test_input_and_getpass_prompt_the_notebook_user(local_kernel):
    _, kc = local_kernel
    prompts = []

    def answer(msg):
        prompts.append(msg["content"])
        kc.input("hunter2" if msg["content"]["password"] else "Grace")

    reply, outputs = run(kc, "import getpass\nwho = input('who? ')\npw = getpass.getpass()\nprint(who, pw)",
                         allow_stdin=True, stdin_hook=answer)
    assert reply["status"] == "ok"
    assert [p["password"] for p in prompts] == [False, True] and prompts[0]["prompt"] == "who? "
    assert stdout(outputs) == "Grace hunter2\n"


def test_sandbox_environment_is_an_allowlist_in_a_scratch_dir(monkeypatch):
    with kernel("local", CANARY_SECRET="do-not-leak", FORWARDED="yes") as (_, kc):
        _, outputs = run(kc, "import os\nprint(os.environ.get('CANARY_SECRET'), os.getcwd(), os.environ['HOME'])")
        canary, cwd, home = stdout(outputs).split()
    assert canary == "None"
    assert os.path.basename(cwd).startswith("sandbox-local-") and home.startswith(cwd)
    assert not os.path.exists(cwd), "the scratch directory must be deleted at shutdown"


def test_env_vars_option_forwards_named_variables():
    with kernel("local", "--LocalBackend.env_vars=FORWARDED", FORWARDED="yes", OTHER="no") as (_, kc):
        _, outputs = run(kc, "import os\nprint(os.environ.get('FORWARDED'), os.environ.get('OTHER'))")
    assert stdout(outputs) == "yes None\n"


def test_sandbox_death_is_one_message_and_next_cell_is_fresh():
    """Without a checkpoint (none is taken automatically here: tests/test_checkpoints.py has the
    recovery from one)."""
    with kernel("local", "--LocalBackend.cpu_time_limit=1", "--LocalBackend.checkpoint_min_seconds=-1") as (_, kc):
        run(kc, "kept = 1")
        reply, outputs = run(kc, "while True: pass", timeout=30)
        assert reply["status"] == "error" and reply["ename"] == "SandboxDied"
        assert "CPU time limit (1 s)" in reply["evalue"] and "state is lost" in reply["evalue"]
        assert kinds(outputs) == ["error"]
        reply, outputs = run(kc, "'kept' in globals()")
        assert reply["status"] == "ok" and outputs[-2]["content"]["data"]["text/plain"] == "False"


def test_memory_limit_raises_memory_error_in_the_sandbox():
    with kernel("local", "--LocalBackend.memory_limit=1g") as (_, kc):
        reply, _ = run(kc, "block = bytearray(2 * 1024**3)")
        assert reply["status"] == "error" and reply["ename"] == "MemoryError"
        assert run(kc, "small = bytearray(10 * 1024**2)")[0]["status"] == "ok"


@pytest.fixture(scope="module")
def budget_kernel():
    """One local kernel whose cells may show 100 KiB (the option's logic: test_frontdoors_scripted.py)."""
    with kernel("local", "--SandboxKernel.max_output_bytes=100k") as (km, kc):
        yield km, kc


def test_output_is_cut_at_the_limit_with_a_marker(budget_kernel):
    _, kc = budget_kernel
    reply, outputs = run(kc, "for i in range(20000):\n    print('x' * 99)")
    assert reply["status"] == "ok"
    shown = stdout(outputs)
    assert len(shown.encode()) <= 100 * 1024
    markers = stdout(outputs, "stderr")
    assert "output limit of 100 KiB reached" in markers and "1.81 MiB of output dropped" in markers
    assert shown.startswith("x" * 99 + "\n") and len(shown.encode()) > 90 * 1024


def test_output_between_cells_is_cut_at_the_limit_until_the_next_cell(budget_kernel):
    """A sandbox thread that keeps printing after its cell ended cannot flood the page: what
    arrives outside any cell has its own max_output_bytes, renewed when a cell runs."""
    _, kc = budget_kernel
    flood = ("import threading, time\n"
             "def flood(tag):\n    time.sleep(0.5)\n    for i in range(200):\n        print(tag * 4999, flush=True)\n"
             "threading.Thread(target=flood, args=({tag!r},)).start()")
    for tag in "xy":  # the second round shows the budget was renewed by the cell
        reply, outputs = run(kc, flood.format(tag=tag))
        assert reply["status"] == "ok" and stdout(outputs) == ""
        later = []
        with contextlib.suppress(queue.Empty):  # until the thread is done (3 s of quiet)
            while True:
                later.append(kc.get_iopub_msg(timeout=3))
        shown = stdout(later)  # 1 MB in 200 messages (fewer than IOPub's high-water mark, which
        # would drop messages of a faster flood before the budget sees them)
        assert shown.startswith(tag * 4999 + "\n") and 90 * 1024 < len(shown.encode()) <= 100 * 1024
        assert stdout(later, "stderr") == ("\n[output limit of 100 KiB reached: further output from outside a "
                                           "cell (a sandbox thread's) before the next cell is dropped]\n")
    assert stdout(run(kc, "print('next')")[1]) == "next\n"


def test_bad_configuration_is_one_short_message_and_kernel_keeps_answering():
    """Through a real kernel process, one case (every kind of bad option, and an unknown backend:
    test_frontdoors_scripted.py): the process starts, each cell says it, kernel_info answers."""
    with kernel("local", "--LocalBackend.memory_limt=2g") as (_, kc):
        reply, outputs = run(kc, "1 + 1")
        assert reply["status"] == "error" and ("unknown option --LocalBackend.memory_limt; did you mean "
                                               "--LocalBackend.memory_limit?") in reply["evalue"]
        [error] = [m for m in outputs if m["header"]["msg_type"] == "error"]
        assert len(error["content"]["traceback"]) == 1
        assert kc.kernel_info(reply=True)["content"]["status"] == "ok"


def test_options_from_a_jupyter_config_file_and_an_ipython_profile_for_other_programs(tmp_path):
    """The kernel reads sandbox_kernel_config.py (here its cell_timeout, which interrupts a cell
    with one short message and keeps the state), and the profile's ipython_config.py too, whose
    options of other programs (TerminalInteractiveShell, ...) are not reported as unknown."""
    (tmp_path / "sandbox_kernel_config.py").write_text("c.SandboxKernel.cell_timeout = 1.5\n")
    profile = tmp_path / "ipython" / "profile_default"
    profile.mkdir(parents=True)
    (profile / "ipython_config.py").write_text("c.TerminalInteractiveShell.confirm_exit = False\n"
                                              "c.TerminalIPythonApp.display_banner = False\n")
    with kernel("local", JUPYTER_CONFIG_DIR=str(tmp_path), IPYTHONDIR=str(tmp_path / "ipython")) as (_, kc):
        reply, _ = run(kc, "kept = 5")
        assert reply["status"] == "ok", reply
        reply, outputs = run(kc, "import time\ntime.sleep(20)", timeout=20)
        assert reply["ename"] == "ExecutionTimeout" and "longer than 1.5 s" in reply["evalue"]
        [error] = [m for m in outputs if m["header"]["msg_type"] == "error"]
        assert len(error["content"]["traceback"]) == 1  # one short message, not our internals
        assert run(kc, "kept")[1][-2]["content"]["data"]["text/plain"] == "5"


def test_the_first_kernel_info_reply_offers_the_sandbox_debugger_and_shows_no_output():
    """What a frontend gets when it connects: the reply lists ``debugger`` because the backend
    relays the sandbox kernel's (never this wrapper's, which ipykernel would offer whenever
    debugpy imports) and ``kernel subshells``, and the request shows nothing (debugpy's "frozen
    modules" warning once came as its stream)."""
    from jupyter_client.manager import KernelManager

    km = KernelManager(kernel_name="sandbox-local")
    km.start_kernel()
    kc = km.client()
    kc.start_channels()
    try:
        while kc.get_iopub_msg(timeout=60)["msg_type"] != "iopub_welcome":  # subscribed (JEP 65)
            pass
        reply = kc.kernel_info(reply=True, timeout=60)
        shown = []
        while True:
            msg = kc.get_iopub_msg(timeout=10)
            if msg["parent_header"].get("msg_id") != reply["parent_header"]["msg_id"]:
                continue
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                break
            if msg["msg_type"] != "status":
                shown.append(msg)
    finally:
        kc.stop_channels()
        km.shutdown_kernel()
    assert reply["content"]["supported_features"] == ["kernel subshells", "debugger"]
    assert "debugpy" not in reply["content"]["banner"]
    assert shown == []


def test_local_sandbox_starts_with_the_kernel_then_first_cell_and_first_tab_are_warm(tmp_path):
    """``start_sandbox_at_launch`` left to the backend: local starts at launch (its sandbox boots
    on another core while the wrapper answers the frontend), and the first Tab finds jedi's cache
    built (its first completion costs 1.3-1.7 s in an empty cache, past JupyterLab's 1 s). The
    local sandboxes of a user share that cache: the first one ever warms it up (a completion
    before anyone pressed Tab); every later one reads it, and spends nothing on a warm-up beside
    its first cell (where it made the first result 2.2x a plain kernel's)."""
    cache = tmp_path / "cache"  # this test's own: cold, as on a new machine
    with kernel("local", XDG_CACHE_HOME=str(cache)) as (_, kc):
        banner_deadline = time.monotonic() + 20
        while "sandbox_id=" not in kc.kernel_info(reply=True)["content"]["banner"]:
            assert time.monotonic() < banner_deadline, "the sandbox did not start with the kernel"
            time.sleep(0.2)
        assert run(kc, "1 + 1")[0]["status"] == "ok"
        warm_deadline = time.monotonic() + 30
        while stdout(run(kc, JEDI_PARSED)[1]) == "0\n":
            assert time.monotonic() < warm_deadline, "the sandbox's completer was never warmed"
            time.sleep(0.5)
        assert "zip" in kc.complete("zi", 2, reply=True, timeout=30)["content"]["matches"]  # after the warm-up
        published = cache / "sandbox-kernel" / "jedi-caches"
        while not any(published.glob("[!.]*/*/*.pkl")):  # published in a thread after the warm-up's reply
            assert time.monotonic() < warm_deadline, "the warm-up published no cache for the next sandbox"
            time.sleep(0.2)
    built = {path: path.stat().st_mtime_ns for path in published.glob("[!.]*/*/*.pkl")}
    with kernel("local", XDG_CACHE_HOME=str(cache)) as (_, kc):
        assert run(kc, "1 + 1")[0]["status"] == "ok"
        time.sleep(2)  # a warm-up would have parsed typeshed's builtins by now
        assert stdout(run(kc, JEDI_PARSED)[1]) == "0\n", "a sandbox warmed up a completer whose cache was built"
        assert "zip" in kc.complete("zi", 2, reply=True, timeout=30)["content"]["matches"]
        assert stdout(run(kc, JEDI_PARSED)[1]) != "0\n"
    # the first Tab read the builtins from its copy of the cache: nothing parsed again, nothing published written over
    assert {path: path.stat().st_mtime_ns for path in published.glob("[!.]*/*/*.pkl")} == built


def test_a_sandbox_that_damaged_its_jedi_cache_leaves_the_next_sandboxes_completing(tmp_path):
    """parso writes jedi's cache files in place: a kernel killed while writing one leaves it
    truncated, and jedi then fails every completion that reads it (EOFError, jedi#2067). While
    the local sandboxes shared one cache folder, one such kill left every later sandbox of the
    user completing nothing. Each sandbox now has a copy of the published cache: a damaged file
    in it (here truncated by the sandbox itself, as the kill would) dies with its sandbox."""
    cache = tmp_path / "cache"
    with kernel("local", XDG_CACHE_HOME=str(cache)) as (_, kc):  # warms up and publishes the cache
        deadline = time.monotonic() + 60
        while not any((cache / "sandbox-kernel" / "jedi-caches").glob("[!.]*/*/*.pkl")):
            assert time.monotonic() < deadline, "the warm-up published no cache"
            time.sleep(0.2)
    damage = ("import glob, os\nfiles = sorted(glob.glob(os.path.expanduser('~/.cache/jedi/*/*.pkl')))\n"
              "for path in files:\n    open(path, 'r+b').truncate(100)\nprint(len(files))")
    with kernel("local", XDG_CACHE_HOME=str(cache)) as (km, kc):
        assert int(stdout(run(kc, damage)[1])) > 0  # its copy of the cache, damaged
        os.kill(km.provisioner.process.pid, signal.SIGKILL)  # killed: its folders stay until the next start's sweep
        km.provisioner.process.wait(30)
    with kernel("local", XDG_CACHE_HOME=str(cache)) as (_, kc):
        run(kc, "only_in_sandbox = [1, 2]")
        assert kc.complete("only_in_s", 9, reply=True, timeout=30)["content"]["matches"] == ["only_in_sandbox"]


async def test_a_local_start_cancelled_while_its_completer_cache_is_copied_leaves_no_kernel(monkeypatch):
    """The copy of the completer cache runs after the kernel's spawn (beside its boot): a start
    cancelled there ends the kernel it spawned, as one cancelled later does."""
    import asyncio
    import threading

    from sandbox_kernel.backends.local import LocalBackend, pooled

    copying, release = threading.Event(), threading.Event()

    def slow_copy(home, python):
        copying.set()
        release.wait(30)

    monkeypatch.setattr(pooled, "seed_completer", slow_copy)
    backend = LocalBackend(checkpoints=False)
    start = asyncio.ensure_future(backend.start())
    try:
        assert await asyncio.to_thread(copying.wait, 60), "the start never copied the cache"
        process, scratch = backend._proc, backend._scratch
        assert process is not None and process.poll() is None
        start.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await start
        assert process.poll() is not None and not scratch.exists()
    finally:
        release.set()
        await backend.shutdown()

"""The ``%%sandbox`` magic's notebook scenario and the tests of it that every rig runs.

One notebook per backend (:data:`SCENARIO`) is executed once with nbclient, as nbval and CI run
notebooks, in a real ``python3`` (ipykernel) host kernel; each test checks the outputs of its
cells. Timing, interrupts and ``input()`` drive the host kernel directly with jupyter_client.
The tests here are collected by the modules that import them: ``tests/test_magic.py`` (every
backend) and ``tests/test_docker_remote_magic.py`` (the remote-engine rig); each module's
``backend_name`` fixture says which backends. Their fixtures ``cells`` and ``replies`` are the
test plugin's (tests/plugin/magic.py).
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from tests.kernels import run, stdout
from tests.support.backends import prepared
from tests.support.capabilities import lacks, shown
from tests.support.host import host_arguments, host_kernel
from tests.targets import backend_of, env_vars

ANSI = re.compile(r"\x1b\[[0-9;]*m")


SCENARIO = {
    "load": "%load_ext magics",
    "state": "%%sandbox --backend {backend}\nx = 41\nsecret = 'sandbox only'",
    "result": "%%sandbox\nx + 1",
    "other": "%%sandbox --backend {backend} --name other\n'x' in globals()",
    "host": "print('x' in globals(), 'secret' in globals())",
    "help": "%%sandbox\nzip?",
    "pager": "%%sandbox\n%prun -s cumulative sum(range(1000))",
    "streams": "%%sandbox\nimport sys\nprint('to stdout')\nprint('to stderr', file=sys.stderr)",
    "display": ("%%sandbox\nfrom IPython.display import display\n"
                "display({'application/json': {'a': 1}, 'application/x-custom+json': {'a': 1}, 'text/plain': 'custom'},\n"
                "        raw=True, metadata={'application/json': {'expanded': True, 'onload': 1}})"),
    "matplotlib": "%%sandbox\nimport matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()",
    "clear": ("%%sandbox\nfrom IPython.display import clear_output\nprint('gone')\nclear_output()\n"
              "print('kept')"),
    "update": "%%sandbox\nfrom IPython.display import display\nh = display('first', display_id=True)\nh.update('second')",
    "update_later": "%%sandbox\nh.update('third')",
    "error": "%%sandbox\ndef f():\n    return 1 / 0\nf()",
    "after_error": "%%sandbox\nx",
    "timeout": "%%sandbox --timeout 1\nimport time\ntime.sleep(60)",
    "after_timeout": "%%sandbox\nx",
    "list": "%sandbox list",
    "status": "%sandbox status default",
    "upload_file": "open('up.txt', 'w').write('from the host')",
    "upload": "%sandbox upload up.txt",
    "in_sandbox": "%%sandbox\nprint(open('up.txt').read())\nopen('down.txt', 'w').write('from the sandbox')",
    "download": "%sandbox download down.txt",
    "downloaded": "print(open('down.txt').read())",
    "options_existing": "%%sandbox --request-timeout 30\n'still here'",
    "bad_option": "%%sandbox --name fresh --no-such-option 1\n1",
    "bad_backend": "%%sandbox --backend no-such-backend --name fresh\n1",
    "bad_command": "%sandbox frobnicate",
    "typo_existing": "%%sandbox --memry-limit 1g\n1",
    "typo_suggested": "%%sandbox --request-timout 30\n1",
    "other_backend": "%%sandbox --backend no-such-backend\n1",
    "bad_session": "%sandbox status nobody",
    "restart": "%sandbox restart default",
    "after_restart": "%%sandbox\n'x' in globals()",
    "stop": "%sandbox stop other",
    "list_after_stop": "%sandbox list",
    "hostile": ("%%sandbox\nfrom IPython.display import display, HTML, Javascript, Markdown\n"
                "display(HTML('<img src=x onerror=\"alert(1)\"><b>kept</b>'))\ndisplay(Javascript('alert(1)'))\n"
                "display(Markdown('![leak](https://x.example/leak) *kept*'))"),
    "isolated": ("%%sandbox --output-policy isolate\nfrom IPython.display import HTML\n"
                 "HTML('<canvas id=c></canvas><script>draw()</script>')"),
    "trusted": "%%sandbox --output-policy trust\nfrom IPython.display import HTML\nHTML('<script>draw()</script>')",
    "bad_policy": "%%sandbox --output-policy off\n1",
    "stop_all": "%sandbox stop --all",
}


def scenario(backend_name: str, folder: Path) -> tuple[dict, dict]:
    """``(cells, replies)`` by key: each cell of :data:`SCENARIO` after an nbclient run in
    ``folder`` (the notebook's folder). The ``cells`` and ``replies`` fixtures of the test plugin
    (tests/plugin/magic.py) run it once per backend and session."""
    keys = list(SCENARIO)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(SCENARIO[k].replace("{backend}", backend_of(backend_name)))
                                         for k in keys])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    replies: dict[int, dict] = {}
    client = NotebookClient(nb, kernel_name="python3", allow_errors=True, timeout=120,
                            extra_arguments=host_arguments(backend_name),
                            resources={"metadata": {"path": str(folder)}},
                            on_cell_executed=lambda cell, cell_index, execute_reply: replies.update(
                                {cell_index: execute_reply["content"]}))
    with env_vars(prepared(backend_name).kernel_env):
        client.execute()
    return {k: nb.cells[i] for i, k in enumerate(keys)}, {k: replies.get(i, {}) for i, k in enumerate(keys)}


def text(cell, name: str = "stdout") -> str:
    return "".join(o["text"] for o in cell.outputs if o["output_type"] == "stream" and o["name"] == name)


def bundles(cell, kind: str = "display_data") -> list[dict]:
    return [o["data"] for o in cell.outputs if o["output_type"] == kind]


def plain(cell) -> str:
    return "".join(b.get("text/plain", "") for b in bundles(cell, "execute_result"))


def usage_line(cell) -> str:
    """The one-line UsageError IPython prints to stderr."""
    lines = text(cell, "stderr").strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("UsageError: "), lines
    return lines[0]


def test_state_persists_per_session_and_host_is_untouched(cells, replies):
    assert all(reply.get("status") == "ok" for key, reply in replies.items() if key in ("load", "state", "result"))
    assert plain(cells["result"]) == "42"
    assert plain(cells["other"]) == "False"
    assert text(cells["host"]) == "False False\n"


def test_help_and_the_pager_show_as_in_the_host(replies, backend_name):
    """``zip?`` and ``%prun`` in the sandbox page their text: the host kernel makes it its own
    ``page`` payload, which the notebook shows under the cell (as on python3)."""
    pages = {key: [p["data"]["text/plain"] for p in replies[key].get("payload", []) if p["source"] == "page"]
             for key in ("help", "pager")}
    if lacks(backend_name, "payloads"):  # e2b's /execute returns no payloads: nothing to page
        assert pages == {"help": [], "pager": []}
        return
    assert "zip(*iterables" in ANSI.sub("", pages["help"][0])
    assert "function calls" in pages["pager"][0]


def test_streams_reach_the_cell(cells):
    assert text(cells["streams"]) == "to stdout\n"
    assert text(cells["streams"], "stderr") == "to stderr\n"


def test_matplotlib_figure_is_a_png(cells):
    [bundle] = bundles(cells["matplotlib"])
    assert bundle["image/png"] and "text/plain" in bundle


def test_clear_output_and_display_updates(cells, backend_name):
    assert cells["update_later"].outputs == []
    [updated] = bundles(cells["update"])
    if lacks(backend_name, "display_updates"):  # fallback: the first display shows, updates and clears do not
        assert text(cells["clear"]) == "gone\nkept\n"
        assert updated["text/plain"] == shown("first", backend_name)
        return
    assert text(cells["clear"]) == "kept\n"
    assert updated["text/plain"] == "'third'"  # updated in place, also from a later cell


def test_error_fails_the_cell_with_the_sandbox_traceback(cells, replies):
    reply = replies["error"]
    assert reply["status"] == "error" and reply["ename"] == "ZeroDivisionError"
    [error] = [o for o in cells["error"].outputs if o["output_type"] == "error"]
    assert error["ename"] == "ZeroDivisionError" and error["evalue"] == "division by zero"
    tb = ANSI.sub("", "\n".join(error["traceback"]))
    assert "return 1 / 0" in tb and "f()" in tb
    assert "magics" not in tb and "run_cell_magic" not in tb  # nothing of the host or our internals
    assert plain(cells["after_error"]) == "41"


def test_timeout_gives_one_short_message_and_keeps_state(cells, replies):
    assert replies["timeout"]["status"] == "error"
    [error] = [o for o in cells["timeout"].outputs if o["output_type"] == "error"]
    assert error["ename"] == "ExecutionTimeout" and "longer than 1 s" in error["evalue"]
    assert len(error["traceback"]) == 1
    assert plain(cells["after_timeout"]) == "41"


def test_list_and_status(cells, backend_name):
    listing = plain(cells["list"])
    assert re.search(rf"default\s+{backend_of(backend_name)}\s+running", listing)
    assert re.search(rf"other\s+{backend_of(backend_name)}\s+running", listing)
    status = plain(cells["status"])
    for label in ("backend", "sandbox id", "uptime", "limits"):
        assert re.search(rf"^{label}\s+\S", status, re.M), (label, status)
    assert "<table>" in bundles(cells["status"], "execute_result")[0]["text/html"]


def test_upload_and_download(cells):
    assert text(cells["upload"]) == "Uploaded up.txt to up.txt in session 'default'.\n"
    assert text(cells["in_sandbox"]) == "from the host\n"
    assert "Downloaded down.txt" in text(cells["download"])
    assert text(cells["downloaded"]) == "from the sandbox\n"


def test_restart_and_stop(cells, backend_name):
    assert "Restarted session 'default'" in text(cells["restart"])
    assert plain(cells["after_restart"]) == "False"
    assert text(cells["stop"]) == f"Stopped session 'other' ({backend_of(backend_name)}).\n"
    assert "other" not in plain(cells["list_after_stop"])
    assert "Stopped session 'default'" in text(cells["stop_all"])


def test_stdout_is_live(backend_name):
    with host_kernel(backend_name) as (_, kc):
        run(kc, f"%%sandbox --backend {backend_of(backend_name)}\nimport time")
        reply, outputs = run(kc, "%%sandbox\nfor i in range(3):\n    print(i, flush=True)\n    time.sleep(0.8)")
    assert reply["status"] == "ok" and stdout(outputs) == "0\n1\n2\n"
    times = [m["t"] for m in outputs if m["header"]["msg_type"] == "stream"]
    assert len(times) == 3 and times[-1] - times[0] > 1.2


def test_interrupt_reaches_the_sandbox_and_the_session_survives(backend_name):
    with host_kernel(backend_name) as (km, kc):
        run(kc, f"%%sandbox --backend {backend_of(backend_name)}\nx = 41")
        msg_id = kc.execute("%%sandbox\nprint('spinning', flush=True)\nwhile True:\n    pass", stop_on_error=False)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # wait until the loop runs in the sandbox
            msg = kc.get_iopub_msg(timeout=60)
            if msg["parent_header"].get("msg_id") == msg_id and msg["header"]["msg_type"] == "stream":
                break
        time.sleep(0.5)
        km.interrupt_kernel()
        reply = kc.get_shell_msg(timeout=30)["content"]
        assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt"
        reply, outputs = run(kc, "%%sandbox\nx + 1")
        assert reply["status"] == "ok"
        [result] = [m for m in outputs if m["header"]["msg_type"] == "execute_result"]
        assert result["content"]["data"]["text/plain"] == "42"


def test_input_reaches_the_notebook_user(backend_name):
    prompts = []
    with host_kernel(backend_name) as (_, kc):

        def answer(msg):
            prompts.append((msg["content"]["prompt"], msg["content"]["password"]))
            kc.input("Ada" if not msg["content"]["password"] else "s3cret")

        code = (f"%%sandbox --backend {backend_of(backend_name)}\nimport getpass\nname = input('Name? ')\n"
                "word = getpass.getpass('Password? ')\nprint('hello', name, len(word))")
        reply, outputs = run(kc, code, allow_stdin=True, stdin_hook=answer, stop_on_error=False)
        if lacks(backend_name, "stdin"):  # fallback: input() raises in the sandbox, nobody is asked
            assert reply["ename"] == "StdinNotImplementedError" and prompts == []
            return
        assert reply["status"] == "ok", reply
        assert prompts == [("Name? ", False), ("Password? ", True)]
        assert "hello Ada 6" in stdout(outputs)
        # a frontend without stdin: the sandbox's input() raises, as in a plain kernel
        reply, _ = run(kc, "%%sandbox\ninput()", allow_stdin=False)
        assert reply["status"] == "error" and reply["ename"] == "StdinNotImplementedError"

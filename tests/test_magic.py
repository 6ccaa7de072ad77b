"""The ``%%sandbox`` magic inside a real ``python3`` (ipykernel) host kernel.

Notebook-level behaviour runs through nbclient, as nbval and CI run notebooks: one notebook
per backend (``SCENARIO`` of ``tests/support/magic.py``, with the tests every rig runs, collected
here) executed once, each test checking the outputs of its cells. Timing, interrupts and
``input()`` drive the host kernel directly with jupyter_client.
The host kernel gets a backend's test set-up as ``--Class.trait=value`` config on its argv
(the magic's backends are children of ``SandboxMagics``, so host config reaches them) and
``prepared(name).kernel_env`` in its environment.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from sandbox_kernel.backends import get_backend_class
from tests.kernels import run
from tests.support.capabilities import lacks, shown  # what a backend cannot do and its fallback; a str result
from tests.support.host import host_kernel
from tests.support.magic import (  # noqa: F401 - the scenario's tests, collected here
    bundles,
    plain,
    test_clear_output_and_display_updates,
    test_error_fails_the_cell_with_the_sandbox_traceback,
    test_help_and_the_pager_show_as_in_the_host,
    test_input_reaches_the_notebook_user,
    test_interrupt_reaches_the_sandbox_and_the_session_survives,
    test_list_and_status,
    test_matplotlib_figure_is_a_png,
    test_restart_and_stop,
    test_state_persists_per_session_and_host_is_untouched,
    test_stdout_is_live,
    test_streams_reach_the_cell,
    test_timeout_gives_one_short_message_and_keeps_state,
    test_upload_and_download,
    text,
    usage_line,
)
from tests.targets import backend_of

pytestmark = pytest.mark.kernel

# -- the notebook scenario (tests/support/magic.py): what only this module checks -----------------


def test_known_mime_types_keep_their_metadata_and_unknown_ones_are_dropped_with_a_note(cells, backend_name):
    [output] = [o for o in cells["display"].outputs if o["output_type"] == "display_data"]
    assert output["data"] == {"application/json": {"a": 1}, "text/plain": "custom"}
    if not lacks(backend_name, "display_updates"):  # fallback: the metadata is dropped
        assert output["metadata"] == {"application/json": {"expanded": True}}  # the policy's own: no 'onload'
    note = text(cells["display"], "stderr")
    assert "application/x-custom+json output not shown" in note and "SandboxMagics.allowed_mime_types" in note


def test_backend_options_only_apply_when_a_session_is_made(cells, backend_name):
    assert plain(cells["options_existing"]) == shown("still here", backend_name)
    assert "--request-timeout 30 is ignored" in text(cells["options_existing"], "stderr")


def test_bad_input_gives_one_line_usage(cells):
    assert "unknown option --no-such-option" in usage_line(cells["bad_option"])
    assert "Unknown sandbox backend 'no-such-backend'" in usage_line(cells["bad_backend"])
    assert "unknown command 'frobnicate'" in usage_line(cells["bad_command"])
    assert "unknown session 'nobody'" in usage_line(cells["bad_session"])
    assert "unknown option --memry-limit" in usage_line(cells["typo_existing"])
    assert "unknown option --request-timout for the" in usage_line(cells["typo_suggested"])
    assert "backend (did you mean --request-timeout?)" in usage_line(cells["typo_suggested"])
    assert "session 'default' runs the" in usage_line(cells["other_backend"])


# -- timing, interrupt, input: jupyter_client ---------------------------------------------------


def test_a_sandbox_that_ignores_interrupts_is_left_running_after_three():
    """The magic's own give-up path, shown with local (whose interrupt is a SIGINT the code can ignore)."""
    with host_kernel("local") as (km, kc):
        run(kc, "%%sandbox\nx = 41")
        kc.execute("%%sandbox\nimport signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                   "print('deaf', flush=True)\nwhile True:\n    pass", stop_on_error=False)
        while "deaf" not in kc.get_iopub_msg(timeout=60)["content"].get("text", ""):
            pass
        for _ in range(3):
            time.sleep(1)
            km.interrupt_kernel()
        reply = kc.get_shell_msg(timeout=30)["content"]
        assert reply["status"] == "error" and reply["ename"] == "StillRunning"
        assert "%sandbox restart default" in reply["evalue"]
        assert run(kc, "%sandbox restart default")[0]["status"] == "ok"
        reply, outputs = run(kc, "%%sandbox\n'x' in globals()")
        assert reply["status"] == "ok"


def test_interrupt_at_an_input_prompt(backend_name):
    with host_kernel(backend_name) as (km, kc):
        run(kc, f"%%sandbox --backend {backend_of(backend_name)}\nx = 41")
        kc.execute("%%sandbox\ninput('waiting: ')", allow_stdin=True, stop_on_error=False)
        if lacks(backend_name, "stdin"):  # fallback: input() raises in the sandbox, nobody is asked
            assert kc.get_shell_msg(timeout=60)["content"]["ename"] == "StdinNotImplementedError"
            return
        assert kc.get_stdin_msg(timeout=60)["content"]["prompt"] == "waiting: "
        km.interrupt_kernel()
        reply = kc.get_shell_msg(timeout=30)["content"]
        assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt"
        assert run(kc, "%%sandbox\nx + 1")[0]["status"] == "ok"


def test_dead_sandbox_gives_one_short_message(backend_name):
    """Without a checkpoint (tests/test_checkpoints.py has the recovery from one)."""
    kind = backend_of(backend_name)
    no_checkpoints = " --checkpoint-min-seconds=-1" if get_backend_class(kind).capabilities.checkpoints else ""
    with host_kernel(backend_name) as (_, kc):
        run(kc, f"%%sandbox --backend {kind}{no_checkpoints}\nx = 1")
        reply, outputs = run(kc, "%%sandbox\nimport os, signal\nos.kill(os.getpid(), signal.SIGKILL)",
                             stop_on_error=False)
        assert reply["status"] == "error" and reply["ename"] == "SandboxDied"
        [error] = [m["content"] for m in outputs if m["header"]["msg_type"] == "error"]
        assert len(error["traceback"]) == 1 and "state is lost" in error["evalue"]
        reply, outputs = run(kc, "%%sandbox\n'x' in globals()")  # a fresh sandbox
        assert reply["status"] == "ok"


def test_sessions_stop_when_the_host_kernel_exits(tmp_path):
    """Local only: the sandbox's process and scratch directory are gone after a normal exit."""
    with host_kernel("local") as (km, kc):
        run(kc, "%%sandbox --name a\n1")
        _, outputs = run(kc, "%sandbox status a")
        status = next(m for m in outputs if m["header"]["msg_type"] == "execute_result")["content"]["data"]
        pid = int(re.search(r"^sandbox id\s+(\d+)", status["text/plain"], re.M).group(1))
        workdir = Path(re.search(r"^workdir\s+(\S+)", status["text/plain"], re.M).group(1))
        assert workdir.is_dir()
        km.shutdown_kernel(now=False)  # a shutdown_request, as a notebook server sends
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and workdir.exists():
            time.sleep(0.2)
        assert not workdir.exists()
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_outputs_pass_the_output_policy(cells):
    """Default sanitize: no handler, no script, no external image reaches the host page; one note."""
    html, javascript, markdown = bundles(cells["hostile"])
    assert html["text/html"] == '<img src="x"><b>kept</b>'
    assert "application/javascript" not in javascript and "%%sandbox --output-policy isolate" in javascript["text/plain"]
    assert "text/markdown" not in markdown and "x.example" not in markdown["text/html"]
    assert "<em>kept</em>" in markdown["text/html"]
    [note] = text(cells["hostile"], "stderr").splitlines()
    assert note.startswith("[output policy 'sanitize'") and "%%sandbox --output-policy isolate" in note


def test_output_policy_on_the_line(cells):
    [isolated] = bundles(cells["isolated"], "execute_result")
    assert isolated["text/html"].startswith('<iframe sandbox="allow-scripts" srcdoc="')
    assert "allow-same-origin" not in isolated["text/html"]
    [trusted] = bundles(cells["trusted"], "execute_result")
    assert trusted["text/html"] == "<script>draw()</script>"
    assert "one of sanitize, isolate, trust" in usage_line(cells["bad_policy"])


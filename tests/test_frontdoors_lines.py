"""The ``%sandbox`` line commands at both doors that answer them, in process on the scripted backend:
one table and one parser (sandbox_kernel.session.verbs) under the kernel's lines and the magic's
line magic; what each door asks before it touches this computer's files or widens the network;
their usage errors. Through real kernels: test_artifacts, test_magic, test_egress."""

from __future__ import annotations

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

from sandbox_kernel.backends.scripted import reply
from sandbox_kernel.core.errors import LineUsageError
from sandbox_kernel.core.events import Error, Stream
from sandbox_kernel.frontdoors.magics.options import LINE_USAGE
from sandbox_kernel.policy import OutputPolicy
from sandbox_kernel.session import lines, verbs
from sandbox_kernel.session.session import SandboxSession
from sandbox_kernel.session.verbs import KERNEL, MAGIC

pytestmark = pytest.mark.unit

SCRIPT = {"print('hi')": reply(Stream("stdout", "hi\n"))}


def session(folder, file_commands="ask", egress_commands="ask") -> SandboxSession:
    """A kernel's session (it answers %sandbox lines), its host folder ``folder``."""
    return SandboxSession("scripted", parent=None, policy=OutputPolicy(), line_commands=file_commands,
                          egress_commands=egress_commands,
                          options=lambda cls: {"script": SCRIPT, "workspace_dir": str(folder)})


def answering(answer: str, prompts: list[str]):
    async def stdin(prompt: str, password: bool) -> str:
        prompts.append(prompt)
        return answer
    return stdin


async def cell(sandbox: SandboxSession, code: str, stdin=None) -> tuple[str, list]:
    shown: list = []
    outcome = await sandbox.run(code, shown.append, stdin=stdin)
    return outcome.status, shown


def text(shown: list) -> str:
    return "".join(e.text for e in shown if isinstance(e, Stream) and e.name == "stdout")


def error(shown: list) -> Error:
    [found] = [e for e in shown if isinstance(e, Error)]
    assert len(found.traceback) == 1  # one short message
    return found


# -- the table ---------------------------------------------------------------------------------
def test_each_door_s_usage_names_every_option_its_lines_accept():
    """The kernel's usage line left out download's --overwrite, which it accepted."""
    assert "download REMOTE [LOCAL] [--overwrite]" in lines.USAGE
    for door in (KERNEL, MAGIC):
        for verb in verbs.verbs(door):
            for flag in (*verb.flags, verb.form):
                assert flag in verb.usage(door) and verb.usage(door) in verbs.usage(door)


def test_the_magic_s_usage_line_is_the_one_its_users_know():
    assert LINE_USAGE == (
        "%sandbox list | status [SESSION] | restart SESSION | stop SESSION|--all | upload LOCAL [REMOTE] [--name "
        "SESSION] | download REMOTE [LOCAL] [--overwrite] [--name SESSION] | download --artifacts [--overwrite] "
        "[--name SESSION] | artifacts [--name SESSION] | allow HOST ... [--name SESSION] | push NAME ... [--name "
        "SESSION] | pull NAME ... [--name SESSION] | checkpoints [--name SESSION] | undo [--name SESSION] | "
        "restore N|NAME [--name SESSION] | checkpoint [NAME] [--name SESSION]")


@pytest.mark.parametrize("text, args, flags", [
    ("upload a.csv b.csv", ("a.csv", "b.csv"), set()),
    ("download out.txt --overwrite", ("out.txt",), {"--overwrite"}),
    ("download --artifacts --overwrite", (), {"--artifacts", "--overwrite"}),
    ("allow example.org '*.example.com'", ("example.org", "*.example.com"), set()),
    ("restore 3", ("3",), set()),
    ("checkpoint clean", ("clean",), set()),
    ("undo", (), set()),
])
def test_both_doors_read_a_line_the_same_way(text, args, flags):
    kernel, magic = verbs.parse(text, KERNEL), verbs.parse(text, MAGIC)
    assert kernel.verb == magic.verb and kernel.args == magic.args == args
    assert kernel.flags == magic.flags == flags and kernel.session is magic.session is None


@pytest.mark.parametrize("text, door, message", [
    ("download", KERNEL, "download takes 1 to 2 arguments, not 0"),
    ("download --artifacts x", KERNEL, "download --artifacts takes no arguments"),
    ("upload a b c --name s", MAGIC, "upload takes 1 to 2 arguments, not 3"),
    ("restart", MAGIC, "restart takes 1 argument, not 0"),
    ("stop --all x", MAGIC, "unknown option --all for stop"),
    ("push", MAGIC, "push takes 1 or more arguments, not 0"),
    ("upload a --name", MAGIC, "--name needs a value"),
    ("frobnicate", MAGIC, "unknown command 'frobnicate'"),
    ("restore", KERNEL, "restore takes 1 argument, not 0"),
    ("undo 3 --name s", MAGIC, "undo takes no arguments"),
    ("checkpoint a b", KERNEL, "checkpoint takes 0 to 1 arguments, not 2"),
    ("", MAGIC, "%sandbox needs a command"),
    ("status 'x", MAGIC, "cannot parse the line (No closing quotation)"),
])
def test_a_bad_line_is_one_usage_message(text, door, message):
    with pytest.raises(LineUsageError) as caught:
        verbs.parse(text, door)
    assert str(caught.value) == f"{message}. Usage: {verbs.usage(door)}"


def test_the_kernel_leaves_a_line_that_names_a_session_to_the_sandbox():
    assert lines.leading("%sandbox status demo\n%sandbox upload a.csv --name s\nx") == \
        ([], "%sandbox status demo\n%sandbox upload a.csv --name s\nx")
    assert verbs.parse("upload a.csv --name s", MAGIC).session == "s"
    assert verbs.parse("status demo", MAGIC).session == "demo"


# -- the kernel's lines ------------------------------------------------------------------------
async def test_kernel_lines_that_touch_this_computer_s_files_ask_first_and_refuse_without_stdin(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "x.csv").write_text("a,b\n1,2\n")
    sandbox, prompts = session(tmp_path), []
    status, shown = await cell(sandbox, "%sandbox upload data/x.csv copied.csv")  # as nbclient, papermill
    assert status == "error" and error(shown).evalue.startswith(
        "%sandbox upload/download touch this computer's files, and this run has no way to ask you (no stdin: "
        "nbclient, papermill): allow them with --SandboxKernel.file_commands=allow")
    status, shown = await cell(sandbox, "%sandbox upload data/x.csv copied.csv\nprint('hi')", answering("n", prompts))
    assert status == "error" and error(shown).evalue == "Not copied: you said no." and text(shown) == ""
    status, shown = await cell(sandbox, "%sandbox upload data/x.csv copied.csv\nprint('hi')",
                               answering("yes", prompts))
    assert status == "ok" and text(shown) == "Uploaded data/x.csv to copied.csv.\nhi\n"
    assert prompts[-1] == f"Copy {tmp_path}/data/x.csv (8 bytes) into the sandbox as copied.csv? [y/N] "
    status, shown = await cell(sandbox, "%sandbox download copied.csv", answering("y", prompts))
    assert status == "ok" and (tmp_path / "copied.csv").read_text() == "a,b\n1,2\n"
    assert prompts[-1] == f"Copy copied.csv from the sandbox to {tmp_path}/copied.csv? [y/N] "
    status, shown = await cell(sandbox, "%sandbox download copied.csv", answering("y", prompts))
    assert status == "error" and error(shown).evalue == f"{tmp_path}/copied.csv exists: add --overwrite to replace it."
    status, shown = await cell(sandbox, "%sandbox frobnicate")  # not the kernel's: the sandbox answers
    assert status == "error" and error(shown).ename == "ScriptError"


async def test_kernel_file_commands_allow_and_deny(tmp_path):
    (tmp_path / "in.txt").write_text("made")
    allowed = session(tmp_path, file_commands="allow")
    assert (await cell(allowed, "%sandbox upload in.txt"))[0] == "ok"
    status, shown = await cell(allowed, "%sandbox download in.txt out.txt")
    assert status == "ok" and (tmp_path / "out.txt").read_text() == "made"
    status, shown = await cell(session(tmp_path, file_commands="deny"), "%sandbox upload in.txt",
                               answering("y", []))
    assert status == "error" and error(shown).evalue.startswith(
        "%sandbox upload/download touch this computer's files, and they are turned off: allow them with "
        "--SandboxKernel.file_commands=allow")


async def test_kernel_allow_asks_first_then_needs_a_backend_that_can(tmp_path):
    prompts: list[str] = []
    status, shown = await cell(session(tmp_path), "%sandbox allow example.org")
    assert status == "error" and error(shown).evalue == (
        "%sandbox allow lets the sandbox send data to example.org, and this run has no way to ask you (no stdin: "
        "nbclient, papermill): allow it with --SandboxKernel.egress_commands=allow, or add the hosts to allow_hosts.")
    status, shown = await cell(session(tmp_path), "%sandbox allow example.org", answering("no", prompts))
    assert error(shown).evalue == "Not allowed: you said no."
    assert prompts == ["Let the sandbox reach example.org (it may send your data there)? [y/N] "]
    status, shown = await cell(session(tmp_path, egress_commands="allow"), "%sandbox allow example.org")
    assert error(shown).ename == "NotSupported"


async def test_kernel_status_restart_stop_and_usage(tmp_path):
    sandbox = session(tmp_path)
    status, shown = await cell(sandbox, "%sandbox status\n\n%sandbox artifacts")
    assert status == "ok" and text(shown) == (
        "backend: scripted\nsession: default\nnote: a test double: runs no code\nrunning: False\nartifacts: 0 files written so far\n"
        "No artifacts yet: no cell has written a file in the working directory.\n")
    assert (await cell(sandbox, "print('hi')"))[0] == "ok"
    assert "running: True" in text((await cell(sandbox, "%sandbox status"))[1])
    assert text((await cell(sandbox, "%sandbox restart"))[1]) == "Restarted: a fresh interpreter; variables are gone.\n"
    assert text((await cell(sandbox, "%sandbox stop"))[1]) == "Stopped the sandbox; the next cell starts a fresh one.\n"
    assert not sandbox.started
    status, shown = await cell(sandbox, "%sandbox download")
    assert status == "error" and error(shown).ename == "UsageError"
    assert error(shown).evalue == f"download takes 1 to 2 arguments, not 0. Usage: {lines.USAGE}"


# -- the magic's line magic --------------------------------------------------------------------
@pytest.fixture
def shell(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ipython = InteractiveShell.instance()
    ipython.config.ScriptedBackend.script = SCRIPT
    ipython.run_cell("%load_ext magics")
    yield ipython
    ipython.run_cell("%sandbox stop --all")


def magic(shell, code: str) -> tuple[bool, str]:
    with capture_output() as captured:
        result = shell.run_cell(code)
    return result.success, captured.stdout + captured.stderr


def test_magic_lines_on_a_session(shell, tmp_path):
    assert magic(shell, "%%sandbox --backend scripted --name s\nprint('hi')") == (True, "hi\n")
    (tmp_path / "up.txt").write_text("from the host")
    assert magic(shell, "%sandbox upload up.txt --name s") == (True, "Uploaded up.txt to up.txt in session 's'.\n")
    assert magic(shell, "%sandbox download up.txt down.txt -n s") == \
        (True, "Downloaded up.txt from session 's' to down.txt.\n")
    assert (tmp_path / "down.txt").read_text() == "from the host"
    assert magic(shell, "%sandbox artifacts --name=s") == \
        (True, "No artifacts yet: no cell has written a file in the working directory.\n")
    ok, said = magic(shell, "%sandbox allow example.org --name s")  # the magic asks nobody
    assert not ok and "The scripted backend does not support changing the allowed hosts" in said
    assert magic(shell, "%sandbox restart s") == \
        (True, "Restarted session 's' (scripted): a fresh interpreter, state cleared.\n")
    assert magic(shell, "%sandbox stop s") == (True, "Stopped session 's' (scripted).\n")
    assert magic(shell, "%sandbox stop --all") == (True, "No sandbox sessions to stop.\n")


@pytest.mark.parametrize("code, message", [
    ("%sandbox frobnicate", "unknown command 'frobnicate'"),
    ("%sandbox status nobody", "unknown session 'nobody' (sessions: none yet)"),
    ("%sandbox upload missing.txt", "no such file on the host: missing.txt"),
    ("%sandbox push ,", "push needs variable names"),
    ("%sandbox download x --bad", "unknown option --bad for download"),
])
def test_magic_bad_lines_are_one_usage_line(shell, code, message):
    ok, said = magic(shell, code)
    assert not ok and said.startswith(f"UsageError: {message}") and said.count("\n") == 1
    assert said.rstrip().endswith(f"Usage: {LINE_USAGE}")


def test_a_verb_added_to_the_table_serves_both_doors(shell, tmp_path, monkeypatch):
    """One entry (issue 38's checkpoint verbs will be such): its parsing, usage and answer at the
    kernel and at the magic, with each door's way of naming the session."""
    import asyncio

    async def hello(door, command):
        return f"{door.subject} says hello to {command.args[0]} ({door.session.name})."

    monkeypatch.setattr(verbs, "VERBS", (*verbs.VERBS, verbs.Verb("hello", "NAME", help="say hello", run=hello)))
    assert "hello NAME [--name SESSION]" in verbs.usage(MAGIC) and "| hello NAME" in verbs.usage(KERNEL)
    status, shown = asyncio.run(cell(session(tmp_path), "%sandbox hello ada"))
    assert status == "ok" and text(shown) == "The sandbox says hello to ada (scripted).\n"
    assert magic(shell, "%%sandbox --backend scripted --name s\nprint('hi')") == (True, "hi\n")
    assert magic(shell, "%sandbox hello ada --name s") == (True, "Session 's' says hello to ada (scripted).\n")
    assert not magic(shell, "%sandbox hello")[0]

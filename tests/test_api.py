"""The Python API (Sandbox, AsyncSandbox) on the local and docker backends: state, rich
results, errors, timeouts, files, shell commands under an allowlist. One sandbox per backend
for the module (tests that need their own make it)."""

from __future__ import annotations

import base64
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from sandbox_kernel import AsyncSandbox, Sandbox
from sandbox_kernel.core.errors import CommandRefused, ConfigError, ExecutionTimeout, FileTooLarge
from sandbox_kernel.core.events import Display, Stream
from tests import targets
from tests.kernels import JEDI_PARSED, LOOPING
from tests.support.backends import prepared

pytestmark = pytest.mark.kernel

API_BACKENDS = ["local", "docker"]
ALLOWED = [r"echo .*", r"ls( -l)?", r"sleep \d+", r"sh -c .*"]


def sandbox_options(name: str) -> dict:
    return dict(prepared(name).traits)


@pytest.fixture(scope="module", params=API_BACKENDS)
def sb(request):
    name = request.param
    with targets.env_vars(prepared(name).kernel_env):
        sandbox = Sandbox(name, allowed_commands=ALLOWED, **sandbox_options(name))
    with sandbox:
        yield sandbox


def test_an_api_sandbox_spends_nothing_on_a_completion_warm_up():
    """Only the kernel warms a sandbox's completer (a person's first Tab): a program's sandbox
    would pay 1.3-1.7 s of CPU for nothing, and its shutdown would wait for the warm-up's end."""
    with Sandbox("local") as sandbox:
        sandbox.run("x = 1")
        time.sleep(2)  # a warm-up would have parsed typeshed's builtins by now
        parsed = sandbox.run(JEDI_PARSED)
        assert parsed.stdout == "0\n"


def test_state_is_kept_and_streams_are_collected(sb):
    first = sb.run("x = 41\nprint('hello')\nimport sys; print('warn', file=sys.stderr)")
    assert (first.status, first.stdout, first.stderr, first.text) == ("ok", "hello\n", "warn\n", None)
    second = sb.run("x + 1")
    assert second.text == "42" and second.result.data["text/plain"] == "42"
    assert second.execution_count == first.execution_count + 1


def test_plot_is_an_image_and_outputs_stream_live(sb):
    seen = []
    result = sb.run("import matplotlib.pyplot as plt\nprint('plotting')\nplt.plot([1, 3, 2]); plt.show()",
                    on_output=seen.append)
    [image] = [d for d in result.displays if "image/png" in d.data]
    assert base64.b64decode(image.data["image/png"]).startswith(b"\x89PNG")
    assert [type(e) for e in seen] == [Stream, Display] and seen[1] == image


def test_error_is_data_and_the_sandbox_goes_on(sb):
    result = sb.run("def f():\n    return 1 / 0\nf()")
    assert result.status == "error" and result.error.ename == "ZeroDivisionError"
    assert any("f()" in line for line in result.error.traceback)
    assert sb.run("x").text == "41"


def test_html_passes_the_output_policy(sb):
    result = sb.run("from IPython.display import HTML\nHTML('<b onclick=\"steal()\">bold</b><script>x()</script>')")
    html = result.result.data["text/html"]
    assert "<b>bold</b>" in html and "script" not in html and "onclick" not in html
    assert "output_policy='isolate'" in result.stderr


def test_timeout_interrupts_keeps_state_and_partial_output(sb):
    started = time.perf_counter()
    with pytest.raises(ExecutionTimeout) as caught:
        sb.run("import time\nprint('started', flush=True)\ntime.sleep(60)", timeout=1)
    assert time.perf_counter() - started < 15
    assert "longer than 1 s" in str(caught.value) and caught.value.result.stdout == "started\n"
    assert sb.run("x").text == "41"


def test_interrupt_from_another_thread(sb):
    results, looping = [], threading.Event()
    runner = threading.Thread(target=lambda: results.append(
        sb.run(LOOPING, on_output=lambda event: looping.set())))
    runner.start()
    assert looping.wait(60), "the loop never said it runs"
    sb.interrupt()
    runner.join(timeout=30)
    assert results and results[0].error.ename == "KeyboardInterrupt"
    assert sb.run("x").text == "41"


def test_upload_and_download(sb, tmp_path):
    (tmp_path / "in.txt").write_text("from the host")
    sb.upload(tmp_path / "in.txt", "data/in.txt")
    assert sb.run("open('data/in.txt').read()").text == "'from the host'"
    sb.run("open('out.bin', 'wb').write(bytes(range(256)))")
    assert sb.download("out.bin", tmp_path / "out.bin").read_bytes() == bytes(range(256))
    assert sb.read_file("data/in.txt") == b"from the host"
    with pytest.raises(FileTooLarge, match="larger than 255 bytes"):  # refused as it is read
        sb.download("out.bin", tmp_path / "cut.bin", max_bytes=255)
    assert not (tmp_path / "cut.bin").exists()
    assert sb.read_file("out.bin", max_bytes=256) == bytes(range(256))


def test_commands_under_the_allowlist(sb):
    done = sb.run_command("sh -c 'echo out; echo err >&2; exit 3'")
    assert (done.exit_code, done.stdout, done.stderr) == (3, "out\n", "err\n")
    assert "data" in sb.run_command("ls").stdout.split()
    with pytest.raises(CommandRefused, match="'rm -rf data' is not allowed"):
        sb.run_command("rm -rf data")
    with pytest.raises(CommandRefused):  # whole command line: an allowed prefix is not enough
        sb.run_command("ls; rm -rf data")
    assert sb.read_file("data/in.txt") == b"from the host"  # the refused commands did not run


def test_command_timeout(sb):
    with pytest.raises(ExecutionTimeout):
        sb.run_command("sleep 30", timeout=1)
    assert sb.run("x").text == "41"


def test_restart_gives_a_fresh_interpreter(sb):
    sb.restart()
    result = sb.run("x")
    assert result.error.ename == "NameError"


def test_describe(sb):
    info = sb.describe()
    assert info["started"] and info["sandbox_id"] and info["output_policy"] == "sanitize"
    assert info["allowed_commands"] == ALLOWED


@pytest.mark.parametrize("name", API_BACKENDS)
async def test_async_sandbox(name):
    with targets.env_vars(prepared(name).kernel_env):
        sandbox = AsyncSandbox(name, **sandbox_options(name))
    async with sandbox as sb:
        assert (await sb.run("21 * 2")).text == "42"
        assert (await sb.run_command("echo hi")).stdout == "hi\n"
        sandbox_id = sb.describe()["sandbox_id"]
    assert sandbox_id and not sandbox.describe()["started"]


@pytest.mark.unit
def test_bad_options_say_what_to_do():
    with pytest.raises(ConfigError, match="Did you mean 'memory_limit'"):
        Sandbox("local", memory_limt="1g")
    with pytest.raises(ConfigError, match="Unknown sandbox backend 'dokcer'"):
        Sandbox("dokcer")
    with pytest.raises(ConfigError, match="output_policy"):
        Sandbox("local", output_policy="everything")
    with pytest.raises(ConfigError, match="not a regular expression"):
        Sandbox("local", allowed_commands=["("])


@pytest.mark.unit
def test_refused_command_starts_no_sandbox():
    sandbox = Sandbox("local", allowed_commands=[r"echo .*"])
    with pytest.raises(CommandRefused):
        sandbox.run_command("cat /etc/passwd")
    assert not sandbox.describe()["started"]


def test_open_sandboxes_are_removed_at_exit():
    code = ("from sandbox_kernel import Sandbox\nsb = Sandbox('local').start()\n"
            "print(sb.describe()['workdir'], flush=True)\nsb.run('x = 1')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert not Path(done.stdout.strip()).exists()

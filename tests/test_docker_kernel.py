"""The ``sandbox-docker`` kernel, started from its kernelspec as a notebook starts it: hostile
cells against the real engine. After each, the kernel answers the next cell, and once it is shut
down nothing of its sandboxes is left on the host."""

from __future__ import annotations

import time

import pytest

from tests.kernels import kernel, kinds, run, stdout
from tests.targets.docker import NOTHING, held_by

pytestmark = [pytest.mark.docker, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def docker_kernel(docker_client):
    """One sandbox-docker kernel for the tests that leave it usable; checked clean at the end."""
    with kernel("docker", CANARY_SECRET="do-not-leak") as (km, kc):
        yield km, kc
        pid = km.provisioner.pid
    assert held_by(docker_client, pid) == NOTHING


def result(outputs: list[dict]) -> str:
    return next(m["content"]["data"]["text/plain"] for m in outputs if m["header"]["msg_type"] == "execute_result")


def test_banner_and_state(docker_kernel):
    _, kc = docker_kernel
    assert "docker sandbox" in kc.kernel_info(reply=True)["content"]["banner"]
    run(kc, "answer = 41")
    assert result(run(kc, "answer + 1")[1]) == "42"


def test_host_environment_stays_out(docker_kernel):
    _, kc = docker_kernel
    _, outputs = run(kc, "import os\nprint(os.environ.get('CANARY_SECRET'), 'CANARY' in str(dict(os.environ)))")
    assert stdout(outputs) == "None False\n"


def test_env_vars_option_forwards_only_named_variables(docker_client):
    with kernel("docker", "--DockerBackend.env_vars=FORWARDED", FORWARDED="yes", OTHER="no") as (km, kc):
        _, outputs = run(kc, "import os\nprint(os.environ.get('FORWARDED'), os.environ.get('OTHER'))")
        pid = km.provisioner.pid
    assert stdout(outputs) == "yes None\n"
    assert held_by(docker_client, pid) == NOTHING


def test_cell_timeout_interrupts_and_keeps_state():
    with kernel("docker", "--SandboxKernel.cell_timeout=1") as (_, kc):
        run(kc, "kept = 5")
        reply, outputs = run(kc, "import time\ntime.sleep(30)", timeout=30)
        assert reply["status"] == "error" and reply["ename"] == "ExecutionTimeout"
        assert kinds(outputs) == ["error"]
        assert result(run(kc, "kept")[1]) == "5"


def test_100_mb_of_output_is_cut_and_the_wrapper_stays_small(docker_kernel):
    km, kc = docker_kernel
    status = f"/proc/{km.provisioner.pid}/status"
    code = "import sys\nchunk = 'x' * 1023 + '\\n'\nfor _ in range(100 * 1024): sys.stdout.write(chunk)"
    reply, outputs = run(kc, code, timeout=180)
    peak = int(next(line for line in open(status) if line.startswith("VmHWM")).split()[1]) * 1024
    assert reply["status"] == "ok"
    assert len(stdout(outputs).encode()) <= 10 * 1024**2
    assert "output limit of 10 MiB reached" in stdout(outputs, "stderr")
    assert "90 MiB of output dropped" in stdout(outputs, "stderr")
    assert peak < 200 * 1024**2, f"the wrapper kernel peaked at {peak / 1024**2:.0f} MiB"
    assert result(run(kc, "1 + 1")[1]) == "2"


def test_invalid_utf8_on_stdout(docker_kernel):
    _, kc = docker_kernel
    code = ("import os, sys\nos.write(1, b'raw \\xff\\xfe bytes\\n')\nsys.stdout.flush()\n"
            "print('lone \\udcff surrogate')\nprint('after')")
    reply, outputs = run(kc, code)
    text = stdout(outputs) + stdout(outputs, "stderr")
    assert "after" in text
    assert result(run(kc, "1 + 1")[1]) == "2"


def test_memory_bomb_is_one_message_and_the_next_cell_is_fresh(docker_client):
    """Without a checkpoint (none is taken automatically here: tests/test_checkpoints.py has the
    recovery from one)."""
    with kernel("docker", "--DockerBackend.memory_limit=256m", "--DockerBackend.checkpoint_min_seconds=-1") as (km, kc):
        run(kc, "kept = 1")
        started = time.monotonic()
        reply, outputs = run(kc, "hog = []\nfor _ in range(64): hog.append(bytearray(16 * 1024**2))", timeout=60)  # 1 GiB at most
        elapsed = time.monotonic() - started
        assert reply["status"] == "error" and reply["ename"] == "SandboxDied"
        assert "it ran out of memory (limit 256 MiB). Its state is lost" in reply["evalue"]
        assert kinds(outputs) == ["error"]
        assert result(run(kc, "'kept' in globals()")[1]) == "False"
        pid = km.provisioner.pid
    assert elapsed < 10
    assert held_by(docker_client, pid) == NOTHING


def test_a_shutdown_request_removes_the_sandbox_and_ends_the_kernel_by_itself(docker_client):
    """``shutdown_request`` (JupyterLab's shut down or restart) removes the container and its
    volume before the reply, and the wrapper then exits without jupyter_client's SIGTERM."""
    for _ in range(2):
        with kernel("docker") as (km, kc):
            run(kc, "x = 1")
            pid = km.provisioner.pid
            assert held_by(docker_client, pid) != NOTHING
            km.request_shutdown()
            assert km.provisioner.process.wait(timeout=5) == 0
            assert held_by(docker_client, pid) == NOTHING


def test_missing_engine_is_one_short_message_and_the_kernel_keeps_answering():
    with kernel("docker", DOCKER_HOST="unix:///tmp/no-docker-engine-here.sock") as (_, kc):
        reply, outputs = run(kc, "1 + 1")
        assert reply["status"] == "error" and reply["ename"] == "BackendUnavailable"
        assert "The Docker engine is not answering at unix:///tmp/no-docker-engine-here.sock" in reply["evalue"]
        assert "Fix: start the Docker engine" in reply["evalue"]
        [error] = [m["content"] for m in outputs if m["header"]["msg_type"] == "error"]
        assert len(error["traceback"]) == 1
        assert kc.kernel_info(reply=True)["content"]["status"] == "ok"


def test_first_tab_reads_the_images_prebuilt_completer_cache(docker_kernel):
    """The default image holds jedi's cache of what IPython's first completion parses (built once
    with the image): the launcher links it into the sandbox's own cache folder, the kernel warms up
    nothing beside the first cell, and the first Tab reads the links instead of parsing typeshed's
    builtins (1.3-1.7 s in an empty cache, past JupyterLab's 1 s)."""
    _, kc = docker_kernel
    assert "zip" in kc.complete("zi", 2, reply=True, timeout=60)["content"]["matches"]
    _, outputs = run(kc, "import glob, os\nentries = glob.glob('/tmp/cache/jedi/CPython-*/*.pkl')\n"
                         "print(len(entries), all(os.path.realpath(e).startswith('/opt/sandbox-kernel/jedi/') "
                         "for e in entries))")
    count, linked = stdout(outputs).split()
    assert int(count) >= 2 and linked == "True", stdout(outputs)  # nothing parsed and written anew

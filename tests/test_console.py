"""jupyter-console 6.6 on the sandbox kernels, in a real pseudo-terminal (pexpect), as a person at
a terminal uses it: ``zip?`` pages its help, ``exit`` quits, and (local) in a second console the
Up arrow recalls a cell typed in the first.

jupyter-console loads the kernel's history (``history_request``, tail) at start and waits 1 s for
it: local's sandbox, which starts with the kernel, answers in time and keeps its history across
sessions. A docker sandbox starting cold (0.5-2 s here) is not always up by then, so that console
starts without history (with a warm pool it is; tests/test_kernel_relay.py shows docker's history
kept across sessions in a workspace volume at the message level).
"""

from __future__ import annotations

import json
import os
import secrets
import sys

import pexpect
import psutil
import pytest

from tests.support.backends import prepared
from tests.targets import backend_of

pytestmark = [pytest.mark.kernel, pytest.mark.slow]


@pytest.fixture(params=["local", "docker"])
def console_env(request, tmp_path):
    """``(target, environment)``: a Jupyter path with the kernelspec ``sandbox-test`` for the
    target, and the environment a console runs in."""
    from sandbox_kernel.frontdoors.kernel.kernelspec import kernel_json

    name, setup = request.param, prepared(request.param)
    spec = tmp_path / "kernels" / "sandbox-test"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps(kernel_json(backend_of(name), setup.kernel_options)))
    return name, {**os.environ, **setup.kernel_env, "JUPYTER_PATH": str(tmp_path), "PAGER": "cat", "TERM": "xterm"}


def console(env: dict[str, str]):
    """``jupyter console --kernel sandbox-test`` in a 50x200 pseudo-terminal, at its first prompt."""
    child = pexpect.spawn(sys.executable, ["-m", "jupyter_console", "--kernel", "sandbox-test"], env=env,
                          encoding="utf-8", timeout=120, dimensions=(50, 200))
    child.expect("In ")
    return child


@pytest.fixture
def consoles():
    """Starts consoles (:func:`console`); each is closed at the end, also after a failure."""
    started = []

    def start(env: dict[str, str]):
        started.append(console(env))
        return started[-1]

    yield start
    for child in started:
        child.close(force=True)


def test_help_exit_and_up_arrow_across_sessions(console_env, consoles):
    name, env = console_env
    mark = secrets.token_hex(4)
    first = consoles(env)
    first.sendline(f"print('mark' + '{mark}')")  # the echo holds the split string, the output the joined one
    first.expect(f"mark{mark}")
    first.sendline("zip?")
    first.expect("Return a zip object|Yield tuples")  # the pager's page payload, through PAGER
    kernels = psutil.Process(first.pid).children(recursive=True)  # the wrapper (and local's sandbox)
    first.sendline("exit")
    first.expect(pexpect.EOF)  # the console quit on the ask_exit payload
    first.wait()
    assert first.exitstatus == 0
    # the console does not wait for its kernel, which ends its sandbox (and IPython writes out its
    # history) as it ends: a person's next console comes seconds later
    psutil.wait_procs(kernels, timeout=60)
    if name != "local":  # see the module docstring
        return

    second = consoles(env)
    second.send("print('ma")
    second.expect("ma")  # echoed: the prompt reads keys
    second.send("\x1b[A")  # Up: the latest line of the history that starts so, the first console's
    second.expect(mark)  # the recalled line, echoed
    second.send("\r")
    second.expect(f"mark{mark}")
    second.sendline("exit")
    second.expect(pexpect.EOF)

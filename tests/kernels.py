"""Start installed sandbox kernelspecs the way a frontend does, and run cells on them."""

from __future__ import annotations

import contextlib
import os
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from jupyter_client.manager import KernelManager
from jupyter_core.paths import jupyter_runtime_dir


def start_new_kernel(kernel_name: str, startup_timeout: float = 60, **kwargs: Any):
    """jupyter_client's ``start_new_kernel`` on the ipc transport (Unix sockets in the runtime
    folder, named after the kernel's connection file): TCP ports are picked by binding and closing
    them, and another test's kernel took one in between (ZMQError "Address already in use", a full
    run at 2 workers). ``kwargs`` go to ``KernelManager.start_kernel``; returns ``(km, kc)``;
    raises RuntimeError when the kernel is not ready in ``startup_timeout`` seconds."""
    # an absolute path of its own: the default ("kernel-ipc" in the current folder) is relative,
    # so a kernel started in another folder would listen where the client does not look
    runtime = Path(jupyter_runtime_dir())
    runtime.mkdir(parents=True, exist_ok=True)
    km = KernelManager(kernel_name=kernel_name, transport="ipc", ip=str(runtime / f"kernel-{uuid.uuid4().hex}-ipc"))
    km.start_kernel(**kwargs)
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=startup_timeout)
    except RuntimeError:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
        raise
    return km, kc


@contextlib.contextmanager
def kernel(name: str, *options: str, cwd: str | None = None, **env: str):
    """A kernel started from the installed kernelspec ``sandbox-NAME`` through jupyter_client's
    KernelManager (as JupyterLab and nbclient do), in the folder ``cwd`` (as Jupyter starts one in
    its notebook's folder; default: this process's); yields ``(km, kc)``."""
    from tests.support.backends import prepared
    from tests.targets import NAMES, REMOTE_NAMES, Prepared, backend_of

    setup = prepared(name) if name in NAMES + REMOTE_NAMES else Prepared()
    km, kc = start_new_kernel(kernel_name=f"sandbox-{backend_of(name)}", env={**os.environ, **setup.kernel_env, **env},
                              extra_arguments=[*setup.kernel_options, *options], startup_timeout=120,
                              **({"cwd": cwd} if cwd else {}))
    try:
        yield km, kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel()


@contextlib.contextmanager
def python3():
    """A plain python3 kernel (ipykernel), the reference a sandbox kernel is compared with;
    yields ``(km, kc)``."""
    km, kc = start_new_kernel(kernel_name="python3", startup_timeout=60)
    try:
        yield km, kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel()


def run(kc, code: str, timeout: float = 60, on_output: Any = None, **kwargs: Any) -> tuple[dict, list[dict]]:
    """Execute ``code``; returns ``(execute_reply content, IOPub messages of the cell)``.
    Each IOPub message gets ``"t"``: seconds since the request was sent; ``on_output(msg)`` is
    called with each as it comes."""
    outputs: list[dict] = []
    start = time.monotonic()

    def hook(msg: dict) -> None:
        msg["t"] = time.monotonic() - start
        outputs.append(msg)
        if on_output is not None:
            on_output(msg)

    reply = kc.execute_interactive(code, timeout=timeout, output_hook=hook, **kwargs)
    return reply["content"], outputs


LOOPING = "print('looping', flush=True)\nwhile True: pass"
"""A busy loop that says when it runs: an interrupt sent on that line cannot come before the loop
(a timer did, on a loaded machine, and the cell ran until the test's timeout)."""


def interrupted_loop(km, kc, timeout: float = 30) -> tuple[dict, float]:
    """Run :data:`LOOPING` and press the interrupt button when its line comes; returns the
    ``execute_reply`` content and the seconds from the press to the reply."""
    pressed: list[float] = []

    def press(msg: dict) -> None:
        if msg["header"]["msg_type"] == "stream" and not pressed:
            pressed.append(time.monotonic())
            threading.Thread(target=km.interrupt_kernel, daemon=True).start()

    reply, _ = run(kc, LOOPING, timeout=timeout, on_output=press)
    assert pressed, f"the loop never said it runs: {reply}"
    return reply, time.monotonic() - pressed[0]


def kinds(outputs: list[dict]) -> list[str]:
    """The msg_types of a cell's outputs, without status and execute_input."""
    return [m["header"]["msg_type"] for m in outputs if m["header"]["msg_type"] not in ("status", "execute_input")]


def stdout(outputs: list[dict], name: str = "stdout") -> str:
    return "".join(m["content"]["text"] for m in outputs
                   if m["header"]["msg_type"] == "stream" and m["content"]["name"] == name)


JEDI_PARSED = "import parso.cache; print(sum(map(len, parso.cache.parser_cache.values())))"
"""Code that prints how many files jedi has parsed in a Python sandbox: 0 until IPython's
completer first ran (it parses typeshed's stubs of the builtins), so it shows a completion
warm-up without asking for a completion."""

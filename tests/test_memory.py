"""Host memory comes back: what a closed sandbox held is freed as its door lets go of it, and magic
cells keep the host kernel's memory flat (issue 37 §1: each ``%%sandbox`` cell and each API sandbox
kept ~430 kB, an nh3 ``Cleaner`` holding a bound method of the sanitizer that owned it, a cycle the
garbage collector cannot see; then the sandbox's own cycles, which only a full collection frees,
held each closed sandbox in a long-lived process, an MCP server's). ``benchmarks/soak.py``
measures every door over many units of work."""

from __future__ import annotations

import concurrent.futures
import contextlib
import gc
import weakref
from pathlib import Path

import pytest

from sandbox_kernel import Sandbox
from sandbox_kernel.backends.scripted import reply
from sandbox_kernel.core.events import Display
from sandbox_kernel.policy import OutputPolicy
from tests.kernels import run
from tests.support.host import host_kernel

SCRIPT = {"1+1": reply(Display({"text/plain": "2", "text/html": '<b onclick="x()">2</b>'}), result=True)}


@contextlib.contextmanager
def no_collector():
    """The cyclic garbage collector off: what is freed now is freed by reference counting alone."""
    was = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _held(sb: Sandbox) -> dict[str, object]:
    session = sb.aio.session
    return {"sandbox": sb.aio, "session": session, "pipeline": session.pipeline, "backend": session.backend,
            "policy": session.pipeline.policy, "files": session.files}


@pytest.mark.unit
def test_a_closed_sandbox_is_freed_without_the_collector():
    """Everything a closed sandbox held is freed as its door lets go of it, and nothing is left for
    the collector. Before, the backend held its door (traitlets' parent) and bound methods of its
    session (the comm and progress handlers): cycles, so a closed sandbox waited for a full
    collection, which a long-lived process seldom runs (an MCP server's grew ~120 kB a session),
    the output policy's nh3 Cleaners with it; and each backend lookup left importlib.metadata's
    cycles (30 kB) behind."""
    with Sandbox("scripted", script=SCRIPT) as sb:  # the first: what a process sets up once
        sb.run("1+1")
    with no_collector():
        with Sandbox("scripted", script=SCRIPT) as sb:
            assert sb.run("1+1").text == "2"  # the policy cleaned HTML
            refs = {name: weakref.ref(value) for name, value in _held(sb).items()}
        del sb
        assert [name for name, ref in refs.items() if ref() is not None] == []
        assert gc.collect() == 0


@pytest.mark.unit
def test_policies_share_their_sanitizer_across_threads():
    """A policy per magic cell and per API or MCP sandbox builds no sanitizer: each of those held
    four nh3 Cleaners (about 420 kB of native memory, 3 ms to build). One sanitizer per set of
    allowed origins, used from several threads at once (the kernel's, the magic's loop thread, an
    executor's) as from one."""
    first, second = OutputPolicy(), OutputPolicy("isolate")
    assert first.sanitizer is second.sanitizer
    cdn = OutputPolicy(allowed_origins=["https://CDN.example.org/"])
    assert cdn.sanitizer is OutputPolicy(allowed_origins=["https://cdn.example.org"]).sanitizer
    assert cdn.sanitizer is not first.sanitizer
    markup = ['<img src="https://cdn.example.org/a.png" onerror="x()">', '<a href="javascript:x()">y</a>',
              '<b style="color: red; position: fixed">z</b><style>p { color: red }</style>',
              '<svg><circle r="4" fill="url(#a)" onclick="x()"/></svg>', '<td class="jp-x a1" id="a-1">1</td>']
    alone = [cdn.html(source) for source in markup]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        together = list(pool.map(lambda i: cdn.html(markup[i % len(markup)]), range(400)))
    assert together == [alone[i % len(markup)] for i in range(400)]


@pytest.mark.kernel
def test_a_closed_local_sandbox_is_freed_without_the_collector():
    """The same through a real kernel's client: jupyter_client's ``Session(parent=client)`` made
    client -> session -> client a cycle, so each closed sandbox's client and channels waited for a
    full collection."""
    with no_collector():
        with Sandbox("local") as sb:
            assert sb.run("1 + 1").text == "2"
            client = sb.aio.backend._client
            refs = {"client": weakref.ref(client), "client's session": weakref.ref(client.session),
                    **{name: weakref.ref(value) for name, value in _held(sb).items()}}
        del sb, client
        assert [name for name, ref in refs.items() if ref() is not None] == []


CELLS = 200
WARM = 20
BOUND = 8 * 1024**2
"""Growth of the host kernel's VmRSS over 200 magic cells that each set a variable in a local
sandbox, after 20 cells of warm-up. Measured here (2 cores, shared): with the leak, 84 MiB (~430 kB
a cell); without it, 0.74-0.80 MiB in ten runs (the magic's session remembers its last 256
requests; later runs of 200 cells in the same kernel grew 0.1-0.3 MiB, as 200 plain python3 cells
do: IPython's history). 8 MiB is ten times the largest growth seen without the leak and a tenth of
the leak's: a leak of 40 kB a cell fails."""


def _rss(pid: int) -> int:
    """Resident set size of process ``pid`` in bytes (``VmRSS`` of ``/proc/PID/status``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for process {pid}")


@pytest.mark.kernel
def test_magic_cells_keep_the_host_kernels_memory_flat():
    with host_kernel("local") as (km, kc):
        pid = km.provisioner.process.pid
        for i in range(WARM):
            assert run(kc, f"%%sandbox\nx = {i}")[0]["status"] == "ok"
        run(kc, "import gc; gc.collect()")
        before = _rss(pid)
        for i in range(CELLS):
            assert run(kc, f"%%sandbox\nx = {i}")[0]["status"] == "ok"
        run(kc, "import gc; gc.collect()")
        grown = _rss(pid) - before
        assert grown < BOUND, f"{CELLS} magic cells grew the host kernel by {grown / 1024**2:.1f} MiB"

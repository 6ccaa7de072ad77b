"""Bursts of small outputs through the wrapper kernel, started from its kernelspec as a
frontend starts it: every message arrives, in order, and the cell ends (issue 20).

Before the sandbox's IOPub socket had no high-water mark, libzmq dropped what the host had not
read yet past 1000 messages: 4489 of 5000 displays arrived, the cell's ``status: idle`` was
lost with them, and no later cell of the session ever ended."""

from __future__ import annotations

import contextlib
import queue
import threading
import time

import psutil
import pytest

from sandbox_kernel import Sandbox
from sandbox_kernel.core.events import Display
from tests import targets
from tests.kernels import kernel, run, stdout
from tests.support.backends import prepared
from tests.support.host import host_kernel
from tests.targets import backend_of

pytestmark = pytest.mark.kernel

ROUNDS = 4  # of 5000 displays, on local and docker through the kernelspec and the magic (issue 20)
UPDATE_EVERY = 2  # rounds 0 and 2 follow their displays with 5000 updates on one display id
# A 5000-message burst costs about 2.5 s on 2 cores whatever the kernel (a plain ipykernel's
# IOPub publishes about 2000 small messages a second), so every burst counts: updates in 2 of
# the 4 rounds keep the sequence that lost the idle (displays, updates, displays) twice, and the
# engine-API transport (the same backend's other hop) keeps its 3 rounds. (Before the fix, 4489
# of 5000 displays arrived in a round; 10 rounds took 40 to 52 s here.)
DISPLAYS = "from IPython.display import display\nfor i in range(5000):\n    display(i)"
UPDATES = "from IPython.display import display\nh = display(-1, display_id=True)\nfor i in range(5000):\n    h.update(i)"
EXPECTED = [str(i) for i in range(5000)]


def shown(outputs: list[dict], msg_type: str) -> list[str]:
    return [m["content"]["data"]["text/plain"] for m in outputs if m["header"]["msg_type"] == msg_type]


def displays_until_idle(kc, msg_id: str, timeout: float) -> tuple[list[str], bool]:
    """The ``display_data`` values of request ``msg_id`` read from IOPub, and whether its
    ``status: idle`` came (each message waited for at most ``timeout`` seconds)."""
    values, idle = [], False
    with contextlib.suppress(queue.Empty):
        while not idle:
            msg = kc.get_iopub_msg(timeout=timeout)
            if msg["parent_header"].get("msg_id") == msg_id:
                values += shown([msg], "display_data")
                idle = msg["header"]["msg_type"] == "status" and msg["content"]["execution_state"] == "idle"
    return values, idle


def bursts(kc, prefix: str = "", rounds: int = ROUNDS) -> None:
    """``rounds`` rounds of 5000 displays (each ``UPDATE_EVERY``-th followed by 5000 updates),
    each cell prefixed by ``prefix`` (the magic's line): every message arrives in order, nothing
    on stderr, and the reply comes (``run`` waits for the cell's ``status: idle``)."""
    for r in range(rounds):
        cells = [(DISPLAYS, "display_data")] + ([(UPDATES, "update_display_data")] if r % UPDATE_EVERY == 0 else [])
        for code, msg_type in cells:
            reply, outputs = run(kc, prefix + code, timeout=60)
            assert reply["status"] == "ok", (r, msg_type, reply)
            got = shown(outputs, msg_type)
            assert got == EXPECTED, f"round {r}: {len(got)} {msg_type} arrived, not 0..4999 in order"
            assert stdout(outputs, "stderr") == "", (r, msg_type)


@pytest.mark.parametrize(("name", "rounds"), [("local", ROUNDS), ("docker", ROUNDS), ("docker_api", 3)])
def test_bursts_of_displays_and_updates_arrive_whole_and_in_order_and_cells_end(name, rounds):
    with kernel(name) as (_, kc):
        bursts(kc, rounds=rounds)
        reply, outputs = run(kc, "print(i)")  # the next cell sees the state
        assert reply["status"] == "ok" and stdout(outputs) == "4999\n"


def test_a_frontend_that_reads_late_still_gets_every_message_and_the_idle():
    """The wrapper's own IOPub (towards the frontend) keeps what the frontend has not read yet:
    libzmq's default high-water mark dropped 13008 of 20000 displays and the cell's idle (with
    12 s asleep), and 3510 of 10000 and the idle with this test's 6 s. (5000 displays do not
    show it: what the two sockets' 1000-message marks and the TCP buffers hold is enough.)"""
    with kernel("local") as (_, kc):
        msg_id = kc.execute("from IPython.display import display\nfor i in range(10000):\n    display(i)")
        time.sleep(6)  # a frontend busy while the burst arrives (about all of it, on 2 cores)
        values, idle = displays_until_idle(kc, msg_id, timeout=30)
        assert idle and values == [str(i) for i in range(10000)]


FLOOD = "from IPython.display import display\nfor i in range(20000):\n    display({'text/plain': 'x' * 10000}, raw=True)"


BIG_FLOOD = ("from IPython.display import display\nfor i in range(60):\n"
             "    display({'text/html': '<p>' + 'x' * 20_000_000 + '</p>'}, raw=True)\ni = 19999")


BIG_FLOOD_API = BIG_FLOOD.replace("range(60)", "range(20)")
"""400 MB: the engine carries the api transport's stream at about 100 MB/s here (ipc about
twice that), and what the host has not read yet waits in the sandbox's kernel, so 60 messages
of 20 MB ran the 1 GiB sandbox out of memory in some runs (the sandbox's own limit, reported as
such); 20 keep it near 0.5 GiB."""


@pytest.mark.parametrize(("name", "flood", "bound"), [
    ("local", FLOOD, 80), ("docker", FLOOD, 80), ("docker_api", FLOOD, 80),
    # 1.2 GB in 60 messages near the frame bound: measured +171 (local) and +190 MiB (docker);
    # +858 and +572 MiB while libzmq's IOPub queue took 1000 messages of any size
    ("local", BIG_FLOOD, 320), ("docker", BIG_FLOOD, 320),
    # measured +114 to +152 MiB; the bridge counts what waits in libzmq's queue until the client
    # read it (test_docker_wire), and the relay in the sandbox holds 8 MiB beyond one message
    ("docker_api", BIG_FLOOD_API, 320)])
def test_a_flood_keeps_the_wrappers_memory_bounded_and_the_cell_ends(name, flood, bound):
    """200 MB of output in 20000 messages, or 1.2 GB in 60: the budget (10 MiB) shows its marker,
    the wrapper holds a bounded amount meanwhile (the flood waits in the sandbox), and the next
    cell works."""
    with kernel(name) as (km, kc):
        flooded(km, kc, flood, bound)


@pytest.mark.parametrize("name", ["local", "docker"])
def test_a_flood_through_the_magic_keeps_the_notebook_kernels_memory_bounded_and_the_cell_ends(name):
    """The same through ``%%sandbox``: the notebook's own kernel is the host that holds what
    waits (measured +5 MiB on both)."""
    with host_kernel(name) as (km, kc):
        flooded(km, kc, FLOOD, 80, f"%%sandbox --backend {backend_of(name)}\n")


def flooded(km, kc, flood: str, bound: int, prefix: str = "") -> None:
    """Run ``flood`` (after ``prefix``, the magic's line) while sampling the RSS of the kernel
    process ``km`` started: it grows less than ``bound`` MiB, the budget's marker shows, the
    cell ends, and the next cell sees ``i == 19999``."""
    host = psutil.Process(km.provisioner.process.pid)
    run(kc, prefix + "1")
    base, peak, done = host.memory_info().rss, [0], threading.Event()

    def sample() -> None:
        while not done.wait(0.05):
            peak[0] = max(peak[0], host.memory_info().rss)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        reply, outputs = run(kc, prefix + flood, timeout=120)
    finally:
        done.set()
        sampler.join()
    assert reply["status"] == "ok"
    assert "output limit of 10 MiB reached" in stdout(outputs, "stderr")
    assert peak[0] - base < bound * 1024**2  # FLOOD: +27 to +41 MiB; +106 MiB when the api bridge held all
    assert stdout(run(kc, prefix + "print(i)")[1]) == "19999\n"


@pytest.mark.parametrize("name", ["local", "docker"])
def test_bursts_through_the_magic_arrive_whole(name):
    with host_kernel(name) as (_, kc):
        magic = f"%%sandbox --backend {backend_of(name)}\n"
        run(kc, magic + "1")  # (its start-up progress is a display)
        bursts(kc, magic)
        assert stdout(run(kc, magic + "print(i)")[1]) == "4999\n"


@pytest.mark.parametrize("name", ["local", "docker"])
def test_a_burst_from_a_sandbox_thread_between_cells_arrives_whole(name):
    with kernel(name) as (_, kc):
        run(kc, "import threading, time\nfrom IPython.display import display\n"
                "def burst():\n    time.sleep(0.5)\n    for i in range(5000):\n        display(i)\n"
                "    print('end', flush=True)\nthreading.Thread(target=burst).start()")
        outputs, ended = [], False
        while not ended:  # the thread's output arrives outside any cell
            outputs.append(kc.get_iopub_msg(timeout=30))
            ended = stdout(outputs[-1:]) == "end\n"
        assert shown(outputs, "display_data") == EXPECTED
        assert stdout(run(kc, "print(burst.__name__)")[1]) == "burst\n"


def test_a_frontend_that_reads_late_gets_every_message_of_the_magic_and_the_idle():
    """The host kernel's own IOPub (a plain python3 ipykernel) used to drop past 1000 queued
    messages, silently, for a frontend reading late: 9487 of 10000 displays and the cell's idle
    arrived before ``%load_ext magics`` set ``XPUB_NODROP`` on it."""
    with host_kernel("local") as (_, kc):
        magic = "%%sandbox --backend local\n"
        run(kc, magic + "1")
        msg_id = kc.execute(magic + "from IPython.display import display\nfor i in range(10000):\n    display(i)")
        time.sleep(6)  # a frontend busy while the burst arrives
        values, idle = displays_until_idle(kc, msg_id, timeout=60)
        assert idle and values == [str(i) for i in range(10000)]


@pytest.mark.parametrize("name", ["local", "docker", "docker_api"])
def test_bursts_through_the_python_api_arrive_whole(name):
    """The API's path (the backend in this process, no wrapper kernel): 5000 displays and 5000
    updates of one display id, twice, each event passed to ``on_output`` in order."""
    with targets.env_vars(prepared(name).kernel_env):
        sandbox = Sandbox(backend_of(name), **prepared(name).traits)
    with sandbox:
        for _ in range(2):
            assert [d.data["text/plain"] for d in sandbox.run(DISPLAYS).displays] == EXPECTED
            updates: list[str] = []
            result = sandbox.run(UPDATES, on_output=lambda e: isinstance(e, Display) and e.update
                                 and updates.append(e.data["text/plain"]))
            assert result.status == "ok" and result.stderr == "" and updates == EXPECTED
        assert sandbox.run("print(i)").stdout == "4999\n"

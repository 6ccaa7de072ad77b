"""Checkpoints of a sandbox's whole kernel process (docs/how-to/checkpoints.md), on the real backends:
state that pickle cannot carry comes back by value after undo, restore N and a kernel killed
from outside; restores are repeatable; restart keeps the checkpoints; the bounds hold and 50
cycles leave nothing behind; the keeper's socket is its user's only."""

from __future__ import annotations

import json
import os
import re
import stat
import time

import pytest

from sandbox_kernel import Sandbox
from sandbox_kernel.core.errors import CheckpointError, SandboxDied
from tests import targets
from tests.support.backends import prepared

pytestmark = pytest.mark.kernel

BACKENDS = ["local", "docker"]
TIER = {"local": "kernel", "docker": "docker"}
"""The tier of each backend's cases (tests/plugin/tiers.py marks a ``name`` parameter's itself)."""
DATAFRAME_BYTES = 200 * 1024**2

STATE = f"""
import os, re, sqlite3, threading, json
import numpy as np, pandas as pd
from sklearn.linear_model import LogisticRegression
with open('lines.txt', 'w') as w:
    w.write(''.join(f'line {{i}}\\n' for i in range(5000)))
f = open('lines.txt')
for _ in range(10):
    f.readline()
gen = (i * i for i in range(1000))
for _ in range(5):
    next(gen)
db = sqlite3.connect(':memory:')
db.executescript('pragma temp_store=file; pragma cache_size=-64; create temp table t(x, pad)')
db.executemany('insert into t values (?, ?)', [(i, 'p' * 200) for i in range(20000)])
ev = threading.Event()
ev.set()
results = []
worker = threading.Thread(target=lambda: results.append(sum(range(10_000))))
worker.start()
worker.join()
rx = re.compile(r'(a+)b')
X = np.random.RandomState(0).rand(300, 3)
model = LogisticRegression().fit(X, (X.sum(1) > 1.5).astype(int))
df = pd.DataFrame(np.random.RandomState(1).rand({DATAFRAME_BYTES} // 32, 4))


def fingerprint():
    return json.dumps({{
        'line': f.readline(), 'offset': f.tell(), 'gen': next(gen), 'event': ev.is_set(),
        'sqlite': db.execute('select count(*), sum(x) from t').fetchone(), 'thread': results,
        'regex': rx.match('aab').group(1), 'model': model.predict_proba(X[:5]).round(9).tolist(),
        'df': int(pd.util.hash_pandas_object(df).sum() % 2**61), 'df_bytes': int(df.memory_usage().sum()),
        'spilled': any(target(d).endswith('(deleted)') for d in os.listdir('/proc/self/fd'))}})


def target(fd):
    try:
        return os.readlink(f'/proc/self/fd/{{fd}}')
    except OSError:  # closed meanwhile (the kernel's threads open and close their own)
        return ''
"""
"""A namespace pickle cannot carry (an open file mid-read, a generator half consumed, a sqlite
connection whose temporary table spilled to a deleted file, a threading.Event and a thread's
result, a compiled regex, a fitted scikit-learn model, a 200 MB DataFrame), and
``fingerprint()``: its values as JSON (consuming the file and the generator the same way)."""

MUTATE = ("f.readline(); next(gen); db.execute('delete from t where x % 2 = 0'); ev.clear(); results.append(0); "
          "model.fit(X[:50], (X[:50, 0] > 0.5).astype(int)); df.iloc[:, :] = 0.0; rx = re.compile('(a)a+b')")
"""Changes every part of :data:`STATE` (the DataFrame's every page)."""


def fingerprint(sb) -> dict:
    import ast

    return json.loads(ast.literal_eval(sb.run("fingerprint()").text))


@pytest.fixture(scope="module", params=[pytest.param(name, marks=getattr(pytest.mark, TIER[name])) for name in BACKENDS])
def sb(request):
    """One sandbox per backend, holding :data:`STATE`, a checkpoint after every cell."""
    name = request.param
    with targets.env_vars(prepared(name).kernel_env):
        options = {**prepared(name).traits, "checkpoint_min_seconds": 0}
        if name == "docker":  # room for the state, its changed copy and the checkpoints' (the pressure test below)
            options.update(packages=["scikit-learn==1.9.1"], build_wheelhouse=str(WHEELS / "x86_64"), memory_limit="2g")
        sandbox = Sandbox(name, **options)
    with sandbox:
        ran = sandbox.run(STATE)
        assert ran.error is None, ran.error
        sandbox.checkpoint("state")  # named: the unnamed go first past checkpoint_keep, whatever the cases ran
        sandbox.kind = name
        yield sandbox


WHEELS = __import__("pathlib").Path(__file__).resolve().parents[1] / "build" / "test-wheels"


def test_state_pickle_cannot_carry_comes_back_by_value_after_undo_and_restore_n(sb):
    setup = sb.checkpoints()[-1]  # after the cell that made the state
    expected = fingerprint(sb)  # its values (reading the file and the generator on)
    assert expected["spilled"] is True, "the temporary table did not spill to a deleted file"
    sb.restore(setup.cell)  # as the setup left it again
    sb.run(MUTATE)
    undone = sb.undo()  # the state before MUTATE's cell: the setup's
    assert undone.id == setup.id and fingerprint(sb) == expected
    sb.run(MUTATE)
    assert fingerprint(sb) != expected
    sb.run("x = 1")
    assert sb.restore(setup.cell).id == setup.id  # by the cell's number, again
    assert fingerprint(sb) == expected
    assert sb.run("'x' in globals()").text == "False"
    # the promoted kernel's streams are the launcher's (found by their module's name, not in __main__,
    # which is the user's namespace by then: 'No module named PromptFlushOutStream' failed each restore)
    assert sb.run("type(__import__('sys').stdout).__name__").text == "'PromptFlushOutStream'"


def test_four_forks_carry_the_state_by_value_and_are_isolated(sb):
    sb.restore("state")
    expected = fingerprint(sb)
    sb.restore("state")  # the cell above took a checkpoint: with the module's earlier cases, past the keep of 10
    forks = sb.fork(4)
    try:
        assert all(fingerprint(f) == expected for f in forks)  # each its own file offset and generator
        for i, f in enumerate(forks):
            f.run(f"mine = {i}; df.iloc[0, 0] = {i}")
        seen = [f.run("(mine, float(df.iloc[0, 0]), 'x' in globals())").text for f in forks]
        assert seen == [f"({i}, {float(i)}, False)" for i in range(4)]
        assert sb.run("'mine' in globals(), float(df.iloc[0, 0]) >= 1.0").text == "(False, False)"
        kept = forks[2].checkpoint("fork2")
    finally:
        for f in forks:
            f.close()
    held = len(sb.checkpoints())
    assert processes(sb)["kernel"] == 1 + held  # the forks are gone (the probe's own checkpoint comes after it)
    sb.restore(kept)
    assert sb.run("mine").text == "2"


def test_a_kernel_killed_from_outside_comes_back_on_its_last_checkpoint(sb):
    sb.restore("state")
    expected_cell = sb.run("y = 'kept'").execution_count
    expected = fingerprint(sb)
    sb.restore(expected_cell)
    pid = sb.run("os.getpid()").text
    kill = f"import os, signal, threading, time\nthreading.Thread(target=lambda: (time.sleep(0.3), " \
           f"os.kill({pid}, signal.SIGKILL))).start()\ntime.sleep(30)"
    with pytest.raises(SandboxDied, match="killed by SIGKILL.*the next cell runs on the state after cell"):
        sb.run(kill)
    recovered = sb.run("y")
    assert "this cell runs on the state after cell" in recovered.stderr and recovered.text == "'kept'"
    del expected["line"], expected["offset"], expected["gen"]  # the checkpoint is the one after `y`'s cell
    assert {k: v for k, v in fingerprint(sb).items() if k not in ("line", "offset", "gen")} == expected


def test_restart_is_a_fresh_interpreter_and_restore_brings_the_state_back(sb):
    cell = sb.run("z = 42").execution_count
    old = json.loads(sb.run("import os, subprocess, json\n"
                            "child = subprocess.Popen(['sleep', '600'])\n"
                            "print(json.dumps([os.getpid(), child.pid]))").stdout)
    sb.restart()  # it holds checkpoints: the same sandbox, nothing of the old interpreter (one cell: numbers restart)
    fresh = sb.run("import os, json, time\n"
                   "for _ in range(50):  # the old kernel's process group is killed, and reaped by the keeper\n"
                   f"    if not os.path.exists('/proc/{old[1]}'):\n"
                   "        break\n"
                   "    time.sleep(0.1)\n"
                   f"print(json.dumps(['z' in globals() or 'child' in globals(), os.getpid() == {old[0]}, "
                   f"os.path.exists('/proc/{old[1]}')]))")
    assert json.loads(fresh.stdout) == [False, False, False]
    sb.restore(cell)
    assert sb.run("z").text == "42"


def test_no_checkpoint_and_a_bad_name_are_one_line(sb):
    # "after cell 1 and named state" or "after cells 1, 3 ...": what the module's earlier cases left
    with pytest.raises(CheckpointError, match=r"No checkpoint after cell 9999\. There are checkpoints after cells? \d"):
        sb.restore(9999)
    with pytest.raises(CheckpointError, match="not a checkpoint name"):
        sb.checkpoint("3rd")
    taken = sb.checkpoint("clean")
    assert sb.restore("clean").id == taken.id


# -- bounds, leftovers, permissions ---------------------------------------------------------------
def processes(sb) -> dict[str, int]:
    """How many processes the sandbox runs: ``kernel`` (the kernel and its checkpoints: the same
    command line) and ``keeper``, seen from its kernel."""
    code = ("import os, json\nmine = open('/proc/self/cmdline').read()\ncount = {'kernel': 0, 'keeper': 0}\n"
            "for p in filter(str.isdigit, os.listdir('/proc')):\n    try:\n        line = open(f'/proc/{p}/cmdline').read()\n"
            "    except OSError:\n        continue\n    count['kernel'] += line == mine\n"
            "    count['keeper'] += 'keeper.py' in line and os.path.dirname(line.split('\\0')[1]) == "
            "os.path.dirname(mine.split('\\0')[1])\nprint(json.dumps(count))")
    return json.loads(sb.run(code).stdout)


@pytest.mark.parametrize("name", BACKENDS)
def test_fifty_cycles_keep_the_bounds_and_leave_nothing_behind(name, tmp_path):
    with targets.env_vars(prepared(name).kernel_env):
        sandbox = Sandbox(name, **prepared(name).traits, checkpoint_min_seconds=-1, checkpoint_keep=3)
    with sandbox:
        sandbox.run("n = 0")
        for i in range(50):
            taken = sandbox.checkpoint()
            sandbox.run(f"n = {i + 1}")
            sandbox.restore(taken)
            assert sandbox.run("n").text == str(i)
            sandbox.run(f"n = {i + 1}")
        kept = sandbox.checkpoints()
        assert len(kept) == 3 and [c.id for c in kept] == sorted(c.id for c in kept)
        assert processes(sandbox) == {"kernel": 1 + 3, "keeper": 1}  # the kernel, its three checkpoints
        runtime = sandbox.aio.backend._runtime if name == "local" else None
        tree = _descendants(sandbox.aio.backend._proc.pid) if name == "local" else []
    if runtime is not None:  # local: its folders and every process are gone (not even a zombie is left)
        assert not runtime.exists()
        left = [p for p in os.listdir("/proc") if p.isdigit() and str(runtime) in _cmdline(p)]
        assert not left
        assert len(tree) == 1 + 3 and not [pid for pid in tree if os.path.exists(f"/proc/{pid}")]


@pytest.mark.kernel
def test_close_returns_when_the_kernel_its_checkpoints_and_their_children_are_gone():
    """Nothing of a local sandbox runs (nor is a zombie) the moment its close returns: the kernel
    and its checkpoints are in sessions of their own, so they ended a moment after the keeper
    (two were left under load), and a process the cell started in a session of its own ran on."""
    with targets.env_vars(prepared("local").kernel_env):
        sandbox = Sandbox("local", **prepared("local").traits, checkpoint_min_seconds=-1)
    with sandbox:
        sandbox.run("import subprocess\nimport numpy as np\na = np.ones(16 * 1024**2)\n"  # 128 MiB: an exit that takes a while
                    "sleeper = subprocess.Popen(['sleep', '600'], start_new_session=True)")
        for value in (2, 3):
            sandbox.checkpoint()
            sandbox.run(f"a[:] = {value}")  # each checkpoint holds its own copy
        tree = _descendants(sandbox.aio.backend._proc.pid)
        assert processes(sandbox) == {"kernel": 1 + 2, "keeper": 1} and len(tree) == 1 + 2 + 1  # and the sleeper
    left = {pid: _cmdline(str(pid)) or "(zombie)" for pid in tree if os.path.exists(f"/proc/{pid}")}
    assert not left


def _descendants(pid: int) -> list[int]:
    """The pids of ``pid``'s descendants (``/proc/PID/task/TID/children``)."""
    found, queue = [], [pid]
    while queue:
        parent = queue.pop()
        for task in os.listdir(f"/proc/{parent}/task"):
            children = [int(child) for child in open(f"/proc/{parent}/task/{task}/children").read().split()]
            found, queue = found + children, queue + children
    return found


def _cmdline(pid: str) -> str:
    try:
        return open(f"/proc/{pid}/cmdline").read().replace("\0", " ")
    except OSError:
        return ""


@pytest.mark.parametrize("name", BACKENDS)
def test_the_oldest_go_first_past_max_bytes_and_the_socket_is_the_users_own(name):
    with targets.env_vars(prepared(name).kernel_env):
        sandbox = Sandbox(name, **prepared(name).traits, checkpoint_min_seconds=-1, checkpoint_max_bytes="64m")
    with sandbox:
        sandbox.run("import numpy as np\na = np.ones(12 * 1024**2)")  # 96 MiB
        first = sandbox.checkpoint("first")
        sandbox.run("a[:] = 2")  # the first now holds 96 MiB of its own
        second = sandbox.checkpoint("second")
        deadline = time.monotonic() + 30  # measured at a new checkpoint and every 2 s
        while time.monotonic() < deadline and [c.name for c in sandbox.checkpoints()] != ["second"]:
            time.sleep(0.1)
        assert [c.id for c in sandbox.checkpoints()] == [second.id], first
        backend = sandbox.aio.backend
        if name == "local":
            assert os.stat(backend._runtime).st_mode & 0o777 == 0o700
            socket_path = backend._runtime / "keeper"
        else:
            socket_path = backend._hostdir / "keeper" if backend._hostdir is not None else None
        if socket_path is not None:
            assert stat.S_IMODE(os.stat(socket_path).st_mode) == 0o600


@pytest.mark.docker
def test_checkpoints_give_their_memory_back_to_a_cell_that_needs_it():
    """Under the container's limit the checkpoints' memory is the kernel's first: the keeper drops
    the oldest past 85 % of the limit, and when the OOM killer was faster (it takes the kernel
    first), the next cell runs on the newest checkpoint and the older ones are gone, so the cell
    fits when run again."""
    name = "docker"
    with targets.env_vars(prepared(name).kernel_env):
        sandbox = Sandbox(name, **prepared(name).traits, memory_limit="512m", checkpoint_min_seconds=0)
    with sandbox:
        sandbox.run("import numpy as np\na = np.ones(12 * 1024**2)")  # 96 MiB, checkpointed
        for value in (2, 3):  # each checkpoint before holds 96 MiB of its own
            sandbox.run(f"a[:] = {value}")
        assert len(sandbox.checkpoints()) == 3
        grow = "b = np.ones(26 * 1024**2); int(b.sum())"  # 208 MiB: fits beside a, not beside the checkpoints
        try:
            done = sandbox.run(grow)
        except SandboxDied as exc:
            assert exc.restored and "ran out of memory" in str(exc)
            done = sandbox.run(grow)
        assert done.text == str(26 * 1024**2)
        assert len(sandbox.checkpoints()) <= 2 and sandbox.run("int(a[0])").text == "3"


def test_checkpoints_turned_off_are_said_in_one_line():
    with Sandbox("local", checkpoints=False) as sandbox:
        sandbox.run("x = 1")
        with pytest.raises(CheckpointError, match=re.escape("Checkpoints are turned off for this sandbox "
                                                            "(--LocalBackend.checkpoints=False).")):
            sandbox.undo()
        assert processes(sandbox) == {"kernel": 1, "keeper": 0}


def test_the_kernels_lines_say_what_they_did():
    """``%sandbox checkpoints | undo | restore N|NAME | checkpoint NAME`` through a real kernel."""
    from tests.kernels import kernel, run, stdout

    def cell(kc, code):
        reply, outputs = run(kc, code, timeout=120)
        errors = [m["content"]["evalue"] for m in outputs if m["header"]["msg_type"] == "error"]
        return reply, (stdout(outputs) + stdout(outputs, "stderr")).strip(), errors

    with kernel("local", "--LocalBackend.checkpoint_min_seconds=0") as (_, kc):
        first = cell(kc, "x = 1")[0]["execution_count"]
        cell(kc, "x = 2")
        _, table, _ = cell(kc, "%sandbox checkpoints")
        assert table.splitlines()[0].split() == ["cell", "name", "taken", "size"]
        assert "2 checkpoints" in table and "%sandbox undo" in table
        _, said, _ = cell(kc, "%sandbox undo")
        assert said.startswith(f"Undone cell {first + 1}: the sandbox runs on the state after cell {first}, taken")
        assert cell(kc, "print(x)")[1] == "1"
        assert cell(kc, "%sandbox checkpoint clean")[1] == f"Checkpoint taken: the state after cell {first + 2} " \
                                                          "(checkpoint 'clean')."
        cell(kc, "x = 3")
        assert cell(kc, "%sandbox restore clean")[1].startswith("Restored: the sandbox runs on the state after cell")
        assert cell(kc, "print(x)")[1] == "1"
        reply, _, errors = cell(kc, "%sandbox restore 99")
        assert reply["status"] == "error" and errors[0].startswith("No checkpoint after cell 99. There are checkpoints")


def test_the_magic_s_lines_say_what_they_did(tmp_path, monkeypatch):
    """The same verbs at the magic (the %sandbox table's entries, one answer for both doors), on a
    real local sandbox named with --name."""
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    def magic(code: str) -> tuple[bool, str]:
        with capture_output() as captured:
            result = shell.run_cell(code)
        return result.success, (captured.stdout + captured.stderr).strip()

    monkeypatch.chdir(tmp_path)
    shell = InteractiveShell.instance()
    shell.run_cell("%load_ext magics")
    try:
        assert magic("%%sandbox --backend local --name ck --checkpoint-min-seconds 0\nx = 1")[0]  # a slow start says so
        assert magic("%%sandbox --name ck\nx = 2") == (True, "")
        ok, table = magic("%sandbox checkpoints --name ck")
        assert ok and table.splitlines()[0].split() == ["cell", "name", "taken", "size"] and "2 checkpoints" in table
        ok, said = magic("%sandbox undo --name ck")
        assert ok and said.startswith("Undone cell 2: the sandbox runs on the state after cell 1, taken"), said
        assert magic("%%sandbox --name ck\nprint(x)") == (True, "1")
        assert magic("%sandbox checkpoint clean -n ck")[1].endswith("(checkpoint 'clean').")
        magic("%%sandbox --name ck\nx = 3")
        ok, said = magic("%sandbox restore clean --name ck")
        assert ok and said.startswith("Restored: the sandbox runs on the state after cell"), said
        assert magic("%%sandbox --name ck\nprint(x)") == (True, "1")
        ok, said = magic("%sandbox restore --name ck")
        assert not ok and said.startswith("UsageError: restore takes 1 argument, not 0") and said.count("\n") == 0
    finally:
        shell.run_cell("%sandbox stop --all")


@pytest.mark.parametrize("engine", [pytest.param("podman", marks=[pytest.mark.docker, pytest.mark.xdist_group("podman")]),
                                    pytest.param("runsc", marks=pytest.mark.docker)])
def test_undo_recovery_and_forks_under_podman_and_gvisor(engine, docker_client):
    """The same mechanism on Podman's engine (the engine-API transport; the Podman targets' one
    group, tests/plugin/tiers.py) and under gVisor's runsc (no child subreaper there: a promoted
    kernel's end is its keeper connection's)."""
    # Under runsc pids_limit counts runsc's own host threads: this sandbox, its checkpoints and two
    # forks took 247 of the default 256 on a quiet machine (about 95 at start), and runsc stopped the
    # sandbox under load; the limit is the scenario's need, and a fork past it is refused (below).
    name, extra = ("podman", {}) if engine == "podman" else ("docker", {"runtime": "runsc", "pids_limit": 512})
    if engine == "runsc" and "runsc" not in (docker_client.info().get("Runtimes") or {}):
        targets.skip_or_fail("the Docker engine has no runsc runtime; run `bash .ci/docker-setup.sh` as root")
    with targets.env_vars(prepared(name).kernel_env):
        sandbox = Sandbox(targets.backend_of(name), **prepared(name).traits, checkpoint_min_seconds=0, **extra)
    with sandbox:
        sandbox.run("import os\nf = open('/etc/os-release'); f.readline()\nx = 1")
        sandbox.run("x = 2; f.readline()")
        assert sandbox.undo().cell is not None
        assert sandbox.run("x, f.tell()").text == "(1, 45)"
        pid = sandbox.run("os.getpid()").text
        # under gVisor a promoted kernel is not the keeper's child: its status is not known
        with pytest.raises(SandboxDied, match="(killed by SIGKILL|its kernel ended).*the next cell runs on the state "
                                              "after cell"):
            sandbox.run(f"import signal; os.kill({pid}, signal.SIGKILL)")
        recovered = sandbox.run("x")
        assert "this cell runs on the state after cell" in recovered.stderr and recovered.text == "1"
        forks = sandbox.fork(2)
        try:
            assert [f.run("x = x + 10; x").text for f in forks] == ["11", "11"]
            assert sandbox.run("x").text == "1"
            if engine == "runsc":  # no room: refused in one line, the sandbox runs on
                with pytest.raises(CheckpointError, match=r"^No room for 10 forks in this gVisor sandbox: \d+ of its "
                                                          r"pids_limit \(512\) are in use"):
                    sandbox.fork(10)
                assert sandbox.run("x").text == "1"
        finally:
            for f in forks:
                f.close()


@pytest.mark.docker
def test_a_fork_bomb_at_the_pids_limit_keeps_the_checkpoints():
    """The pids reaper stops the fork bomb's processes, not the keeper nor the snapshots (each leads
    a process group of its own), and waits only for the children it killed: with a snapshot held it
    waited for the snapshot too, and the cell ended 'The sandbox did not answer within 30 s'. The
    cell's own checkpoint, which cannot fork at the limit, is one line, never IPython's traceback."""
    name = "docker"
    with targets.env_vars(prepared(name).kernel_env):
        sandbox = Sandbox(name, **prepared(name).traits, checkpoint_min_seconds=0)
    bomb = ("import os, time\nforked = failed = 0\nfor _ in range(2000):\n    try:\n        if os.fork() == 0:\n"
            "            time.sleep(600)\n            os._exit(0)\n        forked += 1\n    except BlockingIOError:\n"
            "        failed += 1\nprint(forked < 256, failed > 0)")
    with sandbox:
        kept = sandbox.run("kept = 'yes'").execution_count
        done = sandbox.run(bomb)
        assert done.stdout == "True True\n" and "Error in callback" not in done.stdout + done.stderr
        assert "reached its process limit" in done.stderr
        cells = [c.cell for c in sandbox.checkpoints()]
        said = f"[no checkpoint after cell {done.execution_count}: the kernel could not fork ("
        assert (said in done.stderr) != (done.execution_count in cells)  # no room for its fork, or a slot was free
        assert kept in cells
        sandbox.run("kept = 'changed'")
        sandbox.restore(kept)
        assert sandbox.run("kept").text == "'yes'"

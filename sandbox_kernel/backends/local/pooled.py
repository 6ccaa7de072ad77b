"""The local backend's warm pool (see :mod:`sandbox_kernel.backends.pool`): pooled kernels are
processes in their own session, each waiting on a claim socket; the session that takes one
connects and holds the connection, and the kernel ends when it closes (or, untaken, after
``pool_ttl``)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jupyter_client.connect import write_connection_file
from jupyter_client.launcher import launch_kernel

from ...core.errors import SandboxStartError
from ...runtime.owners import owner_is_gone
from ...runtime.owners import start_time as _start_time
from .. import pool
from ..kernel_client.launcher import IOPUB_APP, READY_LINE, READY_VARIABLE


def sweep() -> None:
    """Pooled kernels no session can use: a claimed one whose session's process is gone (its
    claim socket closed, so it ended: only its directories are left), a waiting one that died."""
    for record in pool.claimed_records("local"):
        if owner_is_gone(record.get("claimed_by", "")):
            remove_pooled(record)
            pool.release("local", record["name"])
    for registry, record in pool.waiting_records("local"):
        if not pooled_alive(record) and registry.withdraw(record["name"]):
            remove_pooled(record)


def pooled_alive(record: dict[str, Any]) -> bool:
    return _start_time(int(record.get("pid", 0))) == record.get("started")


def remove_pooled(record: dict[str, Any]) -> None:
    if pooled_alive(record):
        with contextlib.suppress(OSError):
            os.killpg(record["pid"], signal.SIGKILL)
    for path in (record.get("scratch"), record.get("runtime")):
        if path and Path(path).name.startswith(POOL_PREFIX):
            shutil.rmtree(path, ignore_errors=True)


POOL_PREFIX = "sandbox-local-pool-"
CLAIM_SOCKET = "claim.sock"
POOLED_LAUNCH = """\
import os, socket, sys, threading
if sys.path and sys.path[0] == {runtime!r}:
    del sys.path[0]


def _end_with_the_session(listener):
    # A pooled kernel: the session that takes it connects here and holds the connection;
    # when it closes (that process ended), so does this kernel. Nobody within the TTL: ends.
    listener.settimeout({ttl!r})
    try:
        connection, _ = listener.accept()
    except OSError:
        os._exit(0)
    listener.close()
    connection.settimeout(None)
    try:
        while connection.recv(1024):
            pass
    except OSError:
        pass
    os._exit(0)


_listener = socket.socket(socket.AF_UNIX)
_listener.bind({claim!r})
_listener.listen(1)
threading.Thread(target=_end_with_the_session, args=(_listener,), daemon=True).start()
"""


def process_memory(pid: int) -> int | None:
    """Bytes of resident memory of process ``pid`` (``VmRSS`` in ``/proc/PID/status``; Linux), or None."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    match = re.search(r"^VmRSS:\s+(\d+) kB", status, re.M)
    return int(match.group(1)) * 1024 if match else None


def process_cpu_seconds(pid: int) -> float | None:
    """CPU seconds process ``pid`` and its waited-for children used (``utime + stime + cutime +
    cstime`` in ``/proc/PID/stat``; Linux), or None."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return sum(int(tick) for tick in fields[11:15]) / os.sysconf("SC_CLK_TCK")


class PooledProcess:
    """A pooled kernel's process, which this process did not start: ``poll`` and ``pid`` as
    ``subprocess.Popen`` has them; its exit status is not known here."""

    def __init__(self, pid: int, started: str | None) -> None:
        self.pid, self._started, self.returncode = pid, started, None

    def poll(self) -> int | None:
        return None if _start_time(self.pid) == self._started else -1

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            os.killpg(self.pid, signal.SIGKILL)

    def wait(self, timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        while self.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a process of another user counts; a zombie, killed and not
    yet reaped by its parent, does not: :func:`~sandbox_kernel.runtime.owners.start_time`)."""
    return _start_time(pid) is not None




def pool_status(asked: bool = False) -> list[dict[str, Any]]:
    """``sandbox-kernel pool status``: this host's waiting pooled kernels (name, key, seconds
    waited, resident memory in bytes)."""
    return [{"name": record["name"], "key": registry.key, "waited_s": time.time() - record.get("offered", time.time()),
             "memory_bytes": process_memory(record["pid"]) if pooled_alive(record) else None}
            for registry, record in pool.waiting_records("local")]


def pool_stop(asked: bool = False) -> list[str]:
    """``sandbox-kernel pool stop``: end this host's waiting pooled kernels; returns their names."""
    removed = []
    for registry, record in pool.waiting_records("local"):
        if registry.withdraw(record["name"]):
            remove_pooled(record)
            removed.append(record["name"])
    return removed


COMPLETER_CACHES = "sandbox-kernel/jedi-caches"
"""Where the local sandboxes' jedi caches are published, under this user's cache directory
(``$XDG_CACHE_HOME``, else ``~/.cache``): one folder per interpreter, holding what IPython's
completer parses once (typeshed's stubs of the builtins: 1.3-1.7 s, the first Tab's cost in an
empty cache). A sandbox whose completion warm-up answered publishes its cache whole
(:func:`publish_completer`), and every later sandbox starts with a copy of it
(:func:`seed_completer`), as python3 reads ``~/.cache/jedi``. No sandbox writes into a published
folder: parso writes its cache files in place (``open(path, "wb")``), so a kernel killed while
writing one left it truncated, and while the sandboxes shared one folder (``sandbox-kernel/jedi``,
no longer read) every later sandbox's completion raised ``EOFError`` inside jedi and answered
nothing, until the folder was deleted (jedi's issues #1891 and #2067: a corrupt cache file is not
recovered from)."""


def _caches_root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / COMPLETER_CACHES


def completer_cache(python: str) -> Path:
    """The published jedi cache of the local sandboxes that run ``python`` (it may not exist yet)."""
    return _caches_root() / hashlib.sha256(python.encode()).hexdigest()[:16]


def completer_seeded(home: Path) -> bool:
    """Whether the sandbox whose HOME is ``home`` started with jedi's cache built: it got a copy
    of a published one (:func:`seed_completer`). Its own jedi makes the folder only at its first
    completion, which comes after the start."""
    return (home / ".cache" / "jedi").is_dir()


def make_home(scratch: Path) -> Path:
    """``SCRATCH/home``, the kernel's HOME, with an empty ``.cache`` (see :func:`seed_completer`)."""
    home = scratch / "home"
    (home / ".cache").mkdir(parents=True)
    return home


def seed_completer(home: Path, python: str) -> None:
    """Copy the published jedi cache of ``python``'s sandboxes, if there is one, into
    ``HOME/.cache/jedi``: about 6 MB, 25 ms here, so it runs beside the kernel's boot (a
    kernel's jedi reads its cache at its first completion, which comes after the start). Copied
    into a folder of its own, then renamed into place: a sandbox whose jedi made its folder
    first keeps it. Blocking."""
    published = completer_cache(python)
    if not published.is_dir():
        return
    copy = home / ".cache" / f".jedi-{secrets.token_hex(4)}"
    try:
        shutil.copytree(published, copy)
        copy.rename(home / ".cache" / "jedi")
    except OSError:  # published meanwhile, half-removed, or the folder exists: the sandbox builds its own
        shutil.rmtree(copy, ignore_errors=True)


WHOLE_PICKLES = """import pickletools, sys
for name in sys.argv[1:]:
    with open(name, "rb") as f:
        for _ in pickletools.genops(f):
            pass
        if f.read(1):
            sys.exit(name + ": data after its STOP")
"""
"""Checks that each file named on its command line holds one whole pickle, read opcode by opcode up
to its STOP without running any (a truncated file ends before it; the files come from a sandbox);
exits non-zero otherwise."""


def _whole_pickles(paths: list[Path]) -> bool:
    """Whether each of ``paths`` holds one whole pickle (:data:`WHOLE_PICKLES`), checked in a
    process of its own: 4.6 MB of jedi's cache take about a second of pure Python, which in this
    process would hold the GIL from the kernel's relay."""
    check = subprocess.run([sys.executable, "-S", "-E", "-c", WHOLE_PICKLES, *map(str, paths)],
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
    return check.returncode == 0


STALE_COPY_S = 600.0
"""Seconds after which a copy left beside the published caches is a killed publisher's, removed."""


def publish_completer(home: Path, python: str) -> bool:
    """Publish the jedi cache a sandbox's warm-up built (``HOME/.cache/jedi``) as the cache of
    ``python``'s sandboxes, unless one is published already: copied into a folder beside it,
    each file checked to be one whole pickle, then renamed into place in one step, so that no
    sandbox ever copies a cache half-written or damaged. Returns whether it was published.
    Blocking (about a second, once per interpreter: it runs after the warm-up, in a thread)."""
    published = completer_cache(python)
    source = home / ".cache" / "jedi"
    if published.exists() or not source.is_dir():
        return False
    published.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    for stale in published.parent.glob(".*"):  # a copy whose wrapper was killed while checking it
        with contextlib.suppress(OSError):
            if time.time() - stale.stat().st_mtime > STALE_COPY_S:
                shutil.rmtree(stale, ignore_errors=True)
    copy = published.parent / f".{published.name}-{secrets.token_hex(4)}"
    try:
        shutil.copytree(source, copy, ignore=shutil.ignore_patterns("*.tmp", "PARSO-CACHE-LOCK"))
        pickles = list(copy.rglob("*.pkl"))
        if not pickles or not _whole_pickles(pickles):  # none: jedi wrote nothing, nothing to share
            return False
        copy.rename(published)
        return True
    except (OSError, subprocess.SubprocessError):  # published first by another, the source gone, a stuck check
        return False
    finally:
        shutil.rmtree(copy, ignore_errors=True)


async def launch(command: Callable[[Path, str], list[str]], environment: Callable[[], dict[str, str]],
                 ttl: float, ready_timeout: float, python: str) -> tuple[str, dict[str, Any]]:
    """Start a pooled kernel: ``command(runtime, connection_file)`` (its interpreter ``python``,
    whose published jedi cache its HOME gets: :func:`seed_completer`) in a scratch directory of
    its own, in its own process session (it outlives this process), waiting on its claim
    socket for ``ttl`` seconds. Returns its name and registry record once its kernel is ready
    (within ``ready_timeout`` seconds).

    Raises:
        SandboxStartError: it did not become ready.
    """
    scratch = Path(tempfile.mkdtemp(prefix=POOL_PREFIX))
    runtime = Path(tempfile.mkdtemp(prefix=f"{POOL_PREFIX}conn-"))
    await asyncio.to_thread(seed_completer, make_home(scratch), python)
    connection_file, info = write_connection_file(str(runtime / "kernel.json"), transport="ipc", ip=str(runtime / "k"))
    claim_path = runtime / CLAIM_SOCKET
    (runtime / "launch.py").write_text(POOLED_LAUNCH.format(runtime=str(runtime), ttl=ttl, claim=str(claim_path))
                                       + IOPUB_APP)
    log = runtime / "kernel.log"
    env = {**environment(), "HOME": str(scratch / "home"), READY_VARIABLE: "1"}
    with open(log, "wb") as stderr:
        proc = launch_kernel(command(runtime, connection_file), env=env, cwd=str(scratch), independent=True,
                             stdout=subprocess.DEVNULL, stderr=stderr)
    deadline = time.monotonic() + ready_timeout  # offered once its kernel is ready
    while READY_LINE.encode() not in log.read_bytes() and proc.poll() is None and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    record = {"pid": proc.pid, "started": _start_time(proc.pid), "scratch": str(scratch), "runtime": str(runtime)}
    if READY_LINE.encode() not in log.read_bytes() or not claim_path.exists():
        remove_pooled(record)
        raise SandboxStartError(f"A pooled local kernel did not start (exit code {proc.poll()}).")
    return f"{POOL_PREFIX}{proc.pid}-{secrets.token_hex(4)}", {**record, "info": info}


def claim(record: dict[str, Any]) -> socket.socket | None:
    """Connect to a pooled kernel's claim socket, or None when it is gone. The kernel ends when
    this connection closes (this process ended, or the session removed it)."""
    if not pooled_alive(record):
        return None
    connection = socket.socket(socket.AF_UNIX)
    connection.settimeout(2.0)
    try:
        connection.connect(str(Path(record["runtime"]) / CLAIM_SOCKET))
    except OSError:
        connection.close()
        return None
    return connection

"""The ``local`` backend: an ipykernel subprocess in a fresh scratch directory.

It isolates the working directory and the environment (the kernel sees only PATH, LANG and a
HOME inside its scratch directory, plus the variables named in ``env_vars`` and set in ``env``) and
applies optional rlimits. A workspace (the notebook's folder) is bound in a mount namespace of the
kernel's own with bubblewrap, or copied into the scratch directory without it (:mod:`.view`). It is NOT a security boundary: the code runs as the same user, can read the
user's files and use the network. Use the docker or e2b backend for untrusted code.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from jupyter_client.connect import write_connection_file
from jupyter_client.launcher import launch_kernel
from traitlets import Float, Integer, Unicode

from ...core.errors import SandboxError, SandboxStartError
from ...runtime.traits import ByteSize, HostVariables, format_bytes, host_variables
from .. import pool, workspace
from ..bounded import write_chunks
from ..checkpoint import CheckpointOptions
from ..checkpoint import keeper as keeper_process
from ..checkpoint.link import KeeperLink
from ..egress import refused_allow_hosts
from ..kernel_client import KERNEL_ARGS, QUIET_KERNEL_ENV, KernelClientBackend, history_args
from ..kernel_client.forked import Forking
from ..kernel_client.launcher import IOPUB_APP
from ..pool import pool_size_trait, pool_ttl_trait
from ..usage import CpuMeter, this_machine
from . import ending, pooled, view
from .leftovers import record_kernel, remove_leftovers

ALLOWED_ENV = ("PATH", "LANG")
RLIMITS = str(Path(__file__).with_name("rlimits.py"))
"""The script that sets the kernel's resource limits and execs it (:mod:`.rlimits`), when any is set."""


def default_history_file() -> str:
    """``sandbox-kernel/history/local.sqlite`` in the Jupyter data directory (made if missing): the
    local sandboxes' IPython history, kept across sessions as python3 keeps ``~/.ipython``'s."""
    from jupyter_core.paths import jupyter_data_dir

    path = Path(jupyter_data_dir()) / "sandbox-kernel" / "history" / "local.sqlite"
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    return str(path)


class LocalBackend(CheckpointOptions, Forking):
    """A kernel process on this machine, in a scratch directory deleted at shutdown."""

    name = "local"
    capabilities = replace(KernelClientBackend.capabilities, files=True, pool=True, checkpoints=True)
    WATCH_FROM_LAUNCH = True  # its process is watched from its start

    @classmethod
    def remove_leftovers(cls) -> list[str]:
        """The scratch directories of kernels that are gone (:func:`remove_leftovers`). Blocking."""
        return remove_leftovers()

    @classmethod
    def pool_status(cls, asked: bool = False) -> list[dict[str, Any]]:
        """``sandbox-kernel pool status``: this host's waiting pooled sandboxes (see :mod:`.pooled`)."""
        return pooled.pool_status(asked)

    @classmethod
    def pool_stop(cls, asked: bool = False) -> list[str]:
        """``sandbox-kernel pool stop``: remove this host's waiting pooled sandboxes; their names."""
        return pooled.pool_stop(asked)

    python = Unicode(sys.executable, help="The Python interpreter that runs the sandbox's kernel (needs ipykernel); default: "
                                         "the one that runs the wrapper kernel (sys.executable).").tag(
        config=True
    )
    env_vars = HostVariables(help="Names of host environment variables to pass to the sandbox (never "
                                  "JupyterHub's); it gets only PATH, LANG and a HOME of its own besides.").tag(config=True)
    memory_limit = ByteSize(0, help="Address-space limit of the kernel process (RLIMIT_AS), e.g. '2g'; allocations "
                                    "past it raise MemoryError. 0: none.").tag(
        config=True
    )
    cpu_time_limit = Float(0, help="CPU seconds the kernel process may use in all (RLIMIT_CPU); past it the "
                                   "sandbox stops and the cell says why. 0: none.").tag(
        config=True
    )
    max_processes = Integer(0, help="Processes of the kernel's user (RLIMIT_NPROC: counted per user; ignored for "
                                         "root); 0: none.").tag(
        config=True
    )
    max_file_size = ByteSize(0, help="Largest file the kernel may write (RLIMIT_FSIZE); 0: none.").tag(config=True)
    history_file = Unicode("", help="Where the sandbox's IPython keeps its history (what history_request, console "
                                    "Up-arrow and %history read), across sessions like python3's; empty (default): "
                                    "sandbox-kernel/history/local.sqlite in the Jupyter data directory; ':memory:': "
                                    "this session only.").tag(config=True)
    pool_size = pool_size_trait()
    pool_ttl = pool_ttl_trait()
    allow_hosts = refused_allow_hosts("The local backend cannot limit the network: its code runs as you, with your "
                                      "network. Use the docker backend for allow_hosts (or e2b).")

    @property
    def starts_at_launch(self) -> bool:
        """Always: the sandbox is a child process that boots on another core while the wrapper
        kernel answers the frontend, so a new notebook's first result comes sooner (measured,
        start to first result against a plain ipykernel: 1.13× at launch, 1.71× at the first
        cell, 1.07× from a warm pool), and a notebook that never runs a cell costs one idle
        process."""
        return True

    @property
    def starts_quickly(self) -> bool:
        """Always: a child process, up in about 0.3 s on a quiet machine (benchmarks/first_completion.py:
        a first Tab pressed as the kernel shows ready waited 0.32-0.53 s, at most 0.66 s)."""
        return True

    @property
    def completer_cached(self) -> bool:
        """Whether this sandbox started with a copy of the jedi cache an earlier one published
        (:func:`.pooled.completer_seeded`): its first Tab reads it, and no warm-up is needed. Read
        from its own HOME, so a cache published while it started does not skip its warm-up."""
        return self._scratch is not None and pooled.completer_seeded(self._scratch / "home")

    async def _completer_warmed(self) -> None:
        """Publish the cache this sandbox's warm-up built, for the next sandboxes."""
        if self._scratch is not None:
            await asyncio.to_thread(pooled.publish_completer, self._scratch / "home", self.python)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._proc = None
        self._scratch: Path | None = None
        self._runtime: Path | None = None
        self._claim: socket.socket | None = None  # a pooled kernel's claim connection, held while it runs
        self._pooled_name: str | None = None
        self._cwd: Path | None = None  # the kernel's working directory, when not the scratch directory
        self._plan: workspace.Plan | None = None  # the workspace, when bound
        self._bwrap = False  # the kernel runs under bubblewrap (its exit status is bwrap's)
        self._keeper_runs = False  # the process launched is the keeper (or bwrap, then it), the kernel its child
        self._cpu = CpuMeter()

    @property
    def workdir(self) -> Path | None:
        """The kernel's working directory while started: the scratch directory, its ``work``
        folder (a copied or read-only workspace) or the workspace folder itself (``rw``, bound)."""
        return self._cwd or self._scratch

    def _environment(self, home: bool = True) -> dict[str, str]:
        env = host_variables((*ALLOWED_ENV, *self.env_vars))
        env.update(self.env)
        env.update(QUIET_KERNEL_ENV)
        if home:
            env["HOME"] = str(self._scratch / "home")
        return env

    def _limits(self) -> dict[str, int]:
        return {"as": self.memory_limit, "cpu": int(self.cpu_time_limit + 0.999), "nproc": self.max_processes,
                "fsize": self.max_file_size}

    def _command(self, connection_file: str, runtime: Path | None = None, keeper: bool = False) -> list[str]:
        """The kernel's command line: ``launch.py`` in ``runtime`` (default: this session's)
        under the resource limits; with ``keeper``, as the child of the keeper (``keeper.py``
        beside it, its socket ``keeper``: :mod:`..checkpoint.keeper`), which exits with the
        kernel's status as a shell does (128 + N for a signal N)."""
        runtime = runtime or self._runtime
        limits = [f"--{name}={value}" for name, value in self._limits().items() if value]
        # The script by its path, without site-packages (-S -E): as ``-m`` it imported this
        # package and jupyter_client (0.2-0.8 s before the kernel's own interpreter started).
        wrapper = [sys.executable, "-S", "-E", RLIMITS, *limits, "--"] if limits else []
        if keeper:  # outside the limits: its own CPU time must not end the sandbox
            wrapper = [self.python, str(runtime / "keeper.py"), str(runtime / "keeper"), connection_file, "--", *wrapper]
        return [*wrapper, self.python, str(runtime / "launch.py"), "-f", connection_file,
                *KERNEL_ARGS, *history_args(self.history_file or default_history_file())]

    async def history_while_starting(self, content: dict[str, Any]) -> dict[str, Any] | None:
        """The tail of the history file the sandbox's IPython writes (:attr:`history_file`), read
        with IPython's own ``HistoryAccessor`` as ipykernel's ``do_history`` reads it
        (``get_tail(n, raw, output, include_latest=True)``); None for other requests, and for a
        history kept in memory."""
        path = self.history_file or default_history_file()
        if content.get("hist_access_type") != "tail" or path == ":memory:" or not Path(path).is_file():
            return None

        def tail() -> list[Any]:
            from IPython.core.history import HistoryAccessor

            accessor = HistoryAccessor(hist_file=path)
            try:
                return list(accessor.get_tail(int(content.get("n") or 10), raw=bool(content.get("raw", True)),
                                              output=bool(content.get("output")), include_latest=True))
            finally:
                accessor.db.close()

        try:
            rows = await asyncio.to_thread(tail)
        except Exception:  # an unreadable file: the sandbox's own IPython answers once it is up
            return None
        return {"status": "ok", "history": [list(row) for row in rows]}

    async def _launch(self) -> dict[str, Any]:
        try:
            return await self._spawn()
        finally:  # after the spawn: the kernel boots on another core meanwhile
            remove_leftovers()

    async def _spawn(self) -> dict[str, Any]:
        if (info := await pool.take(self)) is not None:
            return info
        self._scratch = Path(tempfile.mkdtemp(prefix=f"sandbox-local-{os.getpid()}-"))
        self._runtime = Path(tempfile.mkdtemp(prefix=f"sandbox-local-conn-{os.getpid()}-"))
        home = pooled.make_home(self._scratch)
        connection_file, info = write_connection_file(
            str(self._runtime / "kernel.json"), transport="ipc", ip=str(self._runtime / "k")
        )
        (self._runtime / "launch.py").write_text(f"import sys\nif sys.path and sys.path[0] == {str(self._runtime)!r}:\n"
                                                 f"    del sys.path[0]\n{IOPUB_APP}")
        if self.checkpoints:
            (self._runtime / "keeper.py").write_text(keeper_process.SOURCE)
        self._keeper_runs = self.checkpoints
        try:
            prefix = self._workspace()
        except BaseException:
            await self._terminate()
            raise
        try:
            self._proc = launch_kernel([*prefix, *self._command(connection_file, keeper=self.checkpoints)],
                                       env=self._environment(), cwd=str(self.workdir))
        except OSError as exc:
            raise SandboxStartError(f"Could not start the local kernel with {self.python!r}: {exc}.") from exc
        record_kernel(self._runtime, self._proc.pid)  # stopped by whoever removes a killed owner's leftovers
        try:
            await asyncio.to_thread(pooled.seed_completer, home, self.python)  # beside the kernel's boot
        except BaseException:  # cancelled: start() ends only what _launch returned
            await self._terminate()
            raise
        return info

    def _workspace(self) -> list[str]:
        """Show the workspace, if one is asked for: bound with bubblewrap (returns the command
        prefix that runs the kernel in its view) or copied into ``SCRATCH/work``.

        Raises:
            WorkspaceError: the folder cannot be shown (the message says why and what to do).
        """
        self.workspace_view = self._cwd = self._plan = None
        plan = workspace.plan_of(self)
        if plan is None:
            return []
        work = self._scratch / "work"
        work.mkdir()
        bwrap = view.available()
        if bwrap is None:  # no mount namespace to be had: a copy
            workspace.copy_tree(plan, str(work), read_only=self.workspace == "ro", max_bytes=self.workspace_max_bytes,
                                setting="LocalBackend.workspace_max_bytes")
            self._cwd, self.workspace_view = work, workspace.View.of(plan, self.workspace, "copied")
            return []
        empty = self._runtime / "empty"
        empty.touch(mode=0o444)
        prefix, cwd = view.argv(plan, self.workspace, str(work), str(empty), bwrap)
        self._cwd, self._plan, self._bwrap = Path(cwd), plan, True
        self.workspace_view = workspace.View.of(plan, self.workspace, "bound")
        return prefix

    # -- the warm pool (sandbox_kernel.backends.pool) -------------------------------------------------
    async def _pool_key(self) -> str | None:
        """The interpreter, the kernel's environment and limits, and the code it runs; a session
        with a workspace is not pooled (its kernel starts in the folder's view)."""
        if self.workspace != "off":
            return None
        env = {name: value for name, value in self._environment(home=False).items()}
        return pool.key_of({"python": self.python, "env": env, "limits": self._limits(), "launch": pooled.POOLED_LAUNCH,
                            "app": IOPUB_APP, "ttl": self.pool_ttl})

    def _pool_options(self) -> dict[str, Any]:
        return pool.options_of(self)

    async def _open_keeper(self) -> KeeperLink | None:
        """The keeper's socket in the runtime directory (a pooled kernel runs none)."""
        if self._pooled_name is not None or not self.checkpoints:
            return None
        return await KeeperLink.connect(str(self._runtime / "keeper"), self.ready_timeout)

    async def _pool_launch(self) -> tuple[str, dict[str, Any]]:
        """A kernel in its own session (it outlives this process), waiting on its claim socket."""
        return await pooled.launch(lambda runtime, connection_file: self._command(connection_file, runtime),
                                   lambda: self._environment(home=False), self.pool_ttl, self.ready_timeout,
                                   self.python)

    async def _adopt(self, record: dict[str, Any]) -> dict[str, Any] | None:
        """Connect to the pooled kernel's claim socket (it then ends with this process)."""
        if (claim := pooled.claim(record)) is None:
            return None
        self._claim, self._pooled_name = claim, record["name"]
        self._proc = pooled.PooledProcess(record["pid"], record["started"])
        self._scratch, self._runtime = Path(record["scratch"]), Path(record["runtime"])
        return dict(record["info"])

    async def _pool_discard(self, record: dict[str, Any]) -> None:
        await self._terminate()
        pooled.remove_pooled(record)

    async def _wait_dead(self) -> str:
        while self._proc.poll() is None:
            await asyncio.sleep(0.2)
        return self._death_reason(self._proc.returncode)

    def _death_reason(self, code: int | None) -> str:
        if self._bwrap or self._kept is not None:  # both exit with 128 + N for the kernel's signal N
            code = view.death_code(code)
        if code is None:
            return "its process ended (a pooled kernel, not this process's child: its exit status is unknown)"
        if code >= 0:
            return f"its process exited with code {code}"
        sig = signal.Signals(-code)
        if sig == signal.SIGXCPU:
            return f"it used up its CPU time limit ({self.cpu_time_limit:g} s)"
        if sig == signal.SIGKILL and self.memory_limit:
            return f"it was killed (SIGKILL; memory limit {format_bytes(self.memory_limit)})"
        return f"it was killed by {sig.name}"

    async def _terminate(self) -> None:
        proc, self._proc = self._proc, None
        keeper, self._keeper_runs = self._keeper_runs, False
        if proc is not None and keeper:
            await asyncio.get_running_loop().run_in_executor(None, ending.end_keeper, proc, self._bwrap)
        elif proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                proc.kill()
            await asyncio.get_running_loop().run_in_executor(None, proc.wait)
        for path in (self._scratch, self._runtime):
            if path is not None:
                shutil.rmtree(path, ignore_errors=True)
        self._scratch = self._runtime = self._cwd = self._plan = self.workspace_view = None
        self._bwrap = False
        claim, self._claim = self._claim, None
        if claim is not None:
            claim.close()
        if self._pooled_name is not None:
            pool.release(self.name, self._pooled_name)
            self._pooled_name = None

    def _sandbox_path(self, remote: str) -> Path:
        """Where the kernel's ``remote`` is on this machine: below its working directory, except
        what a read-only bound workspace shows, which is the folder's own file."""
        if os.path.isabs(remote):
            return Path(remote)
        if self._plan is not None and self.workspace == "ro" and self._plan.shows(remote):
            return Path(self._plan.root) / remote
        return self.workdir / remote

    def _check_upload(self, remote: str) -> None:
        """A read-only workspace takes no upload over what it shows, nor into the folder by its
        own path (see :meth:`~sandbox_kernel.backends.workspace.View.refuse_upload`)."""
        shown = self.workspace_view
        if shown is None or shown.mode != "ro":
            return
        path = os.path.normpath(os.path.join(str(self.workdir), remote))
        if os.path.commonpath([path, shown.folder]) == shown.folder:
            shown.refuse_upload(os.path.relpath(path, shown.folder), in_folder=True)
        if os.path.commonpath([path, str(self.workdir)]) == str(self.workdir):
            shown.refuse_upload(os.path.relpath(path, self.workdir))

    async def upload(self, local: str | Path, remote: str) -> str:
        await self.start()
        self._check_upload(remote)
        target = self._sandbox_path(remote)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(local, target)
        return str(target)

    async def download(self, remote: str, local: str | Path, *, max_bytes: int = 0) -> Path:
        await self.start()
        with open(self._sandbox_path(remote), "rb") as source:
            return write_chunks(iter(lambda: source.read(1024 * 1024), b""), local, max_bytes, remote)

    async def usage(self) -> dict[str, Any] | None:
        """The kernel process's resident memory (``VmRSS`` in ``/proc/PID/status``) and the
        percent of one CPU it used since the previous call (``/proc/PID/stat``); Linux; under
        bubblewrap, of its innermost process: the kernel. Its host's figures are this machine's
        (:func:`~..usage.this_machine`): the sandbox shares it."""
        proc = self._proc
        pid = view.innermost(proc.pid) if proc is not None and self._bwrap else proc and proc.pid
        if self._kept is not None:  # the kernel is the keeper's child
            with contextlib.suppress(SandboxError):
                pid = await self._kept.kernel_pid()
        memory = pooled.process_memory(pid) if pid else None
        if memory is None:
            return None
        figures: dict[str, Any] = {"memory_bytes": memory, "cpu_count": os.cpu_count(), **this_machine()}
        if (used := pooled.process_cpu_seconds(pid)) is not None:
            figures["cpu_percent"] = self._cpu.sample(used, time.monotonic())
        return figures

    def describe(self) -> dict[str, Any]:
        limits = {"memory": self.memory_limit and format_bytes(self.memory_limit),
                  "cpu_time_s": self.cpu_time_limit, "max_processes": self.max_processes,
                  "max_file_size": self.max_file_size and format_bytes(self.max_file_size)}
        return {**super().describe(), "sandbox_id": str(self._proc.pid) if self._proc else None,
                "workdir": str(self.workdir) if self.workdir else None,
                "env": sorted(self.env) or None,
                "limits": {k: v for k, v in limits.items() if v}}

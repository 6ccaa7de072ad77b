"""The ``local`` backend: an ipykernel subprocess in a fresh scratch directory.

It isolates the working directory and the environment (the kernel sees only PATH, LANG and a
HOME inside its scratch directory, plus the variables named in ``env_vars``) and applies
optional rlimits. It is NOT a security boundary: the code runs as the same user, can read the
user's files and use the network. Use the docker or e2b backend for untrusted code.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from jupyter_client.connect import write_connection_file
from jupyter_client.launcher import launch_kernel
from traitlets import Float, Integer, List, Unicode

from ...core.errors import SandboxStartError
from ...runtime.traits import ByteSize, format_bytes
from .. import pool
from ..egress import refused_allow_hosts
from ..kernel_client import KERNEL_ARGS, QUIET_KERNEL_ENV, KernelClientBackend
from ..kernel_client.launcher import IOPUB_APP
from ..pool import pool_size_trait, pool_ttl_trait
from . import pooled

ALLOWED_ENV = ("PATH", "LANG")


def remove_leftovers() -> None:
    """Remove scratch directories whose owning kernel process is gone (killed before it could
    clean up). Their names carry the owner's pid: ``sandbox-local-[conn-]PID-XXXX``."""
    for path in Path(tempfile.gettempdir()).glob("sandbox-local-*"):
        pid = path.name.removeprefix("sandbox-local-").removeprefix("conn-").split("-")[0]
        if pid.isdigit() and not pooled.alive(int(pid)):
            shutil.rmtree(path, ignore_errors=True)
    pooled.sweep()


class LocalBackend(KernelClientBackend):
    """A kernel process on this machine, in a scratch directory deleted at shutdown."""

    name = "local"
    capabilities = replace(KernelClientBackend.capabilities, files=True, pool=True)

    @classmethod
    def pool_status(cls, asked: bool = False) -> list[dict[str, Any]]:
        """``sandbox-kernel pool status``: this host's waiting pooled sandboxes (see :mod:`.pooled`)."""
        return pooled.pool_status(asked)

    @classmethod
    def pool_stop(cls, asked: bool = False) -> list[str]:
        """``sandbox-kernel pool stop``: remove this host's waiting pooled sandboxes; their names."""
        return pooled.pool_stop(asked)

    python = Unicode(sys.executable, help="The Python interpreter that runs the kernel (needs ipykernel).").tag(
        config=True
    )
    env_vars = List(Unicode(), help="Names of host environment variables to pass to the sandbox.").tag(config=True)
    memory_limit = ByteSize(0, help="Address-space limit of the kernel process (RLIMIT_AS), e.g. '2g'; 0: none.").tag(
        config=True
    )
    cpu_time_limit = Float(0, help="CPU seconds the kernel process may use in all (RLIMIT_CPU); 0: none.").tag(
        config=True
    )
    max_processes = Integer(0, help="RLIMIT_NPROC for the kernel's user (ignored for root); 0: none.").tag(
        config=True
    )
    max_file_size = ByteSize(0, help="Largest file the kernel may write (RLIMIT_FSIZE); 0: none.").tag(config=True)
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

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._proc = None
        self._scratch: Path | None = None
        self._runtime: Path | None = None
        self._claim: socket.socket | None = None  # a pooled kernel's claim connection, held while it runs
        self._pooled_name: str | None = None

    @property
    def workdir(self) -> Path | None:
        """The scratch directory (the kernel's working directory), while started."""
        return self._scratch

    def _environment(self, home: bool = True) -> dict[str, str]:
        env = {name: os.environ[name] for name in (*ALLOWED_ENV, *self.env_vars) if name in os.environ}
        env.update(QUIET_KERNEL_ENV)
        if home:
            env["HOME"] = str(self._scratch / "home")
        return env

    def _limits(self) -> dict[str, int]:
        return {"as": self.memory_limit, "cpu": int(self.cpu_time_limit + 0.999), "nproc": self.max_processes,
                "fsize": self.max_file_size}

    def _command(self, connection_file: str, runtime: Path | None = None) -> list[str]:
        """The kernel's command line: ``launch.py`` in ``runtime`` (default: this session's)
        under the resource limits."""
        wrapper = [sys.executable, "-m", "sandbox_kernel.backends.local.rlimits"]
        wrapper += [f"--{name}={value}" for name, value in self._limits().items() if value]
        return [*wrapper, "--", self.python, str((runtime or self._runtime) / "launch.py"), "-f", connection_file,
                *KERNEL_ARGS]

    async def _launch(self) -> dict[str, Any]:
        remove_leftovers()
        if (info := await pool.take(self)) is not None:
            return info
        self._scratch = Path(tempfile.mkdtemp(prefix=f"sandbox-local-{os.getpid()}-"))
        self._runtime = Path(tempfile.mkdtemp(prefix=f"sandbox-local-conn-{os.getpid()}-"))
        (self._scratch / "home").mkdir()
        connection_file, info = write_connection_file(
            str(self._runtime / "kernel.json"), transport="ipc", ip=str(self._runtime / "k")
        )
        (self._runtime / "launch.py").write_text(f"import sys\nif sys.path and sys.path[0] == {str(self._runtime)!r}:\n"
                                                 f"    del sys.path[0]\n{IOPUB_APP}")
        try:
            self._proc = launch_kernel(self._command(connection_file), env=self._environment(), cwd=str(self._scratch))
        except OSError as exc:
            raise SandboxStartError(f"Could not start the local kernel with {self.python!r}: {exc}.") from exc
        return info

    # -- the warm pool (sandbox_kernel.backends.pool) -------------------------------------------------
    async def _pool_key(self) -> str | None:
        """The interpreter, the kernel's environment and limits, and the code it runs."""
        env = {name: value for name, value in self._environment(home=False).items()}
        return pool.key_of({"python": self.python, "env": env, "limits": self._limits(), "launch": pooled.POOLED_LAUNCH,
                            "app": IOPUB_APP, "ttl": self.pool_ttl})

    def _pool_options(self) -> dict[str, Any]:
        return pool.options_of(self)

    async def _pool_launch(self) -> tuple[str, dict[str, Any]]:
        """A kernel in its own session (it outlives this process), waiting on its claim socket."""
        return await pooled.launch(lambda runtime, connection_file: self._command(connection_file, runtime),
                                   lambda: self._environment(home=False), self.pool_ttl, self.ready_timeout)

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
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                proc.kill()
            await asyncio.get_running_loop().run_in_executor(None, proc.wait)
        for path in (self._scratch, self._runtime):
            if path is not None:
                shutil.rmtree(path, ignore_errors=True)
        self._scratch = self._runtime = None
        claim, self._claim = self._claim, None
        if claim is not None:
            claim.close()
        if self._pooled_name is not None:
            pool.release(self.name, self._pooled_name)
            self._pooled_name = None

    def _sandbox_path(self, remote: str) -> Path:
        return self._scratch / remote if not os.path.isabs(remote) else Path(remote)

    async def upload(self, local: str | Path, remote: str) -> str:
        await self.start()
        target = self._sandbox_path(remote)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(local, target)
        return str(target)

    async def download(self, remote: str, local: str | Path) -> Path:
        await self.start()
        shutil.copyfile(self._sandbox_path(remote), local)
        return Path(local)

    async def usage(self) -> dict[str, int] | None:
        """The kernel process's resident memory (``VmRSS`` in ``/proc/PID/status``; Linux)."""
        proc = self._proc
        memory = pooled.process_memory(proc.pid) if proc is not None else None
        return {"memory_bytes": memory} if memory is not None else None

    def describe(self) -> dict[str, Any]:
        limits = {"memory": self.memory_limit and format_bytes(self.memory_limit),
                  "cpu_time_s": self.cpu_time_limit, "max_processes": self.max_processes,
                  "max_file_size": self.max_file_size and format_bytes(self.max_file_size)}
        return {**super().describe(), "sandbox_id": str(self._proc.pid) if self._proc else None,
                "workdir": str(self._scratch) if self._scratch else None,
                "limits": {k: v for k, v in limits.items() if v}}

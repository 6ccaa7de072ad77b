"""The ``local`` backend: an ipykernel subprocess in a fresh scratch directory.

It isolates the working directory and the environment (the kernel sees only PATH, LANG and a
HOME inside its scratch directory, plus the variables named in ``env_vars``) and applies
optional rlimits. It is NOT a security boundary: the code runs as the same user, can read the
user's files and use the network. Use the docker or e2b backend for untrusted code.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from jupyter_client.connect import write_connection_file
from jupyter_client.launcher import launch_kernel
from traitlets import Float, Integer, List, Unicode

from ..errors import SandboxStartError
from ..traits import ByteSize, format_bytes
from .kernel_client import KERNEL_ARGS, KernelClientBackend
from .kernel_client.launcher import IOPUB_APP

ALLOWED_ENV = ("PATH", "LANG")


def remove_leftovers() -> None:
    """Remove scratch directories whose owning kernel process is gone (killed before it could
    clean up). Their names carry the owner's pid: ``sandbox-local-[conn-]PID-XXXX``."""
    for path in Path(tempfile.gettempdir()).glob("sandbox-local-*"):
        pid = path.name.removeprefix("sandbox-local-").removeprefix("conn-").split("-")[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(path, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class LocalBackend(KernelClientBackend):
    """A kernel process on this machine, in a scratch directory deleted at shutdown."""

    name = "local"
    capabilities = replace(KernelClientBackend.capabilities, files=True)

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

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._proc = None
        self._scratch: Path | None = None
        self._runtime: Path | None = None

    @property
    def workdir(self) -> Path | None:
        """The scratch directory (the kernel's working directory), while started."""
        return self._scratch

    def _environment(self) -> dict[str, str]:
        env = {name: os.environ[name] for name in (*ALLOWED_ENV, *self.env_vars) if name in os.environ}
        env["HOME"] = str(self._scratch / "home")
        return env

    def _command(self, connection_file: str) -> list[str]:
        limits = {"as": self.memory_limit, "cpu": int(self.cpu_time_limit + 0.999), "nproc": self.max_processes,
                  "fsize": self.max_file_size}
        wrapper = [sys.executable, "-m", "sandbox_kernel.backends._rlimits"]
        wrapper += [f"--{name}={value}" for name, value in limits.items() if value]
        return [*wrapper, "--", self.python, str(self._runtime / "launch.py"), "-f", connection_file,
                *KERNEL_ARGS]

    async def _launch(self) -> dict[str, Any]:
        remove_leftovers()
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

    async def _wait_dead(self) -> str:
        while self._proc.poll() is None:
            await asyncio.sleep(0.2)
        return self._death_reason(self._proc.returncode)

    def _death_reason(self, code: int) -> str:
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
        try:
            status = Path(f"/proc/{proc.pid}/status").read_text() if proc is not None else ""
        except OSError:
            return None
        match = re.search(r"^VmRSS:\s+(\d+) kB", status, re.M)
        return {"memory_bytes": int(match.group(1)) * 1024} if match else None

    def describe(self) -> dict[str, Any]:
        limits = {"memory": self.memory_limit and format_bytes(self.memory_limit),
                  "cpu_time_s": self.cpu_time_limit, "max_processes": self.max_processes,
                  "max_file_size": self.max_file_size and format_bytes(self.max_file_size)}
        return {**super().describe(), "sandbox_id": str(self._proc.pid) if self._proc else None,
                "workdir": str(self._scratch) if self._scratch else None,
                "limits": {k: v for k, v in limits.items() if v}}

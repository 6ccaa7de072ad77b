"""Kernelspecs, one per backend: ``sandbox-local``, ``sandbox-docker``, ``sandbox-e2b``, ``sandbox-gateway``.

Written with ``jupyter_client``'s ``KernelSpecManager``, so ``jupyter kernelspec list`` and
every frontend (JupyterLab, VS Code, nbclient) find them. Spec format:
https://jupyter-client.readthedocs.io/en/latest/kernels.html#kernel-specs
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

PREFIX = "sandbox-"


def kernel_name(backend: str) -> str:
    """``"docker"`` → ``"sandbox-docker"``."""
    return PREFIX + backend


def relays_debugger(backend: str) -> bool:
    """Whether ``backend`` relays the sandbox kernel's debugger (``capabilities.debugger``);
    False for a backend that cannot be loaded here."""
    from ...backends import get_backend_class
    from ...core.errors import SandboxError

    try:
        return get_backend_class(backend).capabilities.debugger
    except SandboxError:
        return False


def kernel_json(backend: str, options: list[str] = ()) -> dict:
    """The ``kernel.json`` dict for ``backend``; ``options`` are extra traitlets arguments
    such as ``--DockerBackend.memory_limit=2g``, appended to the argv. ``metadata.debugger`` is
    what JupyterLab reads to offer its debugger for the kernel: true where the backend relays the
    sandbox kernel's (the debugger then runs inside the sandbox, never in this process)."""
    return {
        "argv": [sys.executable, "-m", "sandbox_kernel", "-f", "{connection_file}",
                 f"--SandboxKernel.backend={backend}", *options],
        "display_name": f"Python 3 (sandbox: {backend})",
        "language": "python",
        "interrupt_mode": "message",
        "metadata": {"sandbox_kernel": {"backend": backend}, "debugger": relays_debugger(backend)},
    }


def install(backend: str, *, user: bool = False, prefix: str | None = None, options: list[str] = ()) -> str:
    """Write the kernelspec for ``backend``; returns the directory it was written to.

    ``user`` installs into the user's Jupyter data directory; ``prefix`` into
    ``PREFIX/share/jupyter/kernels`` (``sys.prefix`` for ``--sys-prefix``); neither: the
    system-wide directory.
    """
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "kernel.json").write_text(json.dumps(kernel_json(backend, list(options)), indent=1))
        return KernelSpecManager().install_kernel_spec(tmp, kernel_name(backend), user=user, prefix=prefix)


def uninstall(backend: str) -> str | None:
    """Remove the kernelspec for ``backend``; returns where it was, or None if absent."""
    try:
        return KernelSpecManager().remove_kernel_spec(kernel_name(backend))
    except NoSuchKernel:
        return None


def installed() -> dict[str, str]:
    """``{kernel name: directory}`` of the installed sandbox kernelspecs."""
    return {name: path for name, path in KernelSpecManager().find_kernel_specs().items() if name.startswith(PREFIX)}

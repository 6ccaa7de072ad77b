"""Kernelspecs, one per backend: ``sandbox-local``, ``sandbox-docker``, ``sandbox-e2b``, ``sandbox-gateway``.

Written with ``jupyter_client``'s ``KernelSpecManager``, so ``jupyter kernelspec list`` and
every frontend (JupyterLab, VS Code, nbclient) find them. Spec format:
https://jupyter-client.readthedocs.io/en/latest/kernels.html#kernel-specs
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
from jupyter_core.paths import SYSTEM_JUPYTER_PATH

PREFIX = "sandbox-"
LOGOS = Path(__file__).with_name("logos")
"""The kernels' logos (``logo-svg.svg``, ``logo-64x64.png``, ``logo-32x32.png``: the names
JupyterLab's Launcher, Notebook 7 and VS Code read from a kernelspec); made by scripts/make_logos.py."""
READABLE_DIR, READABLE_FILE = 0o755, 0o644
"""Modes of a kernelspec installed for others (``--sys-prefix``, ``--prefix``, system-wide): every
user of a hub must read it, whatever the installer's umask (under 077 the users' servers listed
``python3`` alone)."""


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
    """Write the kernelspec for ``backend`` (``kernel.json`` and the logos); returns the
    directory it was written to.

    ``user`` installs into the user's Jupyter data directory; ``prefix`` into
    ``PREFIX/share/jupyter/kernels`` (``sys.prefix`` for ``--sys-prefix``); neither: the
    system-wide directory. Except for ``user``, the kernelspec's folders are made 0755 and its
    files 0644 (:data:`READABLE_DIR`), and so are the folders above it that this call created.
    """
    created = [] if user else _missing_parents(_shared_kernels_dir(prefix) / kernel_name(backend))
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / kernel_name(backend)  # its mode is copied: TemporaryDirectory's is 0700
        source.mkdir()
        (source / "kernel.json").write_text(json.dumps(kernel_json(backend, list(options)), indent=1))
        for logo in LOGOS.iterdir():
            shutil.copyfile(logo, source / logo.name)
        destination = KernelSpecManager().install_kernel_spec(str(source), kernel_name(backend), user=user, prefix=prefix)
    if not user:
        _readable_by_all(Path(destination), created)
    return destination


def _shared_kernels_dir(prefix: str | None) -> Path:
    """Where jupyter_client installs a kernelspec for ``prefix`` (None: system-wide)."""
    return Path(prefix, "share", "jupyter", "kernels") if prefix else Path(SYSTEM_JUPYTER_PATH[0], "kernels")


def _missing_parents(path: Path) -> list[Path]:
    """The folders above ``path`` that do not exist yet (installing will create them)."""
    return [parent for parent in path.parents if not parent.exists()]


def _readable_by_all(spec_dir: Path, created: list[Path]) -> None:
    for folder, _, files in os.walk(spec_dir):
        os.chmod(folder, READABLE_DIR)
        for name in files:
            os.chmod(os.path.join(folder, name), READABLE_FILE)
    for folder in created:
        os.chmod(folder, READABLE_DIR)


def uninstall(backend: str) -> str | None:
    """Remove the kernelspec for ``backend``; returns where it was, or None if absent."""
    try:
        return KernelSpecManager().remove_kernel_spec(kernel_name(backend))
    except NoSuchKernel:
        return None


def installed() -> dict[str, str]:
    """``{kernel name: directory}`` of the installed sandbox kernelspecs."""
    return {name: path for name, path in KernelSpecManager().find_kernel_specs().items() if name.startswith(PREFIX)}

"""A sandbox kernel as the Jupyter server's default, and optionally its only kernel:
``sandbox-kernel install --default BACKEND [--only]``.

Without it a fresh install keeps ``python3`` (the unsandboxed "Python 3 (ipykernel)") as the
Launcher's first card and the kernel of new notebooks. These are the settings docs/how-to/jupyterhub.md
gives a hub's administrator, written as JSON into ``jupyter_server_config.json`` of the Jupyter
config directory that matches the install's scope, which JupyterLab, Notebook 7 and every other
Jupyter Server application read when they start:

    c.MappingKernelManager.default_kernel_name = "sandbox-docker"
    c.KernelSpecManager.allowed_kernelspecs = ["sandbox-docker"]   # --only
    c.KernelSpecManager.ensure_native_kernel = False                # --only: no python3 added back

Other settings in that file are kept. :func:`forget` takes these out again where they name a
kernel that ``sandbox-kernel uninstall`` removed (a default naming a missing kernel would leave the
server with none). Settings reference: https://jupyter-server.readthedocs.io/en/latest/other/full-config.html
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from jupyter_core.paths import SYSTEM_CONFIG_PATH, jupyter_config_dir, jupyter_config_path

from ...core.errors import ConfigError

FILE = "jupyter_server_config.json"


def config_dir(*, user: bool = False, prefix: str | None = None) -> Path:
    """The Jupyter config directory of an install's scope: the user's (``~/.jupyter``),
    ``PREFIX/etc/jupyter`` (``sys.prefix`` for ``--sys-prefix``), else the system-wide one."""
    if user:
        return Path(jupyter_config_dir())
    return Path(prefix, "etc", "jupyter") if prefix else Path(SYSTEM_CONFIG_PATH[0])


def make_default(kernel: str, directory: Path, *, only: bool = False) -> Path:
    """Make ``kernel`` (a kernelspec name) the default of Jupyter servers that read
    ``directory``; with ``only``, also the only kernelspec they offer. Returns the file written.

    Raises:
        ConfigError: the file there is not a JSON object (it is left as it was).
    """
    path = directory / FILE
    config = _read(path)
    config.setdefault("MappingKernelManager", {})["default_kernel_name"] = kernel
    specs = config.setdefault("KernelSpecManager", {})
    if only:
        specs.update(allowed_kernelspecs=[kernel], ensure_native_kernel=False)
    elif specs.get("allowed_kernelspecs") and kernel not in specs["allowed_kernelspecs"]:
        specs["allowed_kernelspecs"] = [*specs["allowed_kernelspecs"], kernel]
    if not specs:
        del config["KernelSpecManager"]
    _write(path, config)
    return path


def forget(kernels: set[str], directories: list[str] | None = None) -> list[Path]:
    """Take ``kernels`` out of the ``jupyter_server_config.json`` of ``directories`` (default:
    the Jupyter config path, ``jupyter --paths``, with the ``sys.prefix`` and system-wide ones):
    a default naming one goes, and so does an allowlist that offered only them (with
    ``ensure_native_kernel: false`` beside it). Returns the files changed; files that are not
    JSON objects are left alone."""
    if directories is None:
        directories = [*jupyter_config_path(), str(config_dir(prefix=sys.prefix)), SYSTEM_CONFIG_PATH[0]]
    changed = []
    for directory in dict.fromkeys(directories):
        path = Path(directory) / FILE
        try:
            config = _read(path)
        except ConfigError:
            continue
        before = json.dumps(config, sort_keys=True)
        manager, specs = config.get("MappingKernelManager", {}), config.get("KernelSpecManager", {})
        if manager.get("default_kernel_name") in kernels:
            del manager["default_kernel_name"]
        if "allowed_kernelspecs" in specs:
            specs["allowed_kernelspecs"] = [k for k in specs["allowed_kernelspecs"] if k not in kernels]
            if not specs["allowed_kernelspecs"]:
                del specs["allowed_kernelspecs"]
                specs.pop("ensure_native_kernel", None)
        config = {section: values for section, values in config.items() if values != {}}
        if json.dumps(config, sort_keys=True) != before:
            _write(path, config)
            changed.append(path)
    return changed


def _read(path: Path) -> dict[str, Any]:
    try:
        config = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read {path} ({exc}); fix or move it, then try again.") from None
    if not isinstance(config, dict) or not all(isinstance(v, dict) for v in config.values()):
        raise ConfigError(f"{path} is not a Jupyter config file (a JSON object of sections); fix or move it.")
    return config


def _write(path: Path, config: dict[str, Any]) -> None:
    """Write ``config``; the file and the folders made for it are readable by every user's
    server whatever the umask, as kernelspecs installed for others are."""
    for folder in reversed([path.parent, *path.parent.parents]):
        if not folder.exists():
            folder.mkdir()
            folder.chmod(0o755)
    path.write_text(json.dumps(config, indent=2) + "\n")
    path.chmod(0o644)

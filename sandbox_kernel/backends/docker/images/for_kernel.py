"""``sandbox-kernel image build --kernel NAME`` (or ``-- --DockerBackend.packages=...``): build, ahead
of time, exactly the image a docker kernel's options ask for, the way its first cell would
(``image``, ``dockerfile``, ``packages``, ``build_base``, ``build_wheelhouse``, ``build_args``), so a
scripted run (nbclient, papermill, nbval) never waits at its first cell.

The options are read as the kernel reads them: the kernelspec's argv (``--DockerBackend.*``), then
``sandbox_kernel_config.py`` on the Jupyter config path, then options given on this command line.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from typing import Any

from traitlets.config import Application, Config

from ....core.errors import ConfigError

BUILD_OPTIONS = ("image", "dockerfile", "packages", "build_base", "build_wheelhouse", "build_args")
"""The docker backend's options that decide which image its sessions run."""


class _KernelOptions(Application):
    """Only a reader of the kernel's config: named like the kernel's app, so it loads
    ``sandbox_kernel_config.py``."""

    name = "sandbox-kernel"


def kernel_config(kernel: str | None, options: list[str]) -> Config:
    """The config a kernel started from the kernelspec ``kernel`` gets, plus ``options``.

    Raises:
        ConfigError: no such kernelspec, or it does not run the docker backend.
    """
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
    from jupyter_core.paths import jupyter_config_path

    argv: list[str] = []
    if kernel:
        try:
            spec = KernelSpecManager().get_kernel_spec(kernel)
        except NoSuchKernel:
            raise ConfigError(f"no kernelspec named {kernel!r} (`sandbox-kernel list` lists the installed ones)") from None
        argv = [arg for arg in spec.argv if arg.startswith("--") and "." in arg.split("=")[0]]
    app = _KernelOptions()
    for path in jupyter_config_path():
        app.load_config_file("sandbox_kernel_config", path=path)
    app.parse_command_line([*argv, *options])
    backend = str(app.config.get("SandboxKernel", {}).get("backend", "local"))
    if kernel and backend != "docker":
        raise ConfigError(f"the kernelspec {kernel!r} runs the {backend} backend: only docker kernels have an image")
    return app.config


def build_command(backend: Any) -> str:
    """The command line that builds ``backend``'s image ahead of time, from its options that
    differ from the defaults (what a cell shows while the first cell builds it)."""
    args = []
    for name in BUILD_OPTIONS:
        value, default = getattr(backend, name), backend.trait_defaults(name)
        if value == default:
            continue
        for item in value if isinstance(value, list) else [value]:
            args.append(f"--DockerBackend.{name}={item}")
    return shlex.join(["sandbox-kernel", "image", "build", *args])


def build_for(config: Config, progress: Callable[[str], None]) -> str:
    """Build (when missing or outdated) the image of a docker backend made with ``config``;
    returns its name. Blocking.

    Raises:
        SandboxStartError, BackendUnavailable: as the first cell would report them.
    """
    from .. import DockerBackend
    from ..engine import connect
    from ..prepare import prepare_image

    backend = DockerBackend(config=config)
    backend.auto_build = True  # this command is the build
    image, _ = prepare_image(connect(), backend, progress)
    return image

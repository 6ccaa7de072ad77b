"""The kernel application: ipykernel's ``IPKernelApp`` serving a :class:`SandboxKernel`.

Its name makes it read ``sandbox_kernel_config.py`` (or ``.json``) from the Jupyter config
path (``jupyter --paths``), so options can live in a config file as well as on the argv.
"""

from __future__ import annotations

from ipykernel.kernelapp import IPKernelApp
from jupyter_core.paths import jupyter_config_path
from traitlets import List, Type, Unicode, default

from .kernel import SandboxKernel


class SandboxKernelApp(IPKernelApp):
    name = "sandbox-kernel"
    kernel_class = Type(SandboxKernel, klass="ipykernel.kernelbase.Kernel").tag(config=True)
    config_file_paths = List(Unicode())

    @default("config_file_paths")
    def _config_file_paths_default(self) -> list[str]:
        # IPython's apps search only the IPython profile; look where Jupyter apps look too.
        return list(jupyter_config_path())


def launch(argv: list[str] | None = None) -> None:
    """Start the kernel with ``argv`` (``-f CONNECTION_FILE`` and traitlets options)."""
    SandboxKernelApp.launch_instance(argv=argv)

"""``%load_ext magics``: the ``%%sandbox`` IPython extension, which lives in
:mod:`sandbox_kernel.frontdoors.magics` (this package keeps the documented name working)."""

from sandbox_kernel.frontdoors.magics import SandboxMagics, load_ipython_extension, unload_ipython_extension

__all__ = ["SandboxMagics", "load_ipython_extension", "unload_ipython_extension"]

"""sandbox-kernel: run notebook cells in a sandbox (local, Docker, E2B) through a Jupyter
wrapper kernel or the ``%%sandbox`` magic.

``import sandbox_kernel`` stays light: backends and their optional dependencies load lazily.
"""

from ._version import __version__


def load_ipython_extension(ipython):
    """``%load_ext sandbox_kernel``: the same as ``%load_ext magics``."""
    from sandbox_kernel.frontdoors.magics import load_ipython_extension as load

    load(ipython)


def __getattr__(name):
    """``from sandbox_kernel import Sandbox, AsyncSandbox, ExecutionResult, CommandResult``
    (imported on first use, so ``import sandbox_kernel`` stays light)."""
    if name in ("Sandbox", "AsyncSandbox"):
        from .frontdoors import api

        return getattr(api, name)
    if name in ("ExecutionResult", "CommandResult"):
        from .session import results

        return getattr(results, name)
    raise AttributeError(f"module 'sandbox_kernel' has no attribute {name!r}")


__all__ = ["AsyncSandbox", "CommandResult", "ExecutionResult", "Sandbox", "__version__"]

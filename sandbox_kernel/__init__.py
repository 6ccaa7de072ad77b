"""sandbox-kernel: run notebook cells in a sandbox (local, Docker, E2B) through a Jupyter
wrapper kernel or the ``%%sandbox`` magic.

``import sandbox_kernel`` stays light: backends and their optional dependencies load lazily.
"""

__version__ = "0.1.0"


def load_ipython_extension(ipython):
    """``%load_ext sandbox_kernel``: the same as ``%load_ext magics``."""
    from magics import load_ipython_extension as load

    load(ipython)

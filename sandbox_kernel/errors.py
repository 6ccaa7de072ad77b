"""``sandbox_kernel.errors``: the documented import of the exception tree (it lives in
:mod:`sandbox_kernel.core.errors`)."""

from .core.errors import *  # noqa: F403
from .core.errors import __all__  # noqa: F401

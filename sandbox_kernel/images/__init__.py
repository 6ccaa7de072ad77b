"""Moved to :mod:`sandbox_kernel.backends.docker.images`; this name stays so that
``python -m sandbox_kernel.images ...`` and imports written for it keep working."""

from ..backends.docker.images import *  # noqa: F403
from ..backends.docker.images import __all__  # noqa: F401

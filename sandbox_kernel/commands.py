"""``sandbox_kernel.commands``: the documented import of :class:`CommandRefused` (shell commands
of the API and MCP live in :mod:`sandbox_kernel.session.commands`)."""

from .core.errors import CommandRefused

__all__ = ["CommandRefused"]

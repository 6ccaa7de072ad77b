"""The exception tree for infrastructure failures: catch :class:`SandboxError` to catch all.

An error in the user's code is never one of these: it is an :class:`~sandbox_kernel.events.Error`
event. These are failures of the sandbox itself (the engine is missing, the sandbox died),
and each message is written for the notebook user: what happened and what to do.
Backends map third-party exceptions to these at one boundary each (``raise ... from exc``).
"""

from __future__ import annotations


class SandboxError(Exception):
    """Root of every infrastructure error of sandbox-kernel. Its ``str()`` is user-facing."""


class ConfigError(SandboxError):
    """An option has a bad value, or a backend name is unknown."""


class BackendUnavailable(SandboxError):
    """A backend cannot be used here: a missing package, engine or credential.

    Attributes:
        fix: the exact step that makes it available, e.g. ``pip install 'sandbox-kernel[docker]'``.
    """

    def __init__(self, message: str, fix: str | None = None) -> None:
        self.fix = fix
        super().__init__(f"{message} Fix: {fix}" if fix else message)


class SandboxStartError(SandboxError):
    """The sandbox could not be created or did not become ready."""


class SandboxDied(SandboxError):
    """The sandbox stopped while in use; its state is gone.

    Attributes:
        reason: why, as learned from the backend, e.g. "it ran out of memory (limit 1 GiB)".
    """

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"The sandbox stopped: {reason}. Its state is lost; the next cell starts a fresh sandbox.")


class ExecutionTimeout(SandboxError):
    """A cell ran longer than its time limit and was interrupted.

    Attributes:
        timeout: the limit, in seconds.
    """

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        super().__init__(
            f"The cell ran longer than {timeout:g} s and was interrupted; the sandbox's state is kept."
        )


class NotSupported(SandboxError):
    """The backend does not offer this operation (e.g. comms on e2b)."""

    def __init__(self, backend: str, operation: str) -> None:
        super().__init__(f"The {backend} backend does not support {operation}.")

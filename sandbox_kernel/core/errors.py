"""The exception tree for infrastructure failures: catch :class:`SandboxError` to catch all.

An error in the user's code is never one of these: it is an :class:`~sandbox_kernel.core.events.Error`
event. These are failures of the sandbox itself (the engine is missing, the sandbox died),
and each message is written for the notebook user: what happened and what to do.
Backends map third-party exceptions to these at one boundary each (``raise ... from exc``).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path


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


class QuotaReached(SandboxStartError):
    """A new sandbox would take this user beyond the administrator's per-user quota (running
    sandboxes, or their memory); the message says which and what to close."""


class SandboxDied(SandboxError):
    """The sandbox stopped while in use; its state is gone, or, with ``restored``, replaced by
    the state of a checkpoint.

    Attributes:
        reason: why, as learned from the backend, e.g. "it ran out of memory (limit 1 GiB)".
        restored: which checkpoint's state the sandbox runs on now, as a phrase ("the state
            after cell 4, checkpointed 2 min ago"), or None (the state is lost).
        checkpoint: that checkpoint (:class:`~sandbox_kernel.backends.checkpoint.Checkpoint`), or None.
    """

    def __init__(self, reason: str, restored: str | None = None, checkpoint: object = None) -> None:
        self.reason, self.restored, self.checkpoint = reason, restored, checkpoint
        if restored:
            super().__init__(f"The sandbox stopped: {reason}. What this cell did is lost; the next cell runs on "
                             f"{restored}.")
        else:
            super().__init__(f"The sandbox stopped: {reason}. Its state is lost; the next cell starts a fresh sandbox.")


class ExecutionTimeout(SandboxError):
    """A cell ran longer than its time limit and was interrupted.

    Attributes:
        timeout: the limit, in seconds.
        restarted: the interrupt did not stop it, so the sandbox was restarted (its state lost).
    """

    def __init__(self, timeout: float, restarted: bool = False) -> None:
        self.timeout, self.restarted = timeout, restarted
        super().__init__(
            f"The cell ran longer than {timeout:g} s; an interrupt did not stop it, so the sandbox was restarted "
            "and its state is lost." if restarted else
            f"The cell ran longer than {timeout:g} s and was interrupted; the sandbox's state is kept."
        )


class CheckpointError(SandboxError):
    """A checkpoint could not be taken, found or restored; the message says why."""


class NotSupported(SandboxError):
    """The backend does not offer this operation (e.g. comms on e2b)."""

    def __init__(self, backend: str, operation: str) -> None:
        super().__init__(f"The {backend} backend does not support {operation}.")


# -- configuration ------------------------------------------------------------------------------
class BadValue(ConfigError):
    """A backend option has a value its trait refuses.

    Attributes:
        backend: the backend's name.
        detail: traitlets' (or the option's validator's) message.
    """

    def __init__(self, backend: str, detail: str) -> None:
        self.backend, self.detail = backend, detail
        super().__init__(f"Bad option for the {backend} backend: {detail}")


class Locked(ConfigError):
    """An option beyond the administrator's lock (:mod:`sandbox_kernel.runtime.lock`), or a lock
    file that cannot be applied as written."""


class MountError(ConfigError, ValueError):
    """A docker ``mounts`` entry that cannot be used; its message says which and why. (Also a
    ValueError: traitlets' validators report a bad value that way.)"""


class EgressError(ConfigError, ValueError):
    """A bad ``allow_hosts``, ``secrets`` or ``pypi_index`` value, a secret that cannot be read, or
    an egress option a backend cannot enforce; its message says which and what to do. (Also a
    ValueError: traitlets' validators report a bad value that way.)"""


# -- the docker engine --------------------------------------------------------------------------
class EngineLost(SandboxError):
    """The engine stopped answering while a container was in use."""


class Refused(SandboxStartError):
    """The engine answered a request with an error (docker-py's ``APIError``).

    Attributes:
        status_code: the HTTP status of the engine's answer (409: in use, 500: ...), or None.
        explanation: the engine's own message.
    """

    def __init__(self, message: str, status_code: int | None, explanation: str) -> None:
        super().__init__(message)
        self.status_code, self.explanation = status_code, explanation


class Missing(Refused):
    """The engine has no such container, volume, image or file (HTTP 404)."""


class ImageBuildError(SandboxError):
    """The engine could not build an image.

    Attributes:
        message: What failed, and what to do about it.
        log_tail: The last build log lines, oldest first.
        engine_error: The engine's error when it failed a build step, else None.
    """

    def __init__(self, message: str, log_tail: Iterable[str] = ()) -> None:
        self.message = message
        self.log_tail = list(log_tail)
        self.engine_error: str | None = None
        text = message
        if self.log_tail:
            text += "\nlast build log lines:\n" + "\n".join(self.log_tail)
        super().__init__(text)


class RequirementNotFound(ImageBuildError):
    """pip found no wheel for a requirement. Attributes: ``requirement`` (as pip named it)."""

    def __init__(self, requirement: str, wheelhouse: Path, machine: str, index_answered: bool = True) -> None:
        self.requirement = requirement
        fix = ("check its name and version in the packages option" if index_answered else
               "the package index did not answer: check this machine's network, or bring a wheelhouse that has it")
        super().__init__(f"no wheel of {requirement!r} for the sandbox's Python (CPython 3.11, manylinux "
                         f"{machine}) was found on the package index or in the wheelhouse {wheelhouse}: {fix}")


# -- a Jupyter gateway --------------------------------------------------------------------------
class KernelGone(SandboxError):
    """The gateway answered 404 for the kernel: it was deleted, culled, or never existed."""


class GatewayUnreachable(SandboxStartError):
    """No answer from the gateway: refused, timed out, or the connection dropped."""


# -- messages from the sandbox ------------------------------------------------------------------
class MessageDropped(SandboxError):
    """The sandbox's reply to a request was larger than the bound and was dropped."""


# -- the session's operations -------------------------------------------------------------------
class TransferError(SandboxError):
    """A value that cannot travel, or data from the sandbox that is not what it claims."""


class CommandRefused(SandboxError):
    """A command matches none of the ``allowed_commands`` patterns."""

    def __init__(self, command: str) -> None:
        super().__init__(f"The command {command!r} is not allowed here: it matches none of the allowed_commands "
                         "patterns. Ask for an allowed command, or add a pattern to allowed_commands.")


class LineUsageError(ConfigError):
    """A ``%sandbox`` line a sandbox kernel answers, written wrong: one line, with the usage."""

    def __init__(self, message: str, usage: str) -> None:
        super().__init__(f"{message}. Usage: {usage}")


class PathRefused(SandboxError):
    """A file path that would leave the sandbox's working directory."""

    def __init__(self, path: str) -> None:
        super().__init__(f"The path {path!r} is refused: give a path relative to the sandbox's working directory, "
                         "without '..' (e.g. 'data/input.csv').")


class FileTooLarge(SandboxError):
    """A file from the sandbox is larger than the bound of the copy that asked for it; what was
    read is discarded.

    Attributes:
        path: the file in the sandbox. limit: the bound, in bytes.
    """

    def __init__(self, path: str, limit: int) -> None:
        self.path, self.limit = path, limit
        super().__init__(f"{path} in the sandbox is larger than {limit:,} bytes, the bound of this copy; not copied.")


class WorkspaceError(ConfigError):
    """The workspace (a host folder shown in the sandbox) cannot be shown as asked; the message
    says why and what to do."""


class StillRunning(SandboxError):
    """The sandbox ignored repeated interrupts; the magic stopped waiting for it."""

    def __init__(self, session: str, interrupts: int) -> None:
        super().__init__(f"The sandbox did not stop after {interrupts} interrupts and is still running "
                         f"the cell. Restart it with: %sandbox restart {session}")


# -- outside the tree, on purpose ---------------------------------------------------------------
class SandboxCellError(Exception):
    """Raised in the host cell by the ``%%sandbox`` magic when the sandboxed code failed (not an
    infrastructure failure, so not a :class:`SandboxError`): the host cell is marked failed and
    IPython shows :attr:`traceback` (the sandbox's) through ``_render_traceback_``.

    The magic makes a subclass named after the sandbox's exception, so the host's ``error``
    output and ``execute_reply`` carry the sandbox's ``ename``.
    """

    def __init__(self, evalue: str, traceback: list[str]) -> None:
        super().__init__(evalue)
        self.traceback = list(traceback)

    def _render_traceback_(self) -> list[str]:
        return self.traceback


__all__ = ["SandboxError", "ConfigError", "BackendUnavailable", "SandboxStartError", "SandboxDied", "ExecutionTimeout", "CheckpointError", "NotSupported", "BadValue", "MountError", "QuotaReached", "Locked", "EgressError", "FileTooLarge", "WorkspaceError", "EngineLost", "Refused", "Missing", "ImageBuildError", "RequirementNotFound", "KernelGone", "GatewayUnreachable", "MessageDropped", "TransferError", "CommandRefused", "LineUsageError", "PathRefused", "StillRunning", "SandboxCellError"]

"""Checkpoints of a sandbox's whole kernel process, taken at cell boundaries and restored later.

The mechanism, chosen from measurements (docs/how-to/checkpoints.md): a ``fork`` of the sandbox's
kernel process at a cell's end, held as a copy-on-write snapshot by a small keeper process
that is the kernel's parent inside the sandbox, and promoted to the running kernel on restore.
It keeps what pickle cannot carry (open files at their offsets, generators, sqlite
connections, C-extension objects) because it keeps the process itself, and works wherever the
kernel runs as a process we start: ``local``, ``docker`` (runc, gVisor's runsc, Podman).

- :mod:`.inside`: the kernel's side (the fork, the snapshot's private files, the promotion);
- :mod:`.keeper`: the keeper process (the snapshots, bounds, restores, recovery after a death);
- :mod:`.link`: the host's connection to the keeper;
- this module: the options every backend with checkpoints has, and :class:`Checkpoint`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from traitlets import Bool, Float, HasTraits, Integer

from ...runtime.traits import ByteSize

DEFAULT_MAX_BYTES = 1024**3
"""``checkpoint_max_bytes`` when unset and the sandbox has no memory limit."""


@dataclass(frozen=True)
class Checkpoint:
    """One checkpoint of a sandbox's state.

    Attributes:
        id: the keeper's number for it, unique in the sandbox.
        cell: the execution count of the cell at whose end it was taken (None: not after a cell).
        name: the name it was given (``%sandbox checkpoint NAME``), or None.
        time: when it was taken, seconds since the epoch.
        bytes: the memory only it holds (what dropping it frees), when measured; None otherwise.
    """

    id: int
    cell: int | None
    name: str | None
    time: float
    bytes: int | None = None

    def what(self) -> str:
        """How a message names its state: "the state after cell 4 (checkpoint 'clean')"."""
        what = f"the state after cell {self.cell}" if self.cell is not None else f"the state of checkpoint {self.id}"
        return what + (f" (checkpoint {self.name!r})" if self.name else "")

    def phrase(self, now: float | None = None) -> str:
        """:meth:`what`, and its age: "the state after cell 4, taken 2 min ago"."""
        return f"{self.what()}, taken {age(self.time, now)}"

    @classmethod
    def of(cls, record: dict[str, Any]) -> Checkpoint:
        """From the keeper's record (untrusted: each field checked, a wrong type dropped)."""
        def number(value: Any) -> Any:
            return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None

        name = record.get("name")
        return cls(id=int(number(record.get("id")) or 0), cell=number(record.get("cell")),
                   name=name[:200] if isinstance(name, str) and name else None,
                   time=float(number(record.get("time")) or 0.0), bytes=number(record.get("bytes")))


def age(when: float, now: float | None = None) -> str:
    """``when`` (epoch seconds) as an age: "12 s ago", "3 min ago", "2.5 h ago", "4 days ago"."""
    seconds = max(0.0, (time.time() if now is None else now) - when)
    if seconds < 90:
        return f"{seconds:.0f} s ago"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min ago"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h ago"
    return f"{seconds / 86400:.0f} days ago"


def death_of(status: Any) -> str:
    """A kernel's end as the keeper reports its status (negative: killed by that signal)."""
    import signal

    if not isinstance(status, int) or isinstance(status, bool):
        return "its kernel ended"
    if status < 0:
        try:
            name = signal.Signals(-status).name
        except ValueError:
            name = f"signal {-status}"
        return f"its kernel was killed by {name}"
    return f"its kernel exited with code {status}"


class CheckpointOptions(HasTraits):
    """The options of a backend that keeps checkpoints (a base class of it)."""

    checkpoints = Bool(True, help="Keep checkpoints of the sandbox's state (a copy-on-write fork of its kernel "
                                  "process at a cell's end, held by a keeper process in the sandbox): %sandbox "
                                  "undo / restore N / checkpoint NAME, and a dead kernel's state restored at the "
                                  "next cell. False: no keeper, no checkpoints.").tag(config=True)
    checkpoint_min_seconds = Float(1.0, help="A checkpoint is taken automatically after each cell that ran at least "
                                             "this many seconds (0: after every cell; negative: only on "
                                             "demand).").tag(config=True)
    checkpoint_keep = Integer(10, help="Most checkpoints kept; the oldest go first (named ones after the unnamed). "
                                       "0: no bound by number.").tag(config=True)
    checkpoint_max_bytes = ByteSize(None, allow_none=True,
                                    help="Most memory the checkpoints may hold beyond what the running kernel shares "
                                         "with them (it counts toward the sandbox's memory), e.g. '512m'; the oldest "
                                         "go first. None (default): half the sandbox's memory limit, or 1 GiB "
                                         "without one. 0: no bound by bytes.").tag(config=True)


def max_bytes_of(backend: Any) -> int:
    """The bound on the checkpoints' bytes for ``backend`` (see ``checkpoint_max_bytes``)."""
    if backend.checkpoint_max_bytes is not None:
        return int(backend.checkpoint_max_bytes)
    limit = int(getattr(backend, "memory_limit", 0) or 0)
    return limit // 2 if limit else DEFAULT_MAX_BYTES


__all__ = ["DEFAULT_MAX_BYTES", "Checkpoint", "CheckpointOptions", "age", "death_of", "max_bytes_of"]

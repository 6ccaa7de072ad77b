"""A session's checkpoints (docs/checkpoints.md): one taken automatically after each cell that ran
at least the backend's ``checkpoint_min_seconds``, and what every door's commands mean:
``%sandbox checkpoints`` (the table), ``undo``, ``restore N`` / ``restore NAME`` and
``checkpoint NAME``, and the API's ``checkpoint()`` / ``restore()`` / ``undo()``.

Cells are named by their execution count. A checkpoint "after cell N" holds the state as cell N
left it; ``undo`` goes back to the newest checkpoint of the current state's line (the one it was
restored from, and those taken since) taken before the last cell ran: cells in between that
were too short for a checkpoint are undone with it, and the answer says which.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from typing import Any

from ..backends.base import Backend
from ..backends.checkpoint import Checkpoint, age, max_bytes_of
from ..core.errors import CheckpointError, NotSupported, SandboxError
from ..core.events import Outcome
from ..runtime.traits import format_bytes


class SessionCheckpoints:
    """The checkpoints of one session's sandbox.

    Args:
        backend: the session's backend.
    """

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.last_cell: int | None = None
        """The execution count of the last cell that ran in the sandbox (undo goes before it)."""
        self._ran: list[int] = []  # the cells that ran since the state was restored (or began)
        self._line: list[Checkpoint] = []  # the checkpoints of this state's line: restored from, taken since
        self._taking: asyncio.Task | None = None
        self.failed: str | None = None
        """Why the last automatic checkpoint could not be taken, until one is."""

    @property
    def kept(self) -> bool:
        """Whether this sandbox keeps checkpoints (the capability, and the option on)."""
        return self.backend.capabilities.checkpoints and bool(getattr(self.backend, "checkpoints", False))

    def _require(self) -> None:
        if not self.backend.capabilities.checkpoints:
            raise NotSupported(self.backend.name, "checkpoints")
        if not self.kept:
            raise CheckpointError(f"Checkpoints are turned off for this sandbox (--{type(self.backend).__name__}"
                                  ".checkpoints=False).")

    # -- around cells ------------------------------------------------------------------------
    async def before_cell(self) -> None:
        """Wait for an automatic checkpoint still being taken (it belongs to the cell before)."""
        if self._taking is not None:
            with contextlib.suppress(Exception):
                await self._taking
            self._taking = None

    def after_cell(self, outcome: Outcome, seconds: float) -> None:
        """A cell ended with ``outcome`` after ``seconds``: remember it, and take a checkpoint in
        the background when it ran long enough (the next cell waits for it: :meth:`before_cell`)."""
        count = outcome.execution_count
        if not isinstance(count, int):
            return
        self.last_cell = count
        self._ran.append(count)
        threshold = getattr(self.backend, "checkpoint_min_seconds", -1)
        if self.kept and self.backend.started and threshold >= 0 and seconds >= threshold:
            self._taking = asyncio.ensure_future(self._automatic(count))

    async def _automatic(self, cell: int) -> None:
        try:
            self._line.append(await self.backend.checkpoint(cell=cell))
            self.failed = None
        except (SandboxError, OSError) as exc:
            self.failed = str(exc)
            self.backend.log.warning("No checkpoint after cell %s: %s", cell, exc)

    # -- commands ----------------------------------------------------------------------------
    async def take(self, name: str | None = None) -> Checkpoint:
        """A checkpoint now (after the last cell), named ``name`` if given."""
        self._require()
        await self.before_cell()
        taken = await self.backend.checkpoint(name, cell=self.last_cell)
        self._line.append(taken)
        return taken

    async def list(self) -> list[Checkpoint]:
        """The checkpoints held, oldest first."""
        self._require()
        await self.before_cell()
        return await self.backend.list_checkpoints()

    async def restore(self, which: Checkpoint | int | str) -> Checkpoint:
        """Restore the checkpoint after cell ``which`` (an int), named ``which`` (a str), or
        ``which`` itself; the newest of several after one cell.

        Raises:
            CheckpointError: there is none such (the message lists what there is)."""
        found = await self.list()
        if isinstance(which, Checkpoint):
            chosen = next((c for c in found if c.id == which.id), None)
        elif isinstance(which, int) and not isinstance(which, bool):
            chosen = next((c for c in reversed(found) if c.cell == which), None)
        else:
            chosen = next((c for c in reversed(found) if c.name == which), None)
        if chosen is None:
            raise CheckpointError(f"No checkpoint {_named(which)}. {summary(found)}")
        return await self._restore(chosen)

    async def _restore(self, chosen: Checkpoint) -> Checkpoint:
        try:
            restored = await self.backend.restore(chosen.id)
        except CheckpointError:
            self.forget_cells()  # it may run a fresh interpreter now (the message says)
            raise
        self.last_cell, self._ran, self._line = restored.cell, [], [restored]
        return restored

    def forget_cells(self) -> None:
        """A fresh interpreter: its cells are numbered from 1 again, and no state is before it."""
        self.last_cell, self._ran, self._line = None, [], []

    def recovered(self) -> None:
        """The sandbox's kernel died and its keeper put the newest checkpoint in its place."""
        self._line = self._line[-1:]
        self._ran = [cell for cell in self._ran if self._line and cell <= (self._line[0].cell or 0)]

    async def undo(self) -> tuple[Checkpoint, str]:
        """Restore the newest checkpoint taken before the last cell ran; it and which cells
        are undone, as a phrase (``"cell 5"``, ``"cells 4 and 5"``, ``"cells 3 to 9"``).

        Raises:
            CheckpointError: there is none (the message says when checkpoints are taken)."""
        held = {c.id for c in await self.list()}
        last = self.last_cell
        before = [c for c in self._line if c.id in held and last is not None and (c.cell or 0) < last]
        if last is None or not before:
            raise CheckpointError("Nothing to undo: " + ("no cell ran yet." if last is None else
                                  f"no checkpoint was taken before cell {last}. {when_taken(self.backend)}"))
        chosen = before[-1]
        undone = [cell for cell in self._ran if cell > (chosen.cell or 0)]
        restored = await self._restore(chosen)
        return restored, _cells(undone)

    def table(self, found: list[Checkpoint]) -> str:
        """``%sandbox checkpoints``: one row per checkpoint (cell, name, age, size) and a summary."""
        if not found:
            text = "No checkpoints yet. " + when_taken(self.backend)
        else:
            rows = [("cell", "name", "taken", "size")]
            rows += [(str(c.cell) if c.cell is not None else "-", c.name or "", age(c.time),
                      format_bytes(c.bytes) if c.bytes is not None else "?") for c in found]
            widths = [max(len(row[i]) for row in rows) for i in range(4)]
            lines = ["  ".join(cell.rjust(w) if i in (0, 3) else cell.ljust(w) for i, (cell, w) in
                               enumerate(zip(row, widths))).rstrip() for row in rows]
            total = sum(c.bytes or 0 for c in found)
            bound = max_bytes_of(self.backend)
            lines.append(f"{len(found)} checkpoint{'s' if len(found) != 1 else ''}, {format_bytes(total)} of memory "
                         f"(kept: at most {self.backend.checkpoint_keep or 'any number'}, "
                         f"{format_bytes(bound) if bound else 'any size'}). "
                         "%sandbox undo | restore N | restore NAME | checkpoint NAME")
            text = "\n".join(lines)
        if self.failed:
            text += f"\nThe last automatic checkpoint failed: {self.failed}"
        return text


def when_taken(backend: Any) -> str:
    """When this sandbox takes checkpoints, in a sentence."""
    threshold = getattr(backend, "checkpoint_min_seconds", -1)
    if threshold < 0:
        return "Checkpoints are taken only with %sandbox checkpoint NAME."
    after = "every cell" if threshold == 0 else f"each cell that runs at least {threshold:g} s"
    return f"A checkpoint is taken after {after}, and with %sandbox checkpoint NAME."


def summary(found: list[Checkpoint]) -> str:
    """What checkpoints there are, in a sentence (for an error)."""
    if not found:
        return "There are no checkpoints."
    cells = sorted({c.cell for c in found if c.cell is not None})
    names = sorted({c.name for c in found if c.name})
    parts = ([f"after cell{'s' if len(cells) > 1 else ''} {', '.join(map(str, cells))}"] if cells else []) + \
            ([f"named {', '.join(names)}"] if names else [])
    return f"There are checkpoints {' and '.join(parts)} (%sandbox checkpoints)."


def _cells(cells: list[int]) -> str:
    if not cells:
        return "what came after it"
    if len(cells) == 1:
        return f"cell {cells[0]}"
    if len(cells) == 2:
        return f"cells {cells[0]} and {cells[1]}"
    return f"cells {cells[0]} to {cells[-1]}"


def _named(which: Any) -> str:
    if isinstance(which, Checkpoint):
        return f"{which.id}"
    return f"after cell {which}" if isinstance(which, int) else f"named {which!r}"


NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")
VERBS = {"checkpoints": (0, 0), "undo": (0, 0), "restore": (1, 1), "checkpoint": (0, 1)}
"""The checkpoint commands of ``%sandbox``: ``verb: (least, most arguments)``."""


def check_name(name: str) -> str:
    """``name`` as a checkpoint's name.

    Raises:
        CheckpointError: not a name (letters, digits, ``_.-``, not starting with a digit)."""
    if not NAME.fullmatch(name):
        raise CheckpointError(f"{name!r} is not a checkpoint name: use letters, digits, _ . - (not a number first, "
                              "since restore N means the checkpoint after cell N).")
    return name


async def command(checkpoints: SessionCheckpoints, verb: str, args: list[str]) -> str:
    """The answer to ``%sandbox VERB ARGS`` for a verb of :data:`VERBS` (the kernel's and the
    magic's line commands both call this).

    Raises:
        CheckpointError, NotSupported: one line, said as the answer's error."""
    if verb == "checkpoints":
        return checkpoints.table(await checkpoints.list())
    if verb == "undo":
        restored, undone = await checkpoints.undo()
        return f"Undone {undone}: the sandbox runs on {restored.phrase()} (files are not undone)."
    if verb == "restore":
        which: int | str = int(args[0]) if args[0].isdigit() else check_name(args[0])
        restored = await checkpoints.restore(which)
        return f"Restored: the sandbox runs on {restored.phrase()} (files are as they are now)."
    taken = await checkpoints.take(check_name(args[0]) if args else None)
    return f"Checkpoint taken: {taken.what()}."

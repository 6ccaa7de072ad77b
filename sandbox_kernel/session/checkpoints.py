"""A session's checkpoints (docs/how-to/checkpoints.md): one taken automatically after each cell that ran
at least the backend's ``checkpoint_min_seconds``, and what every door's commands mean:
``%sandbox checkpoints`` (the table), ``undo``, ``restore N`` / ``restore NAME`` and
``checkpoint NAME``, and the API's ``checkpoint()`` / ``restore()`` / ``undo()``.

Cells are named by their execution count. A checkpoint "after cell N" holds the state as cell N
left it; ``undo`` goes back to the newest checkpoint of the current state's line (the one it was
restored from, and those taken since) taken before the last cell ran: cells in between that
were too short for a checkpoint are undone with it, and the answer says which.
"""

from __future__ import annotations

import re
from typing import Any

from ..backends.base import Backend
from ..backends.checkpoint import Checkpoint, age, max_bytes_of
from ..core.errors import CheckpointError, NotSupported
from ..core.events import Outcome
from ..runtime.traits import format_bytes


class SessionCheckpoints:
    """The checkpoints of one session's sandbox. The automatic ones are the kernel's own (it
    checkpoints itself at the end of each cell that ran ``checkpoint_min_seconds``, before it
    answers: :func:`~sandbox_kernel.backends.checkpoint.inside.configure`); this class knows the
    line the session's state came down: the checkpoint it was restored from, the cells run since,
    and the checkpoints taken after those cells (ids above :attr:`_since`, the keeper's numbers
    grow).

    Args:
        backend: the session's backend.
    """

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.last_cell: int | None = None
        """The execution count of the last cell that ran in the sandbox (undo goes before it)."""
        self._ran: list[int] = []  # the cells that ran since the state was restored (or began)
        self._base: Checkpoint | None = None  # the checkpoint the state was restored from
        self._since = 0  # the newest checkpoint's id when the state was restored: later ones are of this line

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

    # -- the line of the state -------------------------------------------------------------------
    def after_cell(self, outcome: Outcome) -> None:
        """A cell ended with ``outcome`` (its checkpoint, if it ran long enough, is taken already)."""
        if isinstance(outcome.execution_count, int):
            self.last_cell = outcome.execution_count
            self._ran.append(outcome.execution_count)

    def _restart_line(self, base: Checkpoint | None, since: int) -> None:
        self._base, self._since, self._ran = base, since, []
        self.last_cell = base.cell if base is not None else None

    async def forget_cells(self) -> None:
        """A fresh interpreter: its cells are numbered from 1 again, and no state is before it."""
        held = await self.backend.list_checkpoints() if self.kept and self.backend.started else []
        self._restart_line(None, max((c.id for c in held), default=0))

    def recovered(self, checkpoint: Checkpoint | None) -> None:
        """The sandbox's kernel died and its keeper put ``checkpoint`` (its newest) in its place."""
        if checkpoint is not None:
            self._restart_line(checkpoint, checkpoint.id)

    def _line(self, held: list[Checkpoint]) -> list[Checkpoint]:
        """The checkpoints of the state's line, oldest first: its base, then those taken since."""
        cells = {*self._ran, *([self._base.cell] if self._base is not None else [])}
        later = [c for c in held if c.id > self._since and c.cell in cells]
        base = [c for c in held if self._base is not None and c.id == self._base.id]
        return base + later

    # -- commands ----------------------------------------------------------------------------
    async def take(self, name: str | None = None) -> Checkpoint:
        """A checkpoint now (after the last cell), named ``name`` if given."""
        self._require()
        return await self.backend.checkpoint(name, cell=self.last_cell)

    async def list(self) -> list[Checkpoint]:
        """The checkpoints held, oldest first."""
        self._require()
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
        return await self._restore(chosen, found)

    async def _restore(self, chosen: Checkpoint, held: list[Checkpoint]) -> Checkpoint:
        try:
            restored = await self.backend.restore(chosen.id)
        except CheckpointError:
            await self.forget_cells()  # it may run a fresh interpreter now (the message says)
            raise
        self._restart_line(restored, max((c.id for c in held), default=0))
        return restored

    async def undo(self) -> tuple[Checkpoint, str]:
        """Restore the newest checkpoint of the state's line taken before the last cell ran; it
        and which cells are undone, as a phrase (``"cell 5"``, ``"cells 4 and 5"``, ``"cells 3
        to 9"``).

        Raises:
            CheckpointError: there is none (the message says when checkpoints are taken)."""
        held = await self.list()
        last = self.last_cell
        before = [c for c in self._line(held) if last is not None and (c.cell or 0) < last]
        if last is None or not before:
            raise CheckpointError("Nothing to undo: " + ("no cell ran yet." if last is None else
                                  f"no checkpoint was taken before cell {last}. {when_taken(self.backend)}"))
        chosen = before[-1]
        undone = [cell for cell in self._ran if cell > (chosen.cell or 0)]
        return await self._restore(chosen, held), _cells(undone)

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


def check_name(name: str) -> str:
    """``name`` as a checkpoint's name.

    Raises:
        CheckpointError: not a name (letters, digits, ``_.-``, not starting with a digit)."""
    if not NAME.fullmatch(name):
        raise CheckpointError(f"{name!r} is not a checkpoint name: use letters, digits, _ . - (not a number first, "
                              "since restore N means the checkpoint after cell N).")
    return name


async def command(checkpoints: SessionCheckpoints, verb: str, args: list[str]) -> str:
    """The answer to ``%sandbox VERB ARGS`` for ``checkpoints``, ``undo``, ``restore`` and ``checkpoint``
    (their entries in :data:`.verbs.VERBS`, which the kernel's lines and the magic both answer; the
    table has checked the number of arguments).

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

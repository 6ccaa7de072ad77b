"""``%sandbox`` lines that a session answers itself, before anything reaches the sandbox: what a
kernel user has of the magic's line commands (the table and parser of both: :mod:`.verbs`). A cell
may start with such lines; the rest of it runs in the sandbox as usual (``%timeit``, ``%pip``,
``!ls`` included: the sandbox's IPython knows them), and so does a ``%sandbox`` line that is not
one of these commands as written here (the magic loaded in the sandbox itself has ``%sandbox
status SESSION``, ``--name``...). The kernel's commands are :func:`.verbs.verbs` ``("kernel")``:
``status``, ``restart``, ``stop``, ``upload``, ``download``, ``artifacts``, ``allow`` and the
checkpoints' ``checkpoints``, ``undo``, ``restore`` and ``checkpoint``.

A cell's text is the notebook's, and a notebook may come from anyone; ``upload`` and ``download``
touch the host's files, so under ``file_commands="ask"`` (the kernel's default) they first ask
the notebook user through the frontend's stdin, and are refused where there is none (nbclient,
papermill) with the option that allows them. See docs/explanation/security.md.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.errors import LineUsageError, SandboxError
from ..core.events import Emit, Error, Outcome, Stream
from ..runtime.traits import format_bytes
from . import verbs
from .files import refuse_overwrite
from .verbs import KERNEL, Command

LINE = re.compile(r"^\s*%sandbox(?:\s|$)")
USAGE = verbs.usage(KERNEL)
FILE_COMMANDS = ("ask", "allow", "deny")

Ask = Callable[[str, bool], Awaitable[str]]

CONSENTS = {
    "files": ("they are turned off", "allow them with --{setting}=allow (a notebook's cells then may read and write "
              "your files)", "Not copied: you said no."),
    "egress": ("it is turned off", "allow it with --{setting}=allow, or add the hosts to allow_hosts",
               "Not allowed: you said no."),
}
"""For each kind of act a line asks about: how its setting's ``deny`` is said, how to allow it, and
what a "no" says."""


def takes(line: str) -> bool:
    """Whether ``line`` is one of the kernel's commands with arguments it accepts
    (:func:`.verbs.takes`). Any other ``%sandbox`` line is left to the sandbox, whose IPython may
    know it (the magic loaded in the sandbox itself has ``%sandbox status SESSION``, ``--name``,
    ``push``...)."""
    return bool(LINE.match(line)) and verbs.takes(LINE.sub("", line, count=1), KERNEL)


def leading(code: str) -> tuple[list[str], str]:
    """The cell's leading ``%sandbox`` lines a session answers (blank lines between them skipped;
    :func:`takes`), and the rest, which runs in the sandbox."""
    lines = code.split("\n")
    found: list[str] = []
    i = 0
    while i < len(lines) and (not lines[i].strip() or takes(lines[i].strip())):
        if lines[i].strip():
            found.append(lines[i].strip())
        i += 1
    return found, "\n".join(lines[i:]) if found else code


@dataclass
class _Asking:
    """The kernel as the :class:`~.verbs.Door` of one line: its session, and the user to ask."""

    lines: Lines
    stdin: Ask | None
    subject: str = "The sandbox"

    @property
    def session(self) -> Any:
        return self.lines.session

    async def consent(self, kind: str, question: str, about: str) -> None:
        mode, setting = ((self.lines.file_commands, self.lines.setting) if kind == "files" else
                         (self.lines.egress_commands, self.lines.egress_setting))
        if mode == "allow":
            return
        denied, fix, said_no = CONSENTS[kind]
        if mode == "deny" or self.stdin is None:
            why = denied if mode == "deny" else "this run has no way to ask you (no stdin: nbclient, papermill)"
            raise SandboxError(f"{about}, and {why}: {fix.format(setting=setting)}.")
        answer = await self.stdin(f"{question} [y/N] ", False)
        if answer.strip().lower() not in ("y", "yes"):
            raise SandboxError(said_no)


class Lines:
    """The ``%sandbox`` lines of one session, for a door that answers them.

    Args:
        session: the :class:`~.session.SandboxSession` (not imported: it imports this). folder: the host's folder (relative host paths start there).
        file_commands: ``ask`` (upload and download ask the notebook user first), ``allow``,
            ``deny``. setting: the option that sets it, named when a command is refused.
        egress_commands, egress_setting: the same for ``allow``.
    """

    def __init__(self, session: Any, folder: Path, file_commands: str = "ask",
                 setting: str = "SandboxKernel.file_commands", egress_commands: str = "ask",
                 egress_setting: str = "SandboxKernel.egress_commands") -> None:
        self.session, self.folder, self.file_commands, self.setting = session, folder, file_commands, setting
        self.egress_commands, self.egress_setting = egress_commands, egress_setting

    async def run(self, line: str, sink: Emit, stdin: Ask | None) -> Outcome:
        """Answer one ``%sandbox`` line into ``sink``; a bad line or a refusal is one Error."""
        door = _Asking(self, stdin)
        try:
            command = verbs.parse(LINE.sub("", line, count=1), KERNEL)
            answer = command.verb.run or getattr(self, f"_do_{command.verb.name}")
            text = await answer(door, command)
        except (SandboxError, OSError) as exc:  # a host folder that is a file, read-only, ...: one line
            return self._error(sink, exc)
        sink(Stream("stdout", text + "\n"))
        return Outcome("ok", None)

    def _error(self, sink: Emit, exc: BaseException) -> Outcome:
        name = "UsageError" if isinstance(exc, LineUsageError) else type(exc).__name__
        error = Error(name, str(exc), [f"{name}: {exc}"])
        sink(error)
        return Outcome("error", None, error)

    # -- the kernel's answers (the shared ones are the table's: .verbs) -------------------------
    async def _do_status(self, door: _Asking, command: Command) -> str:
        info = {k: v for k, v in self.session.describe().items() if v not in (None, "", {}, [])}
        if (usage := await self.session.usage()) and usage.get("memory_bytes") is not None:
            info["memory"] = format_bytes(usage["memory_bytes"])
        info["running"] = self.session.started
        if view := self.session.files.view:
            info["workspace"] = view.note().strip("[]\n")
        info["artifacts"] = f"{len(self.session.files.ledger.files):,} files written so far"
        return "\n".join(f"{key}: {value}" for key, value in info.items())

    async def _do_upload(self, door: _Asking, command: Command) -> str:
        given = command.args[0]
        local = (self.folder / Path(given).expanduser()).resolve()
        remote = command.args[1] if len(command.args) > 1 else local.name
        if not local.is_file():
            raise FileNotFoundError(f"no such file on this computer: {given} (in {self.folder})")
        await door.consent("files", f"Copy {local} ({format_bytes(local.stat().st_size)}) into the sandbox as "
                                    f"{remote}?", _FILES)
        where = await self.session.upload(local, remote)
        return f"Uploaded {given} to {where}."

    async def _do_download(self, door: _Asking, command: Command) -> str:
        overwrite = "--overwrite" in command.flags
        if command.verb.form == "--artifacts":
            names = sorted(self.session.files.ledger.files)
            if not names:
                return "No artifacts yet: no cell has written a file in the working directory."
            shown = ", ".join(names[:10]) + (f" and {len(names) - 10:,} more" if len(names) > 10 else "")
            await door.consent("files", f"Copy {len(names):,} file{'s' if len(names) != 1 else ''} ({shown}) from the "
                                        f"sandbox into {self.folder}?", _FILES)
            copied = await self.session.files.download_all(self.folder, overwrite=overwrite)
            return "\n".join(copied.lines())
        remote = command.args[0]
        local = self.folder / (command.args[1] if len(command.args) > 1 else Path(remote).name)
        refuse_overwrite(local, overwrite)  # before asking
        await door.consent("files", f"Copy {remote} from the sandbox to {local}?", _FILES)
        await self.session.files.download_one(remote, local, overwrite=overwrite)
        return f"Downloaded {remote} to {local}."

    async def _do_restart(self, door: _Asking, command: Command) -> str:
        await self.session.restart()
        kept = " (%sandbox restore brings a checkpoint back)" if self.session.checkpoints.kept else ""
        return f"Restarted: a fresh interpreter; variables are gone{kept}."

    async def _do_stop(self, door: _Asking, command: Command) -> str:
        await self.session.shutdown()
        self.session.files.replaced()
        return "Stopped the sandbox; the next cell starts a fresh one."


_FILES = "%sandbox upload/download touch this computer's files"


__all__ = ["FILE_COMMANDS", "LINE", "Lines", "USAGE", "leading", "takes"]

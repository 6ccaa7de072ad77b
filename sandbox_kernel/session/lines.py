"""``%sandbox`` lines that a session answers itself, before anything reaches the sandbox: what a
kernel user has of the magic's line commands. A cell may start with such lines; the rest of it
runs in the sandbox as usual (``%timeit``, ``%pip``, ``!ls`` included: the sandbox's IPython knows
them), and so does a ``%sandbox`` line that is not one of these commands as written here (the
magic loaded in the sandbox itself has ``%sandbox status SESSION``, ``--name``...)::

    %sandbox status                          backend, sandbox, limits, workspace, memory
    %sandbox artifacts                       the files cells wrote so far
    %sandbox upload LOCAL [REMOTE]           a host file into the working directory
    %sandbox download REMOTE [LOCAL] [--overwrite]   a sandbox file into the host's folder
    %sandbox download --artifacts [--overwrite]      the files cells wrote, into the host's folder
    %sandbox allow HOST ...                  let the sandbox reach HOST as well (egress allowlist)
    %sandbox restart                         a fresh interpreter
    %sandbox stop                            the sandbox goes; the next cell starts a fresh one

A cell's text is the notebook's, and a notebook may come from anyone; ``upload`` and ``download``
touch the host's files, so under ``file_commands="ask"`` (the kernel's default) they first ask
the notebook user through the frontend's stdin, and are refused where there is none (nbclient,
papermill) with the option that allows them. See docs/explanation/security.md.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from ..core.errors import LineUsageError, SandboxError
from ..core.events import Emit, Error, Outcome, Stream
from ..runtime.traits import format_bytes
from .files import refuse_overwrite

LINE = re.compile(r"^\s*%sandbox(?:\s|$)")
USAGE = ("%sandbox status | artifacts | upload LOCAL [REMOTE] | download REMOTE [LOCAL] | download --artifacts "
         "[--overwrite] | allow HOST ... | restart | stop")
FILE_COMMANDS = ("ask", "allow", "deny")

Ask = Callable[[str, bool], Awaitable[str]]


def UsageError(message: str) -> LineUsageError:
    """A ``%sandbox`` line that is not a command: one line, with the usage."""
    return LineUsageError(message, USAGE)


OWN = {"status": (0, 0, ()), "artifacts": (0, 0, ()), "restart": (0, 0, ()), "stop": (0, 0, ()),
       "upload": (1, 2, ()), "download": (0, 2, ("--artifacts", "--overwrite")), "allow": (1, 64, ())}
"""The commands a session answers: ``name: (least, most positional arguments, flags)``."""


def takes(line: str) -> bool:
    """Whether ``line`` is one of :data:`OWN`'s commands with arguments it accepts. Any other
    ``%sandbox`` line is left to the sandbox, whose IPython may know it (the magic loaded in the
    sandbox itself has ``%sandbox status SESSION``, ``--name``, ``push``...)."""
    try:
        words = shlex.split(line)
    except ValueError:
        return False
    if len(words) < 2 or words[0] != "%sandbox" or words[1] not in OWN:
        return False
    least, most, flags = OWN[words[1]]
    positional = [w for w in words[2:] if not w.startswith("-")]
    return all(w in flags for w in words[2:] if w.startswith("-")) and least <= len(positional) <= most


def leading(code: str) -> tuple[list[str], str]:
    """The cell's leading ``%sandbox`` lines a session answers (blank lines between them skipped;
    :func:`takes`), and the rest, which runs in the sandbox."""
    lines = code.split("\n")
    found: list[str] = []
    i = 0
    while i < len(lines) and (not lines[i].strip() or (LINE.match(lines[i]) and takes(lines[i].strip()))):
        if lines[i].strip():
            found.append(lines[i].strip())
        i += 1
    return found, "\n".join(lines[i:]) if found else code


class Lines:
    """The ``%sandbox`` lines of one session, for a door that answers them.

    Args:
        session: the :class:`~.session.SandboxSession` (not imported: it imports this). folder: the host's folder (relative host paths start there).
        file_commands: ``ask`` (upload and download ask the notebook user first), ``allow``,
            ``deny``. setting: the option that sets it, named when a command is refused.
    """

    def __init__(self, session: Any, folder: Path, file_commands: str = "ask",
                 setting: str = "SandboxKernel.file_commands", egress_commands: str = "ask",
                 egress_setting: str = "SandboxKernel.egress_commands") -> None:
        self.session, self.folder, self.file_commands, self.setting = session, folder, file_commands, setting
        self.egress_commands, self.egress_setting = egress_commands, egress_setting

    async def run(self, line: str, sink: Emit, stdin: Ask | None) -> Outcome:
        """Answer one ``%sandbox`` line into ``sink``; a bad line or a refusal is one Error."""
        try:
            words = shlex.split(line)[1:]
        except ValueError as exc:
            return self._error(sink, UsageError(f"%sandbox line not understood ({exc})"))
        command, args = (words[0], words[1:]) if words else ("", [])
        handler = getattr(self, f"_do_{command}", None)
        try:
            if handler is None:
                raise UsageError(f"unknown %sandbox command {command!r}" if command else "%sandbox needs a command")
            text = await handler(args, stdin)
        except (SandboxError, OSError) as exc:  # a host folder that is a file, read-only, ...: one line
            return self._error(sink, exc)
        sink(Stream("stdout", text + "\n"))
        return Outcome("ok", None)

    def _error(self, sink: Emit, exc: BaseException) -> Outcome:
        name = "UsageError" if isinstance(exc, LineUsageError) else type(exc).__name__
        error = Error(name, str(exc), [f"{name}: {exc}"])
        sink(error)
        return Outcome("error", None, error)

    async def _confirm(self, question: str, stdin: Ask | None) -> None:
        if self.file_commands == "allow":
            return
        if self.file_commands == "deny" or stdin is None:
            why = "they are turned off" if self.file_commands == "deny" else \
                "this run has no way to ask you (no stdin: nbclient, papermill)"
            raise SandboxError(f"%sandbox upload/download touch this computer's files, and {why}: allow them with "
                               f"--{self.setting}=allow (a notebook's cells then may read and write your files).")
        answer = await stdin(f"{question} [y/N] ", False)
        if answer.strip().lower() not in ("y", "yes"):
            raise SandboxError("Not copied: you said no.")

    # -- the commands ------------------------------------------------------------------------
    async def _do_status(self, args: list[str], stdin: Ask | None) -> str:
        _no_args("status", args)
        info = {k: v for k, v in self.session.describe().items() if v not in (None, "", {}, [])}
        if (usage := await self.session.usage()) and usage.get("memory_bytes") is not None:
            info["memory"] = format_bytes(usage["memory_bytes"])
        info["running"] = self.session.started
        if view := self.session.files.view:
            info["workspace"] = view.note().strip("[]\n")
        info["artifacts"] = f"{len(self.session.files.ledger.files):,} files written so far"
        return "\n".join(f"{key}: {value}" for key, value in info.items())

    async def _do_artifacts(self, args: list[str], stdin: Ask | None) -> str:
        _no_args("artifacts", args)
        return self.session.files.summary()

    async def _do_upload(self, args: list[str], stdin: Ask | None) -> str:
        paths = _positional("upload", args, 1, 2)
        local = (self.folder / Path(paths[0]).expanduser()).resolve()
        remote = paths[1] if len(paths) > 1 else local.name
        if not local.is_file():
            raise FileNotFoundError(f"no such file on this computer: {paths[0]} (in {self.folder})")
        await self._confirm(f"Copy {local} ({format_bytes(local.stat().st_size)}) into the sandbox as {remote}?", stdin)
        where = await self.session.upload(local, remote)
        return f"Uploaded {paths[0]} to {where}."

    async def _do_download(self, args: list[str], stdin: Ask | None) -> str:
        flags = {a for a in args if a.startswith("--")}
        if unknown := flags - {"--artifacts", "--overwrite"}:
            raise UsageError(f"unknown option {sorted(unknown)[0]} for download")
        rest = [a for a in args if not a.startswith("--")]
        if "--artifacts" in flags:
            _no_args("download --artifacts", rest)
            names = sorted(self.session.files.ledger.files)
            if not names:
                return "No artifacts yet: no cell has written a file in the working directory."
            shown = ", ".join(names[:10]) + (f" and {len(names) - 10:,} more" if len(names) > 10 else "")
            await self._confirm(f"Copy {len(names):,} file{'s' if len(names) != 1 else ''} ({shown}) from the sandbox "
                                f"into {self.folder}?", stdin)
            copied = await self.session.files.download_all(self.folder, overwrite="--overwrite" in flags)
            return "\n".join(copied.lines())
        paths = _positional("download", rest, 1, 2)
        local = self.folder / (paths[1] if len(paths) > 1 else Path(paths[0]).name)
        overwrite = "--overwrite" in flags
        refuse_overwrite(local, overwrite)  # before asking
        await self._confirm(f"Copy {paths[0]} from the sandbox to {local}?", stdin)
        await self.session.files.download_one(paths[0], local, overwrite=overwrite)
        return f"Downloaded {paths[0]} to {local}."

    async def _do_allow(self, args: list[str], stdin: Ask | None) -> str:
        hosts = _positional("allow", args, 1, 64)
        if self.egress_commands != "allow":
            if self.egress_commands == "deny" or stdin is None:
                why = "it is turned off" if self.egress_commands == "deny" else \
                    "this run has no way to ask you (no stdin: nbclient, papermill)"
                raise SandboxError(f"%sandbox allow lets the sandbox send data to {', '.join(hosts)}, and {why}: "
                                   f"allow it with --{self.egress_setting}=allow, or add the hosts to allow_hosts.")
            answer = await stdin(f"Let the sandbox reach {', '.join(hosts)} (it may send your data there)? [y/N] ",
                                 False)
            if answer.strip().lower() not in ("y", "yes"):
                raise SandboxError("Not allowed: you said no.")
        in_force = await self.session.allow(*hosts)
        return f"The sandbox may now reach: {', '.join(in_force)}."

    async def _do_restart(self, args: list[str], stdin: Ask | None) -> str:
        _no_args("restart", args)
        await self.session.restart()
        return "Restarted: a fresh interpreter; variables are gone."

    async def _do_stop(self, args: list[str], stdin: Ask | None) -> str:
        _no_args("stop", args)
        await self.session.shutdown()
        self.session.files.replaced()
        return "Stopped the sandbox; the next cell starts a fresh one."


def _no_args(command: str, args: list[str]) -> None:
    if args:
        raise UsageError(f"{command} takes no arguments")


def _positional(command: str, args: list[str], least: int, most: int) -> list[str]:
    if not least <= len(args) <= most:
        raise UsageError(f"{command} takes {least} to {most} arguments, not {len(args)}")
    return args


__all__ = ["FILE_COMMANDS", "LINE", "Lines", "OWN", "USAGE", "UsageError", "leading", "takes"]

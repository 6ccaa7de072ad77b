"""The ``%sandbox`` line commands: one table of verbs, and the one parser every door uses.

A sandbox kernel answers the ``%sandbox`` lines at the top of a cell itself (:mod:`.lines`); the
``%%sandbox`` magic answers its ``%sandbox`` line magic. Both read :data:`VERBS` and parse with
:func:`parse`, so a verb's arguments, options, usage and errors are written once. A door that
holds many sessions (the magic) names one with ``--name SESSION`` or a positional ``SESSION``
(:attr:`Verb.session`); a door with one session (the kernel) names none, and leaves a line that
does to the sandbox, whose IPython may have the magic loaded.

A verb whose answer is the same at every door carries it (:attr:`Verb.run`, given a
:class:`Door`): adding such a verb is one entry here. The others are answered by each door's
own handler of the same name (the magic's ``status`` is a widget, its ``stop`` forgets a session).

The table is also the reference: :func:`usage` is the one-line usage each door shows with an
error, :func:`reference` the rows of a documentation table.
"""

from __future__ import annotations

import shlex
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..core.errors import LineUsageError
from . import checkpoints

KERNEL, MAGIC = "kernel", "magic"
"""The doors that answer ``%sandbox`` lines: a sandbox kernel, and the ``%%sandbox`` magic."""
BOTH = frozenset({KERNEL, MAGIC})

NAME_OPTIONS = ("--name", "-n")
"""How a line names its session at the magic (``--name SESSION``, ``-n SESSION``, ``--name=SESSION``)."""


class Door(Protocol):
    """What a verb's shared answer (:attr:`Verb.run`) is given by the door that runs it."""

    session: Any
    """The :class:`~.session.SandboxSession` the line is about."""
    subject: str
    """How a sentence names that session: ``The sandbox`` (kernel), ``Session 'etl'`` (magic)."""

    async def consent(self, kind: str, question: str, about: str) -> None:
        """Ask the user before an act of ``kind`` (``files``, ``egress``) that ``about`` words;
        raise :class:`~sandbox_kernel.core.errors.SandboxError` when it is refused."""


Answer = Callable[[Door, "Command"], Awaitable[str]]
"""``await run(door, command) -> str``: a verb's answer, the text the door shows."""


@dataclass(frozen=True)
class Verb:
    """One ``%sandbox`` command (one form of it: ``download --artifacts`` is a form of ``download``).

    Attributes:
        name: the verb (``upload``).
        args: its positional arguments as the usage shows them: ``LOCAL [REMOTE]`` (one needed,
            one optional), ``HOST ...`` (one or more), empty for none.
        flags: the on/off options it takes (``--overwrite``).
        form: the flag that selects this form of :attr:`name` (``--artifacts``); empty: the plain form.
        session: how the magic names the session: ``--name`` (``--name SESSION``, default
            ``default``), ``[SESSION]`` (optional, default all), ``SESSION``, ``SESSION|--all``, or
            empty (not about one session). The kernel has one session and names none.
        doors: the doors that answer it.
        most: the most arguments a list (``HOST ...``) takes; None: no bound.
        help: what it does, one line, for the reference.
        run: its answer where that is the same at every door; None: each door answers it itself.
    """

    name: str
    args: str = ""
    flags: tuple[str, ...] = ()
    form: str = ""
    session: str = "--name"
    doors: frozenset[str] = BOTH
    most: int | None = 64
    help: str = ""
    run: Answer | None = field(default=None, compare=False)

    @property
    def least_args(self) -> int:
        return len([word for word in self.args.split() if not word.startswith("[") and word != "..."])

    @property
    def most_args(self) -> float:
        if "..." not in self.args.split():
            return len(self.args.split())
        return float("inf") if self.most is None else self.most

    def arity(self) -> str:
        """``takes no arguments``, ``takes 1 argument``, ``takes 1 to 2 arguments``, ``takes 1 or more
        arguments``."""
        least, most = self.least_args, self.most_args
        if most == float("inf"):
            return f"takes {least} or more arguments"
        if most == 0:
            return "takes no arguments"
        if least == most:
            return f"takes {least} argument{'s' if least != 1 else ''}"
        return f"takes {least} to {most} arguments"

    def usage(self, door: str) -> str:
        """The verb as the usage line of ``door`` writes it (``upload LOCAL [REMOTE] [--name SESSION]``)."""
        words = [self.name, self.form, self.args, *(f"[{flag}]" for flag in self.flags)]
        if door == MAGIC and self.session:
            words.append(self.session if self.session != "--name" else "[--name SESSION]")
        return " ".join(word for word in words if word)


@dataclass(frozen=True)
class Command:
    """One parsed ``%sandbox`` line.

    Attributes:
        verb: the table's entry (the form the flags chose).
        args: the positional arguments.
        flags: the flags given (the form's included).
        session: the session the line names (magic), or None: the door's default.
        every: ``stop --all``.
    """

    verb: Verb
    args: tuple[str, ...] = ()
    flags: frozenset[str] = frozenset()
    session: str | None = None
    every: bool = False


# -- the answers that are the same at every door ------------------------------------------------
async def _artifacts(door: Door, command: Command) -> str:
    return door.session.files.summary()


async def _allow(door: Door, command: Command) -> str:
    hosts = ", ".join(command.args)
    await door.consent("egress", f"Let the sandbox reach {hosts} (it may send your data there)?",
                       f"%sandbox allow lets the sandbox send data to {hosts}")
    in_force = await door.session.allow(*command.args)
    return f"{door.subject} may now reach: {', '.join(in_force)}."


async def _checkpoints(door: Door, command: Command) -> str:
    """``checkpoints``, ``undo``, ``restore N|NAME``, ``checkpoint [NAME]``: :func:`.checkpoints.command`."""
    return await checkpoints.command(door.session.checkpoints, command.verb.name, list(command.args))


VERBS: tuple[Verb, ...] = (
    Verb("list", session="", doors=frozenset({MAGIC}), help="the sessions: backend, state, uptime, cells"),
    Verb("status", session="[SESSION]", help="backend, sandbox id, state, limits, memory"),
    Verb("restart", session="SESSION", help="a fresh interpreter, the same settings; state is lost"),
    Verb("stop", session="SESSION|--all", help="shut the sandbox down; the next cell starts a fresh one"),
    Verb("upload", "LOCAL [REMOTE]", help="a host file into the sandbox's working directory"),
    Verb("download", "REMOTE [LOCAL]", flags=("--overwrite",),
         help="a sandbox file into the host's folder (1 GiB at most)"),
    Verb("download", form="--artifacts", flags=("--overwrite",),
         help="the files cells wrote, at the same paths"),
    Verb("artifacts", help="list the files cells created or changed", run=_artifacts),
    Verb("allow", "HOST ...", help="the sandbox may reach HOST as well, its state kept",
         run=_allow),
    Verb("push", "NAME ...", doors=frozenset({MAGIC}), most=None, help="host variables into the sandbox"),
    Verb("pull", "NAME ...", doors=frozenset({MAGIC}), most=None, help="sandbox variables onto the host"),
    Verb("checkpoints", help="the checkpoints kept: cell, name, age, size", run=_checkpoints),
    Verb("undo", help="the state as before the last cell (files are not undone)", run=_checkpoints),
    Verb("restore", "N|NAME", help="the state as after cell N, or as the checkpoint named NAME", run=_checkpoints),
    Verb("checkpoint", "[NAME]", help="a checkpoint of the state now, named NAME", run=_checkpoints),
)
"""Every ``%sandbox`` verb, in the order the usage and the reference list them."""


def verbs(door: str) -> list[Verb]:
    """The table's entries that ``door`` answers, in order."""
    return [verb for verb in VERBS if door in verb.doors]


def usage(door: str) -> str:
    """The one-line usage of ``door``'s ``%sandbox`` commands."""
    return "%sandbox " + " | ".join(verb.usage(door) for verb in verbs(door))


def reference(door: str) -> list[tuple[str, str]]:
    """``(usage, help)`` of each of ``door``'s verbs: the rows of a reference table."""
    return [(f"%sandbox {verb.usage(door)}", verb.help) for verb in verbs(door)]


def _error(door: str, message: str) -> LineUsageError:
    return LineUsageError(message, usage(door))


def split(text: str, door: str) -> list[str]:
    """The words of a line (shell quoting), or a usage error."""
    try:
        return shlex.split(text)
    except ValueError as exc:
        raise _error(door, f"cannot parse the line ({exc})") from None


def _forms(name: str, door: str) -> list[Verb]:
    return [verb for verb in verbs(door) if verb.name == name]


def _take_session(verb: Verb, words: list[str], door: str) -> tuple[str | None, list[str]]:
    """The ``--name SESSION`` of a magic line, and the other words."""
    if door != MAGIC or verb.session != "--name":
        return None, words
    found, rest, i = None, [], 0
    while i < len(words):
        option, sep, value = words[i].partition("=")
        if option in NAME_OPTIONS:
            if not sep:
                if i + 1 >= len(words):
                    raise _error(door, f"{option} needs a value")
                i, value = i + 1, words[i + 1]
            found = value
        else:
            rest.append(words[i])
        i += 1
    return found, rest


def parse(text: str, door: str) -> Command:
    """The :class:`Command` of a ``%sandbox`` line's ``text`` (the words after ``%sandbox``) at ``door``.

    Raises:
        LineUsageError: an unknown verb or option, a missing value, too few or too many
            arguments; one line, with ``door``'s usage.
    """
    words = split(text, door)
    if not words:
        raise _error(door, "%sandbox needs a command")
    forms = _forms(words[0], door)
    if not forms:
        raise _error(door, f"unknown command {words[0]!r}")
    verb = next((form for form in forms if form.form and form.form in words[1:]), forms[0])
    session, rest = _take_session(verb, words[1:], door)
    if door == MAGIC and verb.session == "SESSION|--all" and rest == ["--all"]:
        return Command(verb, every=True)
    flags = [word for word in rest if word.startswith("-")]
    for flag in flags:
        if flag not in (*verb.flags, verb.form):
            raise _error(door, f"unknown option {flag} for {verb.name}")
    args = [word for word in rest if not word.startswith("-")]
    if door == MAGIC and verb.session in ("SESSION", "[SESSION]", "SESSION|--all"):
        needed = 0 if verb.session == "[SESSION]" else 1
        if not needed <= len(args) <= 1:
            raise _error(door, f"{verb.name} takes {'1 argument' if needed else '0 to 1 arguments'}, not {len(args)}")
        return Command(verb, session=args[0] if args else None, flags=frozenset(flags))
    if not verb.least_args <= len(args) <= verb.most_args:
        name = f"{verb.name} {verb.form}".strip()
        raise _error(door, f"{name} {verb.arity()}" + (f", not {len(args)}" if verb.most_args else ""))
    return Command(verb, tuple(args), frozenset(flags), session)


def takes(text: str, door: str = KERNEL) -> bool:
    """Whether ``door`` answers the ``%sandbox`` line ``text`` (the words after ``%sandbox``)
    itself: its verb is one of the door's, with no option and no more or fewer arguments than
    some form of it takes (a line of the kernel that names a session, ``--name`` or ``SESSION``,
    is left to the sandbox, whose own magic may know it). Such a line may still be refused by
    :func:`parse` (``download`` with neither REMOTE nor ``--artifacts``)."""
    try:
        words = shlex.split(text)
    except ValueError:
        return False
    forms = _forms(words[0], door) if words else []
    if not forms:
        return False
    flags = {flag for form in forms for flag in (*form.flags, form.form) if flag}
    args = [word for word in words[1:] if not word.startswith("-")]
    return all(word in flags for word in words[1:] if word.startswith("-")) and \
        min(form.least_args for form in forms) <= len(args) <= max(form.most_args for form in forms)


__all__ = ["BOTH", "Command", "Door", "KERNEL", "MAGIC", "VERBS", "Verb", "parse", "reference", "takes", "usage",
           "verbs"]

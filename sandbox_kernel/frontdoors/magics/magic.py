"""``SandboxMagics``: the ``%%sandbox`` cell magic and the ``%sandbox`` line magic.

Options of the magic itself are traitlets config of ``SandboxMagics``
(``%config SandboxMagics.default_backend = 'docker'``, or ``c.SandboxMagics...`` in
``ipython_config.py``); a backend made by the magic is its child, so ``c.DockerBackend...``
in the host's config applies too (the line's options take precedence).
"""

from __future__ import annotations

import functools
import os
import queue
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class
from traitlets import Bool, Float, Unicode

from sandbox_kernel.backends.base import Backend
from sandbox_kernel.core.errors import BadValue, ConfigError, LineUsageError, Locked, SandboxCellError, SandboxError
from sandbox_kernel.core.events import Error
from sandbox_kernel.policy import OutputOptions, OutputPolicy
from sandbox_kernel.runtime.config_check import unknown_options
from sandbox_kernel.runtime.traits import ByteSize
from sandbox_kernel.session import verbs
from sandbox_kernel.session.files import FileOptions
from sandbox_kernel.session.pipeline import NO_COMMS_NOTE
from sandbox_kernel.session.session import SandboxSession
from sandbox_kernel.session.verbs import MAGIC, Command

from . import session as sessions
from . import variables
from .comms import CommRelay, host_kernel
from .display import SandboxResult, cell_error, infrastructure_error
from .options import CELL_USAGE, LINE_USAGE, backend_traits, parse_cell_line, usage
from .run import run_cell, wait
from .session import COMMS_NOTE, Session, magic_backend_hint, magic_hint
from .status import ListView, status_info
from .widgets import StartProgress, StatusPanel


@magics_class
class SandboxMagics(Magics, OutputOptions):
    """Run chosen cells in a sandbox; everything else stays on the host.

    The sandbox's outputs pass the output policy (``output_policy``: ``sanitize`` by default,
    or ``--output-policy`` on a cell's line) before they reach the host's page.
    """

    default_backend = Unicode("local", help="The backend of sessions made without --backend.").tag(config=True)
    default_timeout = Float(None, allow_none=True,
                            help="Seconds a sandboxed cell may run when --timeout is not given; None: no limit."
                            ).tag(config=True)
    max_output_bytes = ByteSize(10 * 1024**2, help="Output one sandboxed cell may show, e.g. '10m'; the rest "
                                                   "is dropped with a marker. 0: no limit. Sessions made afterwards "
                                                   "also refuse any single message from a local or docker sandbox "
                                                   "larger than twice this (at least 32 MiB) before reading it, and "
                                                   "say so in one line (--max-message-bytes on the %%sandbox line "
                                                   "sets that bound itself).").tag(config=True)
    max_transfer_bytes = ByteSize(256 * 1024**2, help="Encoded size of one variable moved by -i/-o, push or pull, "
                                                      "e.g. '1g'; a larger one is refused before it is read. 0: no "
                                                      "limit.").tag(config=True)
    artifacts = Bool(True, help="After a sandboxed cell, list the files it created or changed in the sandbox's "
                                "working directory (%sandbox download --artifacts copies them here).").tag(config=True)

    def __init__(self, shell: Any = None, registry: sessions.Registry | None = None, **kwargs: Any) -> None:
        super().__init__(shell=shell, **kwargs)
        self.registry = registry or sessions.registry

    @line_cell_magic
    def sandbox(self, line: str, cell: str | None = None) -> Any:
        """Run a cell in a sandbox, or manage the sandbox sessions.

        Cell magic::

            %%sandbox [--backend NAME] [--name SESSION] [--timeout SECONDS]
                      [--output-policy sanitize|isolate|trust] [--OPTION VALUE ...]

        runs the cell in the session SESSION (default: ``default``), made with backend NAME
        (default: ``local``) on first use; ``--OPTION VALUE`` sets the backend's options (e.g.
        ``--memory-limit 1g``) when the session is made. State persists across cells of a
        session; the host's namespace is untouched. ``--output-policy`` decides what the
        cell's outputs may do in the page (default ``SandboxMagics.output_policy``, sanitize).

        Line magic (:data:`sandbox_kernel.session.verbs.VERBS`, the kernel's too)::

            {verbs}

        ``-i NAME`` / ``-o NAME`` on the cell's line (repeatable, or comma lists) copy host
        variables in before the cell, and sandbox variables back after it succeeded, as data
        only (JSON, bytes, ``.npy``, Arrow IPC: see docs/how-to/magic.md); at most
        ``max_transfer_bytes`` each.

        Files move between the notebook's directory and the sandbox's working directory.
        """
        try:
            return self._line(line) if cell is None else self._cell(line, cell)
        except (Locked, LineUsageError) as exc:  # the administrator's rule, said alone; a line's usage, said
            raise UsageError(str(exc)) from None
        except ConfigError as exc:
            raise usage(str(exc).rstrip("."), CELL_USAGE if cell is not None else LINE_USAGE) from None
        except SandboxError as exc:
            raise infrastructure_error(exc) from None
        except KeyboardInterrupt:  # while starting, restarting, stopping or copying
            raise cell_error(Error("KeyboardInterrupt", "interrupted; if a session misbehaves now, "
                                                        "%sandbox restart it")) from None

    if sandbox.__doc__:  # %sandbox? shows the table (python -OO has no docstrings)
        sandbox.__doc__ = sandbox.__doc__.replace("{verbs}", "\n            ".join(
            f"{usage}\n                {help_}" for usage, help_ in verbs.reference(MAGIC)))

    # -- %%sandbox ---------------------------------------------------------------------------
    def _cell(self, line: str, cell: str) -> SandboxResult | None:
        args = parse_cell_line(line)
        session = self._open(args.name, args.backend, args.options)
        session.sandbox.max_output_bytes = self.max_output_bytes  # %config may have changed it since
        timeout = args.timeout if args.timeout is not None else self.default_timeout
        namespace = self.shell.user_ns if self.shell is not None else {}
        variables.push(self.registry.loop, session, args.inputs, namespace, self.max_transfer_bytes)
        try:
            result = run_cell(self.registry.loop, session, cell, timeout=timeout,
                              max_output_bytes=self.max_output_bytes, policy=self._policy(args.output_policy))
        except SandboxCellError:
            variables.say_nothing_came_back(args.outputs)
            raise
        variables.pull(self.registry.loop, session, args.outputs, namespace, self.max_transfer_bytes)
        return result

    def _policy(self, mode: str | None = None) -> OutputPolicy:
        """The output policy of the magic's options now, with ``mode`` (the line's) if given."""
        return self.make_policy(hint=magic_hint, mode=mode)

    def _open(self, name: str, backend_name: str | None = None, options: list[str] | tuple = ()) -> Session:
        """The session ``name``, made (and its sandbox started) on first use."""
        session = self.registry.get(name)
        if session is not None:
            if backend_name and backend_name != session.sandbox.name:
                raise usage(f"session {name!r} runs the {session.sandbox.name} backend; to use {backend_name}, "
                            f"stop it first (%sandbox stop {name}) or choose another --name", CELL_USAGE)
            if options:
                backend_traits(session.sandbox.backend_class, list(options))  # a typo is still an error
                print(f"Note: backend options apply when a session is made; session {name!r} exists, so "
                      f"{' '.join(options)} is ignored (%sandbox stop {name} first to change them).", file=sys.stderr)
            return session
        kernel = host_kernel()
        sandbox = self._make_session(name, backend_name or self.default_backend, list(options), kernel is not None)
        progress_events: queue.Queue = queue.Queue()
        sandbox.set_progress_sink(progress_events.put)  # e.g. the docker image being built
        try:
            with StartProgress(name, sandbox.name) as progress:
                wait(self.registry.loop, sandbox.start(), inbox=progress_events, handle=progress.take)
        except BaseException:
            self.registry.loop.submit(sandbox.shutdown())
            raise
        finally:
            sandbox.set_progress_sink(None)
        session = Session(name, sandbox)
        if sandbox.pipeline.comms:
            session.comms = CommRelay(kernel, sandbox, functools.partial(wait, self.registry.loop))
        self.registry.add(session)
        return session

    def _make_session(self, name: str, backend_name: str, options: list[str], host_comms: bool) -> SandboxSession:
        """The session's :class:`SandboxSession`: the backend from the line's options and the
        host's config (a bad one is a usage error), its pipeline under the magic's policy."""
        def traits(cls: type[Backend]) -> dict[str, Any]:
            line = backend_traits(cls, options)
            sections = [c.__name__ for c in cls.__mro__ if issubclass(c, Backend)]  # the host's config for it
            if unknown := unknown_options(self.config, [cls], sections=sections, prefix="c."):
                raise usage(f"bad option for the {backend_name} backend in the IPython config: {'; '.join(unknown)}",
                            CELL_USAGE)
            return {"session": name, **line}

        try:
            return SandboxSession(backend_name, parent=self, policy=self._policy(), options=traits,
                                  output_budget=(self.max_output_bytes, "SandboxMagics.max_output_bytes"),
                                  page_comms=host_comms, no_comms_note=NO_COMMS_NOTE if host_comms else COMMS_NOTE,
                                  files=FileOptions(artifacts=self.artifacts, hint=magic_backend_hint(name)))
        except BadValue as exc:
            raise usage(f"bad option for the {backend_name} backend: {exc.detail}", CELL_USAGE) from None

    def _existing(self, name: str) -> Session:
        session = self.registry.get(name)
        if session is None:
            known = ", ".join(s.name for s in self.registry.sessions()) or "none yet"
            raise usage(f"unknown session {name!r} (sessions: {known})", LINE_USAGE)
        return session

    # -- %sandbox: the table and parser are the kernel's too (sandbox_kernel.session.verbs) ------
    def _line(self, line: str) -> Any:
        command = verbs.parse(line, MAGIC)
        if command.verb.run is not None:  # the same answer at every door
            session = self._existing(command.session or "default")
            print(wait(self.registry.loop, command.verb.run(_Door(session.sandbox, f"Session {session.name!r}"),
                                                            command)))
            return None
        return getattr(self, f"_cmd_{command.verb.name}")(command)

    def _cmd_list(self, command: Command) -> ListView | None:
        if not self.registry.sessions():
            print("No sandbox sessions yet: run a %%sandbox cell to start one.")
            return None
        return ListView([status_info(s) for s in self.registry.sessions()])

    def _cmd_status(self, command: Command) -> StatusPanel | None:
        chosen = [self._existing(command.session)] if command.session else self.registry.sessions()
        if not chosen:
            print("No sandbox sessions yet: run a %%sandbox cell to start one.")
            return None
        return StatusPanel(chosen, self.registry, restart=self._restart, stop=self._stop)

    def _restart(self, name: str) -> str:
        session = self._existing(name)
        wait(self.registry.loop, session.sandbox.restart())
        session.reset()
        return f"Restarted session {session.name!r} ({session.sandbox.name}): a fresh interpreter, state cleared."

    def _stop(self, name: str) -> str:
        session = self._existing(name)
        self.registry.remove(name)
        if session.comms is not None:
            session.comms.detach()
        wait(self.registry.loop, session.sandbox.shutdown())
        return f"Stopped session {name!r} ({session.sandbox.name})."

    def _cmd_restart(self, command: Command) -> None:
        print(self._restart(command.session))

    def _cmd_stop(self, command: Command) -> None:
        names = [s.name for s in self.registry.sessions()] if command.every else [self._existing(command.session).name]
        for name in names:
            print(self._stop(name))
        if not names:
            print("No sandbox sessions to stop.")

    def _cmd_upload(self, command: Command) -> None:
        local = Path(command.args[0]).expanduser()
        remote = command.args[1] if len(command.args) > 1 else local.name
        if not local.is_file():
            raise usage(f"no such file on the host: {command.args[0]} (in {os.getcwd()})", LINE_USAGE)
        session = self._open(command.session or "default")
        wait(self.registry.loop, session.sandbox.upload(local, remote))
        print(f"Uploaded {command.args[0]} to {remote} in session {session.name!r}.")

    def _cmd_push(self, command: Command) -> None:
        self._transfer(command, push=True)

    def _cmd_pull(self, command: Command) -> None:
        self._transfer(command, push=False)

    def _transfer(self, command: Command, push: bool) -> None:
        """``%sandbox push NAMES`` (host variables into the session) or ``pull`` (back)."""
        names = [n.strip() for arg in command.args for n in arg.split(",") if n.strip()]
        if not names:
            raise usage(f"{command.verb.name} needs variable names", LINE_USAGE)
        name = command.session or "default"
        session = self._open(name) if push else self._existing(name)
        (variables.push if push else variables.pull)(self.registry.loop, session, names, self.shell.user_ns,
                                                     self.max_transfer_bytes)
        print(f"{'Pushed' if push else 'Pulled'} {', '.join(names)} {'to' if push else 'from'} session {session.name!r}.")

    def _cmd_download(self, command: Command) -> None:
        session = self._existing(command.session or "default")
        overwrite = "--overwrite" in command.flags
        if command.verb.form == "--artifacts":  # what the session's cells wrote, into this folder
            files = session.sandbox.files
            print(files.summary() if not files.ledger.files else "\n".join(
                wait(self.registry.loop, files.download_all(Path.cwd(), overwrite=overwrite)).lines()))
            return
        remote = command.args[0]
        local = Path(command.args[1]).expanduser() if len(command.args) > 1 else Path(Path(remote).name)
        if not local.parent.is_dir():
            raise usage(f"no such directory on the host: {local.parent}", LINE_USAGE)
        try:
            wait(self.registry.loop, session.sandbox.files.download_one(remote, local, overwrite=overwrite))
        except FileNotFoundError:
            raise usage(f"no such file in session {session.name!r}: {remote}", LINE_USAGE) from None
        print(f"Downloaded {remote} from session {session.name!r} to {local}.")


@dataclass
class _Door:
    """The magic as the :class:`~sandbox_kernel.session.verbs.Door` of a verb's shared answer. It
    asks nobody: the magic's notebook runs on the host already."""

    session: SandboxSession
    subject: str

    async def consent(self, kind: str, question: str, about: str) -> None:
        return None
